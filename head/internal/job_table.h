// The job table: one job per driver, with ids handed out from a counter. Rows go through the
// MetadataStore as staged Changes (change.h) ("job:<8 hex digits of the counter>"). Each finish is
// numbered (1, 2, ...) so that nodes can ask which jobs finished since the number they saw last.
// Confined to the head's loop thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "head/clock.h"
#include "head/internal/change.h"
#include "head/internal/records.h"
#include "head/metadata_store.h"

namespace airt::head::internal {

// A JobId holds its counter value little-endian, as Ray's JobID::FromInt: job 1 is "01000000".
JobId JobIdOf(uint32_t value);
uint32_t JobIdValue(const JobId& id);

// The jobs finished after some number, and the number of the last finish.
struct FinishedJobs {
  std::vector<JobId> jobs;  // in finish order
  uint64_t seq = 0;
};

class JobTable {
 public:
  // Finishes remembered for FinishedSince.
  static constexpr size_t kFinishedWindow = 1024;

  // `store` and `clock` must outlive the table.
  JobTable(MetadataStore& store, Clock& clock) : store_(store), clock_(clock) {}

  // Reads the rows an earlier head left; new ids continue after the highest one read. The jobs
  // found finished are numbered 1..n in the order of their end times. A corrupt row is logged and
  // skipped. The store's error when it cannot be read.
  Status Load();

  // A new running job with an id never handed out before (1, 2, ...), even when its change is
  // never written. kResourceExhausted after 2^32 - 2 jobs.
  Result<Staged<JobId>> Register(int32_t driver_pid, std::string driver_address,
                                 std::string code_search_path = "", std::string ns = "");
  // Marks the job finished now and gives the finish the next number; an empty change (and no new
  // number) when it finished already. kNotFound: no such job.
  Result<Change> Finish(const JobId& id);
  // The jobs finished after finish number `seen`, at most the last kFinishedWindow of them. A
  // `seen` beyond the last number (counted by an earlier head) gets the whole window.
  FinishedJobs FinishedSince(uint64_t seen) const;
  std::optional<JobRecord> Find(const JobId& id) const;
  // Every job, in id order.
  std::vector<JobRecord> List() const;

 private:
  static std::string RowKey(uint32_t value);

  MetadataStore& store_;
  Clock& clock_;
  // Numbers the finish of `id`.
  void RecordFinish(const JobId& id);

  std::map<uint32_t, JobRecord> jobs_;
  uint32_t next_ = 1;
  uint64_t finished_seq_ = 0;   // the number of the last finish
  std::deque<JobId> finished_;  // the last kFinishedWindow finishes, the last one at the back
};

}  // namespace airt::head::internal
