#include "common/inbox.h"

namespace airt {

void Inbox::Post(kj::Function<void()> item) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) {
    lock.unlock();
    return;  // `item` goes here
  }
  items_.push_back(kj::mv(item));
  if (wake_ && wake_->isWaiting()) wake_->fulfill();
}

kj::Promise<void> Inbox::Serve() {
  auto paf = kj::newPromiseAndCrossThreadFulfiller<void>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = kj::mv(paf.fulfiller);
    if (!items_.empty()) wake_->fulfill();
  }
  return paf.promise.then([this] {
    RunPending();
    return Serve();
  });
}

void Inbox::Close() {
  std::vector<kj::Function<void()>> dropped;
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  wake_ = nullptr;
  dropped.swap(items_);
}

void Inbox::RunPending() {
  std::vector<kj::Function<void()>> items;
  {
    std::lock_guard<std::mutex> lock(mu_);
    items.swap(items_);
  }
  for (kj::Function<void()>& item : items) item();
}

}  // namespace airt
