#include "tests/api/in_process_network.h"

#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <utility>

#include <capnp/rpc-twoparty.h>

#include "common/rpc_status.h"
#include "common/status.h"

namespace airt::testing {

// A connection's client end that leaves the network's registry before its socket closes, so that
// Break never shuts down a descriptor reused by something else.
class InProcessNetwork::TrackedStream final : public kj::AsyncIoStream {
 public:
  TrackedStream(InProcessNetwork& network, std::string address, int fd,
                kj::Own<kj::AsyncIoStream> inner)
      : network_(network), address_(std::move(address)), fd_(fd), inner_(kj::mv(inner)) {}
  ~TrackedStream() noexcept(false) { network_.Untrack(address_, fd_); }

  kj::Promise<size_t> tryRead(void* buffer, size_t min, size_t max) override {
    return inner_->tryRead(buffer, min, max);
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    return inner_->write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return inner_->write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_->whenWriteDisconnected(); }
  void shutdownWrite() override { inner_->shutdownWrite(); }
  void abortRead() override { inner_->abortRead(); }

 private:
  InProcessNetwork& network_;
  std::string address_;
  int fd_;
  kj::Own<kj::AsyncIoStream> inner_;
};

class InProcessNetwork::Receiver final : public kj::ConnectionReceiver {
 public:
  Receiver(InProcessNetwork& network, kj::AsyncIoContext& io, std::string address, uint port)
      : network_(network), io_(io), address_(std::move(address)), port_(port) {}
  ~Receiver() { network_.Unbind(address_); }

  kj::Promise<kj::Own<kj::AsyncIoStream>> accept() override {
    auto paf = kj::newPromiseAndCrossThreadFulfiller<void>();
    int fd = network_.TakePending(address_, kj::mv(paf.fulfiller));
    if (fd >= 0) {
      return io_.lowLevelProvider->wrapSocketFd(fd, kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP);
    }
    return paf.promise.then([this] { return accept(); });
  }
  uint getPort() override { return port_; }

 private:
  InProcessNetwork& network_;
  kj::AsyncIoContext& io_;
  std::string address_;
  uint port_;
};

InProcessNetwork::~InProcessNetwork() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [address, endpoint] : bound_) {
    for (int fd : endpoint->pending) ::close(fd);
  }
}

kj::Promise<kj::Own<kj::AsyncIoStream>> InProcessNetwork::Connect(kj::AsyncIoContext& io,
                                                                  const std::string& address) {
  int ends[2];
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto bound = bound_.find(address);
    if (bound == bound_.end()) return tcp_.Connect(io, address);
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
      return ToKjException(Unavailable("socketpair for " + address + " failed"));
    }
    live_[address].push_back(ends[0]);
    ++made_[address];
    bound->second->pending.push_back(ends[1]);
    if (bound->second->wake) {
      bound->second->wake->fulfill();
      bound->second->wake = nullptr;
    }
  }
  return kj::Own<kj::AsyncIoStream>(kj::heap<TrackedStream>(
      *this, address, ends[0],
      io.lowLevelProvider->wrapSocketFd(ends[0], kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP)));
}

kj::Promise<kj::Own<kj::ConnectionReceiver>> InProcessNetwork::Listen(kj::AsyncIoContext& io,
                                                                      const std::string& host) {
  std::string address;
  uint32_t port;
  {
    std::lock_guard<std::mutex> lock(mu_);
    port = ++next_port_[host];
    if (reuse_ports_) {
      for (port = 1; bound_.count(host + ":" + std::to_string(port)) != 0; ++port) {
      }
    }
    address = host + ":" + std::to_string(port);
    bound_[address] = std::make_unique<Endpoint>();
  }
  return kj::Own<kj::ConnectionReceiver>(kj::heap<Receiver>(*this, io, address, port));
}

void InProcessNetwork::ReuseFreedPorts() {
  std::lock_guard<std::mutex> lock(mu_);
  reuse_ports_ = true;
}

size_t InProcessNetwork::Break(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(address);
  if (it == live_.end()) return 0;
  for (int fd : it->second) ::shutdown(fd, SHUT_RDWR);
  return it->second.size();
}

size_t InProcessNetwork::Connections(const std::string& address) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = made_.find(address);
  return it == made_.end() ? 0 : it->second;
}

void InProcessNetwork::Untrack(const std::string& address, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase(live_[address], fd);
}

int InProcessNetwork::TakePending(const std::string& address,
                                  kj::Own<kj::CrossThreadPromiseFulfiller<void>> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  auto bound = bound_.find(address);
  if (bound == bound_.end()) return -1;  // never woken: the receiver is going away
  Endpoint& endpoint = *bound->second;
  if (endpoint.pending.empty()) {
    endpoint.wake = kj::mv(wake);
    return -1;
  }
  int fd = endpoint.pending.front();
  endpoint.pending.pop_front();
  return fd;
}

void InProcessNetwork::Unbind(const std::string& address) {
  std::unique_ptr<Endpoint> endpoint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto bound = bound_.find(address);
    if (bound == bound_.end()) return;
    endpoint = std::move(bound->second);
    bound_.erase(bound);
  }
  for (int fd : endpoint->pending) ::close(fd);
}

InProcessServer::InProcessServer(std::shared_ptr<InProcessNetwork> network,
                                 const std::string& host,
                                 std::function<capnp::Capability::Client()> make) {
  std::promise<std::string> bound;
  thread_ = std::thread([this, network, host, make = std::move(make), &bound] {
    kj::AsyncIoContext io = kj::setupAsyncIo();
    capnp::TwoPartyServer server(make());
    kj::Own<kj::ConnectionReceiver> listener = network->Listen(io, host).wait(io.waitScope);
    auto stop = kj::newPromiseAndCrossThreadFulfiller<void>();
    stop_ = kj::mv(stop.fulfiller);
    bound.set_value(host + ":" + std::to_string(listener->getPort()));
    stop.promise.exclusiveJoin(server.listen(*listener)).wait(io.waitScope);
  });
  address_ = bound.get_future().get();
}

InProcessServer::~InProcessServer() {
  stop_->fulfill();
  thread_.join();
}

}  // namespace airt::testing
