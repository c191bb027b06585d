#include "api/internal/worker_options.h"

#include <charconv>
#include <string_view>

#include "common/flags.h"

namespace airt::internal {
namespace {

// "host:port" with a port in 1..65535.
bool IsHostPort(std::string_view address) {
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view port = address.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  return ec == std::errc() && end == port.data() + port.size() && value >= 1 && value <= 65535;
}

}  // namespace

Result<WorkerOptions> ParseWorkerOptions(int argc, char** argv) {
  WorkerOptions options;
  std::string worker_id, job_id;
  uint64_t node_port = 0;
  FlagSet flags("airt-worker");
  flags.AddString("head-address", &options.head_address,
                  "the head, host:port, for tasks that submit tasks or call actors");
  flags.AddString("node-address", &options.node_address,
                  "the node's host (the worker serves there too); required");
  flags.AddUint64("node-port", &node_port, "the node's service port; required");
  flags.AddString("worker-id", &worker_id, "this worker's id, 56 hex digits; required");
  flags.AddString("job-id", &job_id, "the job it runs tasks of, 8 hex digits (ffffffff: any)");
  flags.AddString("store-socket", &options.store_socket, "the node's object store; required");
  flags.AddString("transfer-address", &options.transfer_address,
                  "host:port of the node's transfer service; required");
  flags.AddString(
      "code-search-path", &options.code_search_path,
      "DIR[:DIR...]: shared libraries there are loaded for their AIRT_REMOTE functions");
  flags.AddBytes("inline-threshold", &options.inline_threshold,
                 "returns up to this size travel inline, larger ones go to the store");
  flags.AddUint64("fetch-timeout-ms", &options.fetch_timeout_ms,
                  "how long to wait for an object argument");
  flags.AddUint64("register-timeout-ms", &options.register_timeout_ms,
                  "how long to wait for the node to take the registration");
  flags.AddUint64("exit-grace-ms", &options.exit_grace_ms,
                  "after exit: how long to wait for clients to disconnect");
  flags.AddString("log-file", &options.log_file,
                  "where airt's own log lines go (the node streams stdout/stderr, which then "
                  "carry only what user code prints); empty: stderr");
  Status parsed = flags.Parse(argc, argv);
  if (parsed.code() == Code::kCancelled) return Cancelled(flags.Usage());
  AIRT_RETURN_IF_ERROR(parsed);

  if (options.node_address.empty()) return InvalidArgument("--node-address is required");
  if (node_port == 0 || node_port > 65535) {
    return InvalidArgument("--node-port must be 1..65535, got " + std::to_string(node_port));
  }
  options.node_port = static_cast<uint16_t>(node_port);
  Result<WorkerId> worker = WorkerId::FromHex(worker_id);
  if (!worker.ok()) return worker.status().WithContext("--worker-id");
  options.worker_id = *worker;
  Result<JobId> job = JobId::FromHex(job_id.empty() ? JobId::Nil().Hex() : job_id);
  if (!job.ok()) return job.status().WithContext("--job-id");
  options.job_id = *job;
  if (options.store_socket.empty()) return InvalidArgument("--store-socket is required");
  if (!IsHostPort(options.transfer_address)) {
    return InvalidArgument("--transfer-address must be host:port, got '" +
                           options.transfer_address + "'");
  }
  return options;
}

}  // namespace airt::internal
