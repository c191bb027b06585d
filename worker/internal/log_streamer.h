// Streams workers' output to drivers (DESIGN.md "Processes"), as Ray prints workers' output on
// the driver's console. Each worker's stdout and stderr go to its own log file (WorkerPool); the
// streamer follows those files on a timer, cuts what was appended into complete lines, prefixes
// each with "(pid=<worker pid>, node=<node id prefix>) ", and sends the lines of each job's
// workers, one batch per tick, to the LogSinks that job's drivers subscribed. The files keep
// everything: lines of a job without a sink are read and skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <kj/async.h>
#include <kj/timer.h>
#include <sys/types.h>

#include "common/ids.h"
#include "common/proto/node.capnp.h"

namespace airt::worker {

// A worker whose log file is to be followed.
struct LoggingWorker {
  JobId job;
  pid_t pid = 0;
  std::string log_path;
};

struct LogStreamerOptions {
  std::string node_prefix;  // the node id's first 8 hex digits
  kj::Duration interval = 100 * kj::MILLISECONDS;
  size_t max_read_per_tick = 1 << 20;  // bytes per file per tick; the rest waits for the next
};

// Event-loop confined. `timer` must outlive it; `workers` is called on every tick and answers
// the workers running now: a file is followed from when its worker first appears there, and
// dropped once the worker is gone from it and the file's last bytes were read. Destroying the
// streamer cancels its timer and any write in flight.
class LogStreamer {
 public:
  using ListWorkers = std::function<std::vector<LoggingWorker>()>;

  LogStreamer(LogStreamerOptions options, kj::Timer& timer, ListWorkers workers);
  ~LogStreamer();
  LogStreamer(const LogStreamer&) = delete;
  LogStreamer& operator=(const LogStreamer&) = delete;

  // Sends `job`'s workers' lines to `sink` from the next tick on, until a write to it fails.
  void Subscribe(const JobId& job, proto::LogSink::Client sink);
  // One tick's work, also run by the timer: read, cut, send.
  void Poll();

 private:
  struct File;
  struct Sink {
    uint64_t id = 0;
    JobId job;
    proto::LogSink::Client client;
  };

  kj::Promise<void> Loop();
  // Appends `file`'s new complete lines (prefixed) to `out`; returns false on a read error.
  bool ReadLines(File& file, std::vector<std::string>* out);
  void Send(const JobId& job, const std::vector<std::string>& lines);

  LogStreamerOptions options_;
  kj::Timer& timer_;
  ListWorkers workers_;
  std::map<std::string, std::unique_ptr<File>> files_;  // by log path
  std::vector<Sink> sinks_;
  uint64_t next_sink_id_ = 1;
  kj::Own<kj::TaskSet::ErrorHandler> errors_;
  kj::Own<kj::TaskSet> writes_;
  kj::Promise<void> loop_ = nullptr;
};

}  // namespace airt::worker
