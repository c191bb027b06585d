// The job table: one job per driver, with ids handed out from a counter. Rows go through the
// MetadataStore ("job:<8 hex digits of the counter>"). Confined to the head's loop thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "head/clock.h"
#include "head/internal/records.h"
#include "head/metadata_store.h"

namespace airt::head::internal {

// A JobId holds its counter value little-endian, as Ray's JobID::FromInt: job 1 is "01000000".
JobId JobIdOf(uint32_t value);
uint32_t JobIdValue(const JobId& id);

class JobTable {
 public:
  // What Finish does when the row cannot be written.
  enum class OnWriteError {
    kFail,          // return the store's error; nothing changes (the caller may retry)
    kLogAndFinish,  // log it; the finish stands in memory (nobody would retry)
  };

  // `store` and `clock` must outlive the table.
  JobTable(MetadataStore& store, Clock& clock) : store_(store), clock_(clock) {}

  // Reads the rows an earlier head left; new ids continue after the highest one read. A corrupt
  // row is logged and skipped. The store's error when it cannot be read.
  Status Load();

  // A new running job with an id never handed out before (1, 2, ...). The store's error when the
  // row cannot be written (the id is not reused); kResourceExhausted after 2^32 - 2 jobs.
  Result<JobId> Register(int32_t driver_pid, std::string driver_address);
  // Marks the job finished now; ok when it finished already. kNotFound: no such job. A failed
  // write: see OnWriteError.
  Status Finish(const JobId& id, OnWriteError on_write_error = OnWriteError::kFail);
  std::optional<JobRecord> Find(const JobId& id) const;
  // Every job, in id order.
  std::vector<JobRecord> List() const;

 private:
  static std::string RowKey(uint32_t value);

  MetadataStore& store_;
  Clock& clock_;
  std::map<uint32_t, JobRecord> jobs_;
  uint32_t next_ = 1;
};

}  // namespace airt::head::internal
