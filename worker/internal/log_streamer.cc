#include "worker/internal/log_streamer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <utility>

#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::worker {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

class LogWriteErrors final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&& e) override {
    AIRT_LOG(WARNING) << "log streaming failed: " << FromKjException(e).ToString();
  }
};

}  // namespace

struct LogStreamer::File {
  JobId job;
  pid_t pid = 0;
  std::string path;
  int fd = -1;          // -1 until the file could be opened
  uint64_t offset = 0;  // bytes read so far
  std::string partial;  // the last line, not yet ended
  bool running = true;  // its worker was listed on the last tick
  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

LogStreamer::LogStreamer(LogStreamerOptions options, kj::Timer& timer, ListWorkers workers)
    : options_(std::move(options)),
      timer_(timer),
      workers_(std::move(workers)),
      errors_(kj::heap<LogWriteErrors>()),
      writes_(kj::heap<kj::TaskSet>(*errors_)) {
  loop_ = Loop().eagerlyEvaluate([](kj::Exception&& e) {
    AIRT_LOG(ERROR) << "log streaming stopped: " << FromKjException(e).ToString();
  });
}

LogStreamer::~LogStreamer() {
  loop_ = nullptr;
  writes_ = nullptr;  // cancels writes in flight before the sinks go
}

kj::Promise<void> LogStreamer::Loop() {
  return timer_.afterDelay(options_.interval).then([this] {
    Poll();
    return Loop();
  });
}

void LogStreamer::Subscribe(const JobId& job, proto::LogSink::Client sink) {
  sinks_.push_back(Sink{next_sink_id_++, job, kj::mv(sink)});
  AIRT_LOG(INFO) << "streaming the logs of job " << job.Hex() << " to a driver (" << sinks_.size()
                 << " sinks)";
}

bool LogStreamer::ReadLines(File& file, std::vector<std::string>* out) {
  if (file.fd < 0) {
    file.fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file.fd < 0) return errno == ENOENT;  // not created yet: try again on the next tick
  }
  std::string fresh;
  while (fresh.size() < options_.max_read_per_tick) {
    char buffer[kReadChunk];
    ssize_t n = ::pread(file.fd, buffer, sizeof buffer, static_cast<off_t>(file.offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      AIRT_LOG(WARNING) << "cannot read the worker log " << file.path << ": "
                        << ErrnoStatus("pread", errno).ToString();
      return false;
    }
    if (n == 0) break;
    file.offset += static_cast<uint64_t>(n);
    fresh.append(buffer, static_cast<size_t>(n));
  }
  if (fresh.empty()) return true;
  file.partial += fresh;
  std::string prefix = "(pid=" + std::to_string(file.pid) + ", node=" + options_.node_prefix + ") ";
  size_t start = 0;
  for (size_t nl; (nl = file.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(file.partial.data() + start, nl - start);
    if (out != nullptr) out->push_back(prefix + std::string(line));
  }
  file.partial.erase(0, start);
  return true;
}

void LogStreamer::Poll() {
  std::set<std::string> listed;
  for (LoggingWorker& w : workers_()) {
    if (w.log_path.empty()) continue;
    listed.insert(w.log_path);
    if (files_.count(w.log_path) == 0) {
      auto file = std::make_unique<File>();
      file->job = w.job;
      file->pid = w.pid;
      file->path = w.log_path;
      files_.emplace(w.log_path, std::move(file));
    }
  }
  std::map<JobId, std::vector<std::string>> batches;
  std::set<JobId> subscribed;
  for (const Sink& s : sinks_) subscribed.insert(s.job);
  for (auto it = files_.begin(); it != files_.end();) {
    File& file = *it->second;
    bool running = listed.count(file.path) > 0;
    bool wanted = subscribed.count(file.job) > 0;
    bool ok = ReadLines(file, wanted ? &batches[file.job] : nullptr);
    // A reaped worker writes no more: once its file is read to the end, let it go (a last
    // line without a newline is sent as it is).
    bool drained =
        !running &&
        (file.fd < 0 || file.offset == static_cast<uint64_t>(::lseek(file.fd, 0, SEEK_END)));
    if (!ok || drained) {
      if (ok && wanted && !file.partial.empty()) {
        batches[file.job].push_back("(pid=" + std::to_string(file.pid) +
                                    ", node=" + options_.node_prefix + ") " + file.partial);
      }
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [job, lines] : batches) {
    if (!lines.empty()) Send(job, lines);
  }
}

void LogStreamer::Send(const JobId& job, const std::vector<std::string>& lines) {
  for (Sink& sink : sinks_) {
    if (sink.job != job) continue;
    auto request = sink.client.writeRequest();
    auto list = request.initLines(static_cast<unsigned>(lines.size()));
    for (size_t i = 0; i < lines.size(); ++i) list.set(static_cast<unsigned>(i), lines[i]);
    uint64_t id = sink.id;
    writes_->add(request.send().ignoreResult().catch_([this, id](kj::Exception&& e) {
      for (auto it = sinks_.begin(); it != sinks_.end(); ++it) {
        if (it->id != id) continue;
        AIRT_LOG(INFO) << "dropping a log sink of job " << it->job.Hex() << ": "
                       << FromKjException(e).ToString();
        sinks_.erase(it);
        break;
      }
    }));
  }
}

}  // namespace airt::worker
