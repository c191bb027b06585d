// The node's side of the Head interface (common/proto/cluster.capnp): register (handing the head a
// NodeSession, so that the head sees this connection drop), heartbeat at the interval the head
// asks for, register again when the head has forgotten the node, and keep retrying with backoff
// while the head is unreachable, for at most the reconnect window. The session gives up (see
// WhenGivenUp) when the window passes or when the head refuses the node (it declared it dead).
// Each heartbeat also brings the jobs finished since the previous one, which the session hands on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <capnp/ez-rpc.h>
#include <kj/async.h>
#include <kj/timer.h>

#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "worker/internal/node_config.h"
#include "worker/internal/resource_report.h"

namespace airt::worker {

// What the node tells the head about itself (proto::NodeInfo).
struct NodeRegistration {
  NodeId id;
  std::string address;
  uint16_t node_port = 0;
  uint16_t transfer_port = 0;
  std::string store_socket;
  std::vector<ResourceAmount> total;
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<uint32_t> gpu_ids;
  std::string temp_dir;  // the node's own folder
  int32_t pid = 0;
};

void FillNodeInfo(const NodeRegistration& node, proto::NodeInfo::Builder info);

// Opens connections to the head. Used on the event loop's thread only.
class HeadConnector {
 public:
  virtual ~HeadConnector() = default;
  // The head over a new connection; the previous connection is closed. Calls on it fail
  // (kUnavailable once translated) while the head cannot be reached.
  virtual proto::Head::Client Connect() = 0;
};

// Connects with capnp::EzRpcClient, sharing the EzRpc event loop of the calling thread: some
// EzRpcServer or EzRpcClient must keep that loop alive for as long as this is used.
class EzRpcHeadConnector final : public HeadConnector {
 public:
  explicit EzRpcHeadConnector(std::string address) : address_(std::move(address)) {}
  proto::Head::Client Connect() override;

 private:
  std::string address_;
  std::unique_ptr<capnp::EzRpcClient> client_;
};

struct HeadSessionOptions {
  kj::Duration call_timeout = 5 * kj::SECONDS;  // each registerNode, heartbeat
  kj::Duration min_retry_delay = 100 * kj::MILLISECONDS;
  kj::Duration max_retry_delay = 5 * kj::SECONDS;  // the delay doubles up to this
  double retry_jitter = 0.2;  // each delay is scaled by a random factor in [1 - jitter, 1]
  // How long calls may keep failing (counted from the first failure of a run) before the session
  // gives up; Ray's gcs_rpc_server_reconnect_timeout_s. Zero: never.
  kj::Duration reconnect_timeout = 60 * kj::SECONDS;
  // Consecutive timed-out calls after which a fresh connection is opened (a broken connection
  // is replaced at once). Timeouts alone keep the connection, so a slow head does not see this
  // node's session drop.
  uint32_t timeouts_before_reconnect = 3;
};

// For tests, logs and `airt status`.
struct HeadSessionSnapshot {
  enum class State { kIdle, kRegistering, kRegistered, kRetrying, kStopped, kGaveUp };
  State state = State::kIdle;
  uint64_t registrations = 0;  // registerNode calls the head answered
  uint64_t heartbeats = 0;     // heartbeats the head answered with known=true
  uint64_t failures = 0;       // calls that failed or timed out
  uint64_t consecutive_failures = 0;
  uint64_t jobs_seen = 0;              // the head's finishedSeq at the last heartbeat answered
  uint64_t finished_jobs = 0;          // finished jobs handed on
  uint32_t heartbeat_interval_ms = 0;  // as the head last asked (after clamping)
  uint32_t node_timeout_ms = 0;
  uint64_t retry_delay_ms = 0;  // the wait before the pending retry, in kRetrying
  std::string last_error;       // "heartbeat: kUnavailable: ..."
  std::string gave_up;          // kGaveUp: why (what WhenGivenUp resolved with)
};

// Runs on one KJ event loop; every method is called on that loop's thread. Dropping it cancels
// whatever call is in flight.
class HeadSession {
 public:
  // Called with the jobs a heartbeat's answer lists as finished (never empty).
  using OnFinishedJobs = std::function<void(std::vector<JobId> jobs)>;

  // `connector`, `timer` and `resources` must outlive this. `on_first_registration` runs once,
  // when the head first answers registerNode.
  HeadSession(HeadConnector& connector, kj::Timer& timer, NodeRegistration node,
              const ResourceReporter& resources, HeadSessionOptions options,
              std::function<void()> on_first_registration);
  ~HeadSession();
  HeadSession(const HeadSession&) = delete;
  HeadSession& operator=(const HeadSession&) = delete;

  void SetOnFinishedJobs(OnFinishedJobs on_finished_jobs) {
    on_finished_jobs_ = std::move(on_finished_jobs);
  }
  // Connects and registers, then heartbeats until Unregister or destruction.
  void Start();
  // Sends the next heartbeat soon (within 50 ms) instead of at the interval, when registered;
  // does nothing otherwise. Pokes within those 50 ms share one heartbeat.
  void ReportSoon();
  // Stops heartbeating and retrying, and tells the head the node is leaving. Resolves when the
  // head answered or `timeout` passed; never rejects (best effort: a failure is logged).
  kj::Promise<void> Unregister(kj::Duration timeout);

  // Resolves, with a message saying why, when the session stopped for good: the head refused the
  // node (it declared it dead: the node must restart clean) or it could not be reached for the
  // reconnect window. Called at most once.
  kj::Promise<std::string> WhenGivenUp();

  HeadSessionSnapshot Snapshot() const { return snapshot_; }
  const NodeRegistration& node() const { return node_; }

 private:
  using State = HeadSessionSnapshot::State;

  proto::Head::Client& Head();
  void Reconnect();
  kj::Promise<void> Register();
  kj::Promise<void> HeartbeatLater();
  kj::Promise<void> Heartbeat();
  // Notes the answer's finishedSeq and hands its finished jobs to on_finished_jobs_.
  void NoteFinishedJobs(proto::Head::HeartbeatResults::Reader reply);
  kj::Promise<void> RetryLater(const char* call, const kj::Exception& exception);
  kj::Promise<void> GiveUp(std::string why);
  capnp::Data::Reader NodeIdBytes() const;

  HeadConnector& connector_;
  kj::Timer& timer_;
  NodeRegistration node_;
  const ResourceReporter& resources_;
  HeadSessionOptions options_;
  std::function<void()> on_first_registration_;
  OnFinishedJobs on_finished_jobs_;
  std::minstd_rand random_;

  // Event-loop confined.
  HeadSessionSnapshot snapshot_;
  bool known_ = false;  // the head knew the node at the last answer
  kj::Duration next_retry_delay_;
  kj::Duration heartbeat_interval_ = kj::SECONDS;
  kj::Maybe<kj::TimePoint> failing_since_;  // the first failure of the current run
  uint32_t timeouts_in_a_row_ = 0;
  proto::NodeSession::Client session_;  // handed to the head with each registerNode
  kj::Own<kj::PromiseFulfiller<std::string>> given_up_;
  kj::Maybe<kj::Promise<std::string>> given_up_promise_;
  kj::Maybe<proto::Head::Client> head_;
  kj::Own<kj::PromiseFulfiller<void>> poke_;  // wakes the heartbeat timer (ReportSoon)
  kj::Maybe<kj::Promise<void>> run_;  // last: dropped (cancelled) first
};

}  // namespace airt::worker
