#include "tests/api/fake_node.h"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>

#include <capnp/ez-rpc.h>
#include <kj/async-io.h>

#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"

namespace airt::testing {
namespace {

class FakeNode final : public proto::Node::Server {
 public:
  explicit FakeNode(std::shared_ptr<FakeNodeState> state) : state_(std::move(state)) {}

 protected:
  kj::Promise<void> registerWorker(RegisterWorkerContext context) override {
    auto worker = context.getParams().getWorker();
    auto id_bytes = worker.getWorkerId();
    auto id = WorkerId::FromBinary(
        std::string_view(reinterpret_cast<const char*>(id_bytes.begin()), id_bytes.size()));
    if (!id.ok()) throw ToKjException(id.status().WithContext("workerId"));
    state_->Record({*id, worker.getHost(), worker.getPort(), worker.getPid()});
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<FakeNodeState> state_;
};

}  // namespace

std::vector<RegisteredWorker> FakeNodeState::Registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}

void FakeNodeState::Record(RegisteredWorker worker) {
  std::lock_guard<std::mutex> lock(mu_);
  registrations_.push_back(std::move(worker));
}

FakeNodeThread::FakeNodeThread(std::shared_ptr<FakeNodeState> state) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  stop_fd_ = fds[1];
  int read_fd = fds[0];
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  // Announces the outcome once, notifying under the lock: the constructor's locals may be gone as
  // soon as the lock is released.
  auto announce = [&mu, &cv, &ready, this](uint16_t bound) {
    std::lock_guard<std::mutex> lock(mu);
    port_ = bound;
    ready = true;
    cv.notify_one();
  };
  thread_ = std::thread([announce, state, read_fd] {
    bool announced = false;
    bool owned = false;
    kj::Maybe<kj::Exception> failed = kj::runCatchingExceptions([&] {
      capnp::EzRpcServer server(kj::heap<FakeNode>(state), "127.0.0.1", 0);
      auto& wait = server.getWaitScope();
      auto bound = static_cast<uint16_t>(server.getPort().wait(wait));
      using Flags = kj::LowLevelAsyncIoProvider;
      auto stop = server.getLowLevelIoProvider().wrapInputFd(read_fd, Flags::TAKE_OWNERSHIP);
      owned = true;
      announced = true;
      announce(bound);
      char byte;
      stop->tryRead(&byte, 1, 1).wait(wait);
    });
    if (!owned) ::close(read_fd);
    if (failed != nullptr && !announced) announce(0);
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return ready; });
}

FakeNodeThread::~FakeNodeThread() {
  if (stop_fd_ >= 0 && port_ != 0) {
    char byte = 'x';
    (void)!::write(stop_fd_, &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

}  // namespace airt::testing
