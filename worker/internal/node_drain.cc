#include "worker/internal/node_drain.h"

#include <algorithm>

#include <kj/debug.h>

#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::worker {

NodeDrain::NodeDrain(LeaseManager& leases, kj::Timer& timer, std::function<uint64_t()> wall_ms,
                     kj::Duration poll_interval)
    : leases_(leases), timer_(timer), wall_ms_(std::move(wall_ms)), poll_interval_(poll_interval) {
  auto paf = kj::newPromiseAndFulfiller<void>();
  done_ = kj::mv(paf.fulfiller);
  done_promise_ = kj::mv(paf.promise);
}

Status NodeDrain::Start(std::string reason, kj::Duration timeout) {
  if (timeout <= 0 * kj::NANOSECONDS) return InvalidArgument("a drain's timeout must be > 0");
  if (snapshot_.phase == NodeDrainSnapshot::Phase::kDone) {
    return FailedPrecondition("the node's drain is done: it is leaving the cluster");
  }
  kj::TimePoint at = timer_.now() + timeout;
  uint64_t at_wall = wall_ms_() + static_cast<uint64_t>(timeout / kj::MILLISECONDS);
  bool first = snapshot_.phase == NodeDrainSnapshot::Phase::kServing;
  if (first || at < deadline_) {
    deadline_ = at;
    snapshot_.deadline_ms = at_wall;
  }
  snapshot_.reason = std::move(reason);
  if (!first) return Status::Ok();
  snapshot_.phase = NodeDrainSnapshot::Phase::kDraining;
  AIRT_LOG(WARNING) << "draining (" << snapshot_.reason << "): no new leases; "
                    << LeasesLeft() << " held run for at most "
                    << timeout / kj::MILLISECONDS << " ms, then the node leaves";
  leases_.SetDraining();
  run_ = Watch().eagerlyEvaluate([](kj::Exception&& e) {
    AIRT_LOG(ERROR) << "the drain's watch failed: " << FromKjException(e).ToString();
  });
  return Status::Ok();
}

kj::Promise<void> NodeDrain::WhenDone() {
  KJ_IF_MAYBE(promise, done_promise_) {
    kj::Promise<void> out = kj::mv(*promise);
    done_promise_ = nullptr;
    return out;
  }
  KJ_FAIL_REQUIRE("NodeDrain::WhenDone called twice");
}

size_t NodeDrain::LeasesLeft() const {
  LeaseManagerSnapshot leases = leases_.Snapshot();
  return leases.num_leases + leases.num_granting;
}

kj::Promise<void> NodeDrain::Watch() {
  kj::TimePoint now = timer_.now();
  if (now >= deadline_) {
    // Past the deadline: every leased worker is stopped, on each check (a lease that was still
    // being granted at the deadline is stopped once granted).
    if (!snapshot_.deadline_passed) {
      AIRT_LOG(WARNING) << "the drain's deadline passed (" << snapshot_.reason << ")";
    }
    snapshot_.deadline_passed = true;
    std::string why = "the node was drained (" + snapshot_.reason +
                      ") and its deadline passed with the worker still leased";
    for (const KillCandidate& leased : leases_.Leased()) {
      AIRT_LOG(WARNING) << "stopping worker " << leased.worker.Hex().substr(0, 8) << " (pid "
                        << leased.pid << "): " << why;
      if (leases_.StopWorker(leased.worker, why)) ++snapshot_.workers_stopped;
    }
  }
  if (LeasesLeft() == 0) {
    snapshot_.phase = NodeDrainSnapshot::Phase::kDone;
    AIRT_LOG(INFO) << "drained (" << snapshot_.reason << "): no lease left";
    done_->fulfill();
    return kj::READY_NOW;
  }
  kj::Duration wait = poll_interval_;
  if (now < deadline_) wait = std::min(wait, deadline_ - now);
  return timer_.afterDelay(wait).then([this] { return Watch(); });
}

}  // namespace airt::worker
