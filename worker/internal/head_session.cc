#include "worker/internal/head_session.h"

#include <algorithm>

#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::worker {
namespace {

constexpr uint32_t kDefaultHeartbeatMs = 1000;
constexpr uint32_t kMaxHeartbeatMs = 3'600'000;

int64_t Ms(kj::Duration d) { return d / kj::MILLISECONDS; }

// The head keeps a hold call pending on it for as long as this node's connection lives.
class HeldSession final : public proto::NodeSession::Server {
 protected:
  kj::Promise<void> hold(HoldContext) override { return kj::NEVER_DONE; }
};

void FillResources(const std::vector<ResourceAmount>& from,
                   capnp::List<proto::Resource>::Builder to) {
  for (size_t i = 0; i < from.size(); ++i) {
    to[i].setName(from[i].name);
    to[i].setAmount(from[i].amount);
  }
}

void FillIds(const std::vector<uint32_t>& from, capnp::List<uint32_t>::Builder to) {
  for (size_t i = 0; i < from.size(); ++i) to.set(i, from[i]);
}

}  // namespace

void FillNodeInfo(const NodeRegistration& node, proto::NodeInfo::Builder info) {
  info.setNodeId(capnp::Data::Reader(node.id.data(), NodeId::kSize));
  info.setAddress(node.address);
  info.setNodePort(node.node_port);
  info.setTransferPort(node.transfer_port);
  info.setStoreSocket(node.store_socket);
  FillResources(node.total, info.initTotal(node.total.size()));
  auto labels = info.initLabels(node.labels.size());
  for (size_t i = 0; i < node.labels.size(); ++i) {
    labels[i].setKey(node.labels[i].first);
    labels[i].setValue(node.labels[i].second);
  }
  FillIds(node.gpu_ids, info.initGpuIds(node.gpu_ids.size()));
  info.setTempDir(node.temp_dir);
  info.setPid(node.pid);
}

proto::Head::Client EzRpcHeadConnector::Connect() {
  // The new client first: the old one may hold the last reference to the thread's EzRpc loop.
  auto next = std::make_unique<capnp::EzRpcClient>(address_);
  client_ = std::move(next);
  return client_->getMain<proto::Head>();
}

HeadSession::HeadSession(HeadConnector& connector, kj::Timer& timer, NodeRegistration node,
                         const ResourceReporter& resources, HeadSessionOptions options,
                         std::function<void()> on_first_registration)
    : connector_(connector),
      timer_(timer),
      node_(std::move(node)),
      resources_(resources),
      options_(options),
      on_first_registration_(std::move(on_first_registration)),
      random_(static_cast<uint32_t>(node_.id.Hash())),
      next_retry_delay_(options.min_retry_delay),
      session_(kj::heap<HeldSession>()) {
  auto paf = kj::newPromiseAndFulfiller<std::string>();
  given_up_ = kj::mv(paf.fulfiller);
  given_up_promise_ = kj::mv(paf.promise);
}

kj::Promise<std::string> HeadSession::WhenGivenUp() {
  KJ_IF_MAYBE (promise, given_up_promise_) {
    kj::Promise<std::string> out = kj::mv(*promise);
    given_up_promise_ = nullptr;
    return out;
  }
  AIRT_CHECK(false) << "HeadSession::WhenGivenUp called twice";
  return kj::NEVER_DONE;
}

kj::Promise<void> HeadSession::GiveUp(std::string why) {
  snapshot_.state = State::kGaveUp;
  snapshot_.gave_up = why;
  AIRT_LOG(ERROR) << why;
  head_ = nullptr;
  if (given_up_->isWaiting()) given_up_->fulfill(kj::mv(why));
  return kj::NEVER_DONE;
}

HeadSession::~HeadSession() {
  run_ = nullptr;  // cancel before the rest goes
}

void HeadSession::Start() {
  AIRT_CHECK(snapshot_.state == State::kIdle) << "HeadSession started twice";
  snapshot_.state = State::kRegistering;
  run_ = kj::evalLater([this] {
           Reconnect();
           return Register();
         }).eagerlyEvaluate([](kj::Exception&& e) {
    // Every call's failure is handled where it happens; this is our own bug.
    AIRT_LOG(ERROR) << "head session stopped: " << FromKjException(e).ToString();
  });
}

proto::Head::Client& HeadSession::Head() {
  KJ_IF_MAYBE (head, head_) {
    return *head;
  }
  Reconnect();
  return KJ_ASSERT_NONNULL(head_);
}

void HeadSession::Reconnect() {
  head_ = nullptr;  // drop the old capability before its connection
  head_ = connector_.Connect();
}

capnp::Data::Reader HeadSession::NodeIdBytes() const {
  return capnp::Data::Reader(node_.id.data(), NodeId::kSize);
}

