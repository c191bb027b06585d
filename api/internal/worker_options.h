// airt-worker's command line.
#pragma once

#include <cstdint>
#include <string>

#include "common/ids.h"
#include "common/status.h"

namespace airt::internal {

struct WorkerOptions {
  std::string head_address;      // "host:port" of the head, for tasks that submit work; may be ""
  std::string node_address;      // the node's host; the worker serves on it too
  uint16_t node_port = 0;        // the node's Cap'n Proto service
  WorkerId worker_id;            // given by the node; sent back in registerWorker
  JobId job_id;                  // the job whose tasks this worker runs; Nil: any job
  std::string store_socket;      // the node's object store
  std::string transfer_address;  // "host:port" of the node's transfer service, put in returns
  std::string code_search_path;  // DIR[:DIR...] (or library files) to dlopen; may be empty
  uint64_t inline_threshold = 100 << 10;  // returns up to this size travel inline (Ray: 100 KiB)
  uint64_t fetch_timeout_ms = 60'000;     // to pull and pin an object argument
  uint64_t register_timeout_ms = 30'000;  // to connect to the node and register
  uint64_t exit_grace_ms = 2'000;  // after exit's reply: wait this long for clients to disconnect
  std::string log_file;            // airt's own log lines go here; empty: stderr (with user output)
};

// kInvalidArgument naming the flag for an unknown, missing or malformed one; kCancelled carrying
// the usage text for --help.
Result<WorkerOptions> ParseWorkerOptions(int argc, char** argv);

}  // namespace airt::internal
