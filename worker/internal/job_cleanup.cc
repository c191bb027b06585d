#include "worker/internal/job_cleanup.h"

#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::worker {
namespace {

// Ended jobs remembered so that a job the head lists again is not ended twice.
constexpr size_t kMaxSeenJobs = 4096;

}  // namespace

JobCleanup::JobCleanup(LeaseManager& leases, DeleteObjects delete_objects)
    : leases_(leases), delete_objects_(std::move(delete_objects)), tasks_(*this) {}

void JobCleanup::OnFinished(const std::vector<JobId>& jobs) {
  for (const JobId& job : jobs) {
    if (!seen_.insert(job).second) continue;
    seen_order_.push_back(job);
    if (seen_order_.size() > kMaxSeenJobs) {
      seen_.erase(seen_order_.front());
      seen_order_.pop_front();
    }
    ++snapshot_.jobs_ending;
    tasks_.add(leases_.EndJob(job).then([this, job] { Finish(job); }));
  }
}

void JobCleanup::Finish(const JobId& job) {
  --snapshot_.jobs_ending;
  ++snapshot_.jobs_ended;
  Result<uint64_t> deleted = delete_objects_ ? delete_objects_(job) : Result<uint64_t>(0);
  if (!deleted.ok()) {
    AIRT_LOG(WARNING) << "job " << job.Hex() << " finished, but its objects could not be deleted "
                      << "from the store: " << deleted.status().ToString();
    return;
  }
  snapshot_.objects_deleted += *deleted;
  AIRT_LOG(INFO) << "job " << job.Hex() << " ended on this node: its workers are gone and "
                 << *deleted << " of its objects were deleted";
}

void JobCleanup::taskFailed(kj::Exception&& exception) {
  AIRT_LOG(ERROR) << "ending a job failed: " << FromKjException(exception).ToString();
}

}  // namespace airt::worker