kj::Promise<void> HeadSession::Register() {
  snapshot_.state = State::kRegistering;
  auto request = Head().registerNodeRequest();
  FillNodeInfo(node_, request.initInfo());
  request.setSession(session_);
  std::vector<HeldBundles> held = resources_.Report().held_bundles;
  auto out = request.initHeldBundles(held.size());
  for (size_t i = 0; i < held.size(); ++i) {
    out[i].setGroupId(capnp::Data::Reader(held[i].group.data(), PlacementGroupId::kSize));
    auto indices = out[i].initIndices(held[i].indices.size());
    for (size_t k = 0; k < held[i].indices.size(); ++k) indices.set(k, held[i].indices[k]);
  }
  kj::Promise<capnp::Response<proto::Head::RegisterNodeResults>> sent = request.send();
  return timer_.timeoutAfter(options_.call_timeout, kj::mv(sent))
      .then(
          [this](capnp::Response<proto::Head::RegisterNodeResults>&& reply) -> kj::Promise<void> {
            uint32_t interval = reply.getHeartbeatIntervalMs();
            if (interval == 0 || interval > kMaxHeartbeatMs) {
              uint32_t used = interval == 0 ? kDefaultHeartbeatMs : kMaxHeartbeatMs;
              AIRT_LOG(WARNING) << "the head asked for heartbeats every " << interval
                                << " ms; using " << used << " ms";
              interval = used;
            }
            heartbeat_interval_ = interval * kj::MILLISECONDS;
            snapshot_.heartbeat_interval_ms = interval;
            snapshot_.node_timeout_ms = reply.getNodeTimeoutMs();
            snapshot_.registrations++;
            snapshot_.consecutive_failures = 0;
            failing_since_ = nullptr;
            timeouts_in_a_row_ = 0;
            next_retry_delay_ = options_.min_retry_delay;
            known_ = true;
            AIRT_LOG(INFO) << "registered node " << node_.id.Hex() << " with the head; heartbeat "
                           << "every " << interval << " ms";
            if (snapshot_.registrations == 1 && on_first_registration_) on_first_registration_();
            return HeartbeatLater();
          },
          [this](kj::Exception&& e) {
            Status status = FromKjException(e);
            if (status.code() == Code::kFailedPrecondition) {
              return GiveUp("the head refused node " + node_.id.Hex() + ": " + status.message() +
                            "; this airt-node exits");
            }
            return RetryLater("registerNode", e);
          });
}

kj::Promise<void> HeadSession::HeartbeatLater() {
  snapshot_.state = State::kRegistered;
  auto poked = kj::newPromiseAndFulfiller<void>();
  poke_ = kj::mv(poked.fulfiller);
  return timer_.afterDelay(heartbeat_interval_)
      .exclusiveJoin(kj::mv(poked.promise).then([this] {
        return timer_.afterDelay(50 * kj::MILLISECONDS);
      }))
      .then([this] { return Heartbeat(); });
}

void HeadSession::ReportSoon() {
  if (poke_.get() != nullptr && poke_->isWaiting()) poke_->fulfill();
}

kj::Promise<void> HeadSession::Heartbeat() {
  auto request = Head().heartbeatRequest();
  request.setNodeId(NodeIdBytes());
  ResourceReport report = resources_.Report();
  FillResources(report.available, request.initAvailable(report.available.size()));
  FillIds(report.gpu_ids_in_use, request.initGpuIdsInUse(report.gpu_ids_in_use.size()));
  FillIds(report.quarantined_gpu_ids,
          request.initQuarantinedGpuIds(report.quarantined_gpu_ids.size()));
  request.setJobsSeen(snapshot_.jobs_seen);
  auto queued = request.initQueued(report.queued.size());
  for (size_t i = 0; i < report.queued.size(); ++i) {
    FillResources(report.queued[i].resources,
                  queued[i].initResources(report.queued[i].resources.size()));
    queued[i].setAcceleratorType(report.queued[i].accelerator_type);
    queued[i].setCount(report.queued[i].count);
  }
  request.setNumLeases(report.num_leases);
  request.setNumPrimaryObjects(report.num_primary_objects);
  request.setStoreFreeBytes(report.store_free_bytes);
  kj::Promise<capnp::Response<proto::Head::HeartbeatResults>> sent = request.send();
  return timer_.timeoutAfter(options_.call_timeout, kj::mv(sent))
      .then(
          [this](capnp::Response<proto::Head::HeartbeatResults>&& reply) -> kj::Promise<void> {
            snapshot_.consecutive_failures = 0;
            failing_since_ = nullptr;
            timeouts_in_a_row_ = 0;
            next_retry_delay_ = options_.min_retry_delay;
            NoteFinishedJobs(reply);
            if (reply.getKnown()) {
              snapshot_.heartbeats++;
              return HeartbeatLater();
            }
            known_ = false;
            AIRT_LOG(WARNING) << "the head does not know node " << node_.id.Hex()
                              << " (it restarted or declared the node dead); registering again";
            return Register();
          },
          [this](kj::Exception&& e) { return RetryLater("heartbeat", e); });
}

