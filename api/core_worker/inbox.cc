#include "api/core_worker/inbox.h"

namespace airt::core {

void Inbox::Post(kj::Function<void()> item) {
  std::lock_guard<std::mutex> lock(mu_);
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

void Inbox::RunPending() {
  std::vector<kj::Function<void()>> items;
  {
    std::lock_guard<std::mutex> lock(mu_);
    items.swap(items_);
  }
  for (kj::Function<void()>& item : items) item();
}

}  // namespace airt::core
