#include "head/internal/job_table.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "common/logging.h"
#include "head/internal/wire.h"

namespace airt::head::internal {
namespace {

constexpr std::string_view kJobPrefix = "job:";
// The all-0xff id is JobId::Nil, so the counter stops below it.
constexpr uint32_t kLastJob = 0xfffffffeu;

}  // namespace

JobId JobIdOf(uint32_t value) {
  uint8_t bytes[4] = {static_cast<uint8_t>(value), static_cast<uint8_t>(value >> 8),
                      static_cast<uint8_t>(value >> 16), static_cast<uint8_t>(value >> 24)};
  return JobId::FromRaw(bytes);
}

uint32_t JobIdValue(const JobId& id) {
  const uint8_t* b = id.data();
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

std::string JobTable::RowKey(uint32_t value) {
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", value);
  return std::string(kJobPrefix) + hex;
}

Status JobTable::Load() {
  AIRT_ASSIGN_OR_RETURN(std::vector<Row> rows, store_.Scan(kJobPrefix));
  for (const Row& row : rows) {
    const std::string& key = row.key;
    Result<JobRecord> job = DecodeJobRow(row.value);
    if (job.ok() && key != RowKey(JobIdValue(job->id))) {
      job = Internal("the row's job id " + job->id.Hex() + " does not match its key");
    } else if (job.ok() && (JobIdValue(job->id) == 0 || JobIdValue(job->id) > kLastJob)) {
      job = Internal("job id " + job->id.Hex() + " was never handed out");
    }
    if (!job.ok()) {
      AIRT_LOG(ERROR) << "skipping metadata row '" << key << "': " << job.status().message();
      continue;
    }
    uint32_t value = JobIdValue(job->id);
    if (value >= next_) next_ = value + 1;  // at most kLastJob + 1: exhausted
    jobs_[value] = std::move(*job);
  }
  std::vector<const JobRecord*> finished;
  for (const auto& [value, job] : jobs_) {
    if (!job.alive) finished.push_back(&job);
  }
  std::sort(finished.begin(), finished.end(), [](const JobRecord* a, const JobRecord* b) {
    return std::tuple(a->end_ms, JobIdValue(a->id)) < std::tuple(b->end_ms, JobIdValue(b->id));
  });
  for (const JobRecord* job : finished) RecordFinish(job->id);
  if (!jobs_.empty())
    AIRT_LOG(INFO) << "loaded " << jobs_.size() << " jobs from the metadata store";
  return Status::Ok();
}

Result<Staged<JobId>> JobTable::Register(int32_t driver_pid, std::string driver_address,
                                         std::string code_search_path, std::string ns) {
  if (next_ > kLastJob) return ResourceExhausted("every job id has been handed out");
  uint32_t value = next_++;
  JobRecord job;
  job.id = JobIdOf(value);
  job.driver_pid = driver_pid;
  job.driver_address = std::move(driver_address);
  job.code_search_path = std::move(code_search_path);
  job.ns = std::move(ns);
  job.start_ms = static_cast<uint64_t>(clock_.WallMs());
  job.alive = true;
  Staged<JobId> out{job.id, {}};
  out.change.what = "registering job " + job.id.Hex();
  out.change.rows.Put(RowKey(value), EncodeJobRow(job));
  out.change.on_written.push_back([this, value, job = std::move(job)] {
    AIRT_LOG(INFO) << "job " << job.id.Hex() << " started by driver pid " << job.driver_pid
                   << " at " << job.driver_address;
    jobs_[value] = job;
  });
  return out;
}

Result<Change> JobTable::Finish(const JobId& id) {
  auto found = jobs_.find(JobIdValue(id));
  if (found == jobs_.end()) return NotFound("job " + id.Hex() + " is not registered");
  Change change;
  if (!found->second.alive) return change;
  JobRecord finished = found->second;
  finished.alive = false;
  finished.end_ms = static_cast<uint64_t>(clock_.WallMs());
  change.what = "finishing job " + id.Hex();
  change.rows.Put(RowKey(found->first), EncodeJobRow(finished));
  change.on_written.push_back([this, finished = std::move(finished)] {
    AIRT_LOG(INFO) << "job " << finished.id.Hex() << " finished";
    jobs_[JobIdValue(finished.id)] = finished;
    RecordFinish(finished.id);
  });
  return change;
}

void JobTable::RecordFinish(const JobId& id) {
  ++finished_seq_;
  finished_.push_back(id);
  if (finished_.size() > kFinishedWindow) finished_.pop_front();
}

FinishedJobs JobTable::FinishedSince(uint64_t seen) const {
  FinishedJobs out;
  out.seq = finished_seq_;
  uint64_t news = seen > finished_seq_ ? finished_.size() : finished_seq_ - seen;
  size_t n = static_cast<size_t>(std::min<uint64_t>(news, finished_.size()));
  out.jobs.assign(finished_.end() - static_cast<std::ptrdiff_t>(n), finished_.end());
  return out;
}

std::optional<JobRecord> JobTable::Find(const JobId& id) const {
  auto found = jobs_.find(JobIdValue(id));
  if (found == jobs_.end()) return std::nullopt;
  return found->second;
}

std::vector<JobRecord> JobTable::List() const {
  std::vector<JobRecord> out;
  out.reserve(jobs_.size());
  for (const auto& [value, job] : jobs_) out.push_back(job);
  return out;
}

}  // namespace airt::head::internal
