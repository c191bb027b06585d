// Ends on this node the jobs the head says have finished (their driver called finishJob, exited or
// was killed): every worker of the job is stopped, idle or leased, its leases' resources come back
// at once, and once the workers have exited the job's objects are deleted from the node's store.
// A detached actor's worker (a detached lease) is left running, and the job's objects stay until
// it has exited too (LeaseManager::EndJob).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <vector>

#include <kj/async.h>

#include "common/ids.h"
#include "common/status.h"
#include "worker/internal/lease_manager.h"

namespace airt::worker {

// For tests, logs and `airt status`.
struct JobCleanupSnapshot {
  uint64_t jobs_ending = 0;      // whose workers are being stopped (or whose detached actors run)
  uint64_t jobs_ended = 0;       // workers gone, objects deleted (or the deletion failed)
  uint64_t objects_deleted = 0;  // over every job
};

// Event-loop confined. `leases` must outlive it; destroying it cancels the cleanups in flight
// (their workers still stop; their objects stay).
class JobCleanup final : private kj::TaskSet::ErrorHandler {
 public:
  // Deletes every object of a job from the node's store; how many, or the store's error.
  using DeleteObjects = std::function<Result<uint64_t>(const JobId& job)>;

  JobCleanup(LeaseManager& leases, DeleteObjects delete_objects);

  // Ends each of `jobs` that this node has not ended before (the head may list a job again after
  // it restarts).
  void OnFinished(const std::vector<JobId>& jobs);

  JobCleanupSnapshot Snapshot() const { return snapshot_; }

 private:
  void Finish(const JobId& job);
  void taskFailed(kj::Exception&& exception) override;

  LeaseManager& leases_;
  DeleteObjects delete_objects_;
  JobCleanupSnapshot snapshot_;
  std::set<JobId> seen_;          // the jobs ended here, the latest few thousand
  std::deque<JobId> seen_order_;  // to forget the earliest of seen_
  kj::TaskSet tasks_;             // last: cancelled first
};

}  // namespace airt::worker
