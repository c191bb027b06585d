#include "common/logging.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace airt {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};
// Written once at process start, before threads; read by every log line.
char g_process_name[64] = "airt";
int g_log_fd = STDERR_FILENO;

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 'D';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kError: return 'E';
    case LogLevel::kFatal: return 'F';
  }
  return '?';
}

}  // namespace

void SetMinLogLevel(LogLevel level) { g_min_level.store(static_cast<int>(level)); }
LogLevel MinLogLevel() {
  return static_cast<LogLevel>(g_min_level.load(std::memory_order_relaxed));
}

LogLevel ParseLogLevel(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

Status SetLogFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("open log file " + path, errno);
  g_log_fd = fd;
  return Status::Ok();
}

void SetLogProcessName(std::string_view name) {
  size_t n = std::min(name.size(), sizeof(g_process_name) - 1);
  name.copy(g_process_name, n);
  g_process_name[n] = '\0';
}

namespace internal {

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%02d:%02d:%02d.%06ld", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long>(micros));
  std::string_view path(file);
  if (auto slash = path.rfind('/'); slash != std::string_view::npos) path.remove_prefix(slash + 1);
  stream_ << LevelLetter(level) << ' ' << stamp << ' ' << g_process_name << '[' << getpid() << "] "
          << path << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  std::string text = stream_.str();
  // One write keeps lines from different processes sharing stderr whole.
  [[maybe_unused]] ssize_t n = ::write(g_log_fd, text.data(), text.size());
  if (level_ == LogLevel::kFatal) std::abort();
}

}  // namespace internal
}  // namespace airt