void HeadSession::NoteFinishedJobs(proto::Head::HeartbeatResults::Reader reply) {
  std::vector<JobId> jobs;
  for (capnp::Data::Reader id : reply.getFinishedJobs()) {
    if (id.size() != JobId::kSize) {
      AIRT_LOG(WARNING) << "the head listed a finished job id of " << id.size()
                        << " bytes; ignoring it";
      continue;
    }
    jobs.push_back(JobId::FromRaw(id.begin()));
  }
  snapshot_.jobs_seen = reply.getFinishedSeq();
  if (jobs.empty()) return;
  snapshot_.finished_jobs += jobs.size();
  if (on_finished_jobs_) on_finished_jobs_(std::move(jobs));
}

kj::Promise<void> HeadSession::RetryLater(const char* call, const kj::Exception& exception) {
  Status status = FromKjException(exception);
  snapshot_.failures++;
  snapshot_.consecutive_failures++;
  snapshot_.last_error = std::string(call) + ": " + status.ToString();
  kj::TimePoint now = timer_.now();
  kj::TimePoint since = now;
  KJ_IF_MAYBE (first, failing_since_) {
    since = *first;
  } else {
    failing_since_ = now;
  }
  if (options_.reconnect_timeout > 0 * kj::SECONDS && now - since >= options_.reconnect_timeout) {
    return GiveUp("node " + node_.id.Hex() + " could not reach the head for " +
                  std::to_string(Ms(now - since) / 1000) + " s, past its reconnect window of " +
                  std::to_string(Ms(options_.reconnect_timeout) / 1000) +
                  " s (--head-reconnect-timeout-s, $RAY_gcs_rpc_server_reconnect_timeout_s); " +
                  "last error: " + snapshot_.last_error + "; this airt-node exits");
  }
  // A failed call gets a fresh connection; a slow answer (the call's own timeout, OVERLOADED)
  // keeps it, up to a few in a row.
  bool timed_out = exception.getType() == kj::Exception::Type::OVERLOADED;
  timeouts_in_a_row_ = timed_out ? timeouts_in_a_row_ + 1 : 0;
  bool broken = !timed_out;
  bool reconnect = broken || timeouts_in_a_row_ >= options_.timeouts_before_reconnect;
  if (reconnect) timeouts_in_a_row_ = 0;
  kj::Duration delay = next_retry_delay_;
  next_retry_delay_ = std::min(next_retry_delay_ * 2, options_.max_retry_delay);
  if (options_.retry_jitter > 0) {
    double factor = 1.0 - std::uniform_real_distribution<double>(
                              0.0, std::min(options_.retry_jitter, 1.0))(random_);
    delay = static_cast<int64_t>(static_cast<double>(delay / kj::NANOSECONDS) * factor) *
            kj::NANOSECONDS;
  }
  snapshot_.state = State::kRetrying;
  snapshot_.retry_delay_ms = static_cast<uint64_t>(Ms(delay));
  AIRT_LOG(WARNING) << "head unreachable or failing (" << snapshot_.last_error << "); attempt "
                    << snapshot_.consecutive_failures << " failed, retrying in " << Ms(delay)
                    << " ms";
  if (reconnect) head_ = nullptr;  // a fresh connection for the retry
  return timer_.afterDelay(delay).then([this, reconnect]() -> kj::Promise<void> {
    snapshot_.retry_delay_ms = 0;
    if (reconnect) Reconnect();
    if (known_) {
      snapshot_.state = State::kRegistered;
      return Heartbeat();
    }
    return Register();
  });
}

kj::Promise<void> HeadSession::Unregister(kj::Duration timeout) {
  run_ = nullptr;  // no more heartbeats or retries; cancels a call in flight
  snapshot_.state = State::kStopped;
  auto request = Head().unregisterNodeRequest();
  request.setNodeId(NodeIdBytes());
  kj::Promise<void> sent = request.send().ignoreResult();
  return timer_.timeoutAfter(timeout, kj::mv(sent))
      .then(
          [this] { AIRT_LOG(INFO) << "unregistered node " << node_.id.Hex() << " from the head"; },
          [this](kj::Exception&& e) {
            AIRT_LOG(WARNING) << "could not unregister node " << node_.id.Hex() << ": "
                              << FromKjException(e).ToString();
          });
}

}  // namespace airt::worker
