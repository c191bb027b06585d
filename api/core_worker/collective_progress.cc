// The core worker's part of collective groups (collective/, docs/collective.md): each rank's
// progress kept in its own memory, read by the other ranks through proto::Owner only when one of
// their operations passed its deadline; and the head KV's deletes their rendezvous uses.
#include <string>

#include <kj/async-io.h>

#include "api/core_worker/capnp_util.h"
#include "api/core_worker/core_worker_impl.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"

namespace airt::core_worker {

Result<bool> CoreWorker::Impl::KvDelete(const std::string& ns, const std::string& key) {
  bool deleted = false;
  Status done = CatchKj([&] {
    OnLoop([&] {
      auto request = Head().kvDeleteRequest();
      request.setNamespace(ns);
      request.setKey(key);
      return request.send().then([&](auto reply) { deleted = reply.getDeleted(); });
    });
  });
  if (!done.ok()) return done;
  return deleted;
}

Result<uint32_t> CoreWorker::Impl::KvDeletePrefix(const std::string& ns,
                                                  const std::string& prefix) {
  if (prefix.empty()) return InvalidArgument("deleting keys of namespace '" + ns +
                                             "' by prefix: the prefix is empty");
  uint32_t deleted = 0;
  Status done = CatchKj([&] {
    OnLoop([&] {
      auto request = Head().kvDeletePrefixRequest();
      request.setNamespace(ns);
      request.setPrefix(prefix);
      return request.send().then([&](auto reply) { deleted = reply.getDeleted(); });
    });
  });
  if (!done.ok()) return done;
  return deleted;
}

void CoreWorker::Impl::RecordCollectiveProgress(const std::string& group,
                                                std::optional<uint64_t> entered) {
  std::lock_guard<std::mutex> lock(progress_mu_);
  if (entered) {
    progress_[group] = CollectiveProgress{*entered, false};
  } else if (auto it = progress_.find(group); it != progress_.end()) {
    it->second.left = true;
  }
}

std::optional<CollectiveProgress> CoreWorker::Impl::CollectiveProgressOf(const std::string& group) {
  std::lock_guard<std::mutex> lock(progress_mu_);
  auto it = progress_.find(group);
  if (it == progress_.end()) return std::nullopt;
  return it->second;
}

Result<std::string> CoreWorker::Impl::CollectiveProgressAddress() {
  std::string address;
  Status served = CatchKj([&] {
    OnLoop([&] { return ServeOwner().then([&] { address = owner_address_; }); });
  });
  if (!served.ok()) {
    return served.WithContext("serving collective progress on " + options_.node_address);
  }
  return address;
}

Result<std::optional<CollectiveProgress>> CoreWorker::Impl::QueryCollectiveProgress(
    const std::string& address, const std::string& group, int64_t timeout_ms) {
  std::optional<CollectiveProgress> entered;
  Status asked = CatchKj([&] {
    OnLoop([&] {
      auto request = Connect(address).castAs<proto::Owner>().collectiveProgressRequest();
      request.setGroup(group);
      return loop_->io.provider->getTimer()
          .timeoutAfter(timeout_ms * kj::MILLISECONDS, request.send())
          .then(
              [&](auto reply) {
                if (reply.getKnown()) {
                  entered = CollectiveProgress{reply.getEntered(), reply.getLeft()};
                }
              },
              [this, address](kj::Exception&& e) {
                Forget(address);
                kj::throwFatalException(kj::mv(e));
              });
    });
  });
  if (!asked.ok()) {
    return asked.WithContext("reading collective group '" + group + "' progress at " + address);
  }
  return entered;
}

}  // namespace airt::core_worker
