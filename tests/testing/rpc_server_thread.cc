#include "tests/testing/rpc_server_thread.h"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>

#include <capnp/ez-rpc.h>
#include <kj/async-io.h>

namespace airt::testing {

RpcServerThread::RpcServerThread(std::function<capnp::Capability::Client()> make_bootstrap,
                                 uint16_t port) {
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
  thread_ = std::thread([announce, make_bootstrap = std::move(make_bootstrap), port, read_fd] {
    bool announced = false;
    bool owned = false;
    kj::Maybe<kj::Exception> failed = kj::runCatchingExceptions([&] {
      capnp::EzRpcServer server(make_bootstrap(), "127.0.0.1", port);
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

RpcServerThread::~RpcServerThread() {
  if (stop_fd_ >= 0 && port_ != 0) {  // port_ 0: the server thread is gone already
    char byte = 'x';
    (void)!::write(stop_fd_, &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

}  // namespace airt::testing
