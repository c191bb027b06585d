// The core worker: the library every driver (and, next, every worker) embeds. It registers a job
// with the head, finds its node, submits tasks (a worker lease from the node, following
// spillbacks, then the task pushed straight to the leased worker), owns what its tasks return and
// what it puts, and gets values back from inline replies or from the nodes' stores.
//
// Threads: a KJ event loop on a thread of its own holds every connection; calls from any user
// thread hand their work to it through KJ's cross-thread executor. Get and Wait block only the
// calling thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "api/core_worker/memory_store.h"
#include "common/ids.h"
#include "common/status.h"

namespace airt::core {

struct CoreWorkerOptions {
  std::string head_address;                // host:port
  std::string node_address = "127.0.0.1";  // this machine's node: the first alive one here
  uint64_t inline_threshold = 100 * 1024;  // larger puts go to the node's store
};

struct TaskOptions {
  std::map<std::string, double> resources = {{"CPU", 1}};
  std::string accelerator_type;
  uint32_t num_returns = 1;
  uint32_t max_retries = 3;  // re-runs when the worker dies
  std::string name;
};

// An argument: serialized bytes, or a reference to an object this worker owns.
struct TaskArgument {
  std::string value;
  std::optional<ObjectId> ref;
};

// A value got back: its bytes, or why there are none.
struct GotObject {
  std::shared_ptr<const std::string> value;
  std::optional<ObjectError> error;
};

class CoreWorker {
 public:
  // Registers a job with the head and connects to this machine's node and its store.
  // kUnavailable: the head or the node cannot be reached; kNotFound: no alive node at
  // options.node_address.
  static Result<std::unique_ptr<CoreWorker>> Connect(CoreWorkerOptions options);
  // Marks the job finished and closes every connection.
  ~CoreWorker();
  CoreWorker(const CoreWorker&) = delete;
  CoreWorker& operator=(const CoreWorker&) = delete;

  // Submits `function` and returns the ids of its returns at once; the task runs when its object
  // arguments are ready. Errors of the run arrive in the returns (Get gives them).
  std::vector<ObjectId> SubmitTask(const std::string& function, std::vector<TaskArgument> args,
                                   const TaskOptions& options);
  // Stores `bytes` (inline when small, in the node's store when large) and returns its id.
  Result<ObjectId> Put(std::string bytes);
  // Waits for each object and returns its bytes or its error. kDeadlineExceeded names the first
  // object still missing after timeout_ms (< 0: no limit).
  Result<std::vector<GotObject>> Get(std::span<const ObjectId> ids, int64_t timeout_ms);
  // Which of `ids` are ready now.
  std::vector<bool> Ready(std::span<const ObjectId> ids) const;
  // Waits until `num_ready` of `ids` are ready (an error counts as ready, as in Ray) or
  // timeout_ms passes (< 0: no limit); returns which are ready.
  std::vector<bool> Wait(std::span<const ObjectId> ids, size_t num_ready, int64_t timeout_ms);

  const JobId& job_id() const;

  class Impl;

 private:
  explicit CoreWorker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace airt::core
