// Leveled logging to stderr and AIRT_CHECK for our own bugs (STYLE.md rule 4).
//   AIRT_LOG(INFO) << "store listening on " << path;
//   AIRT_CHECK(offset % kAlign == 0) << "misaligned " << offset;
#pragma once

#include <sstream>
#include <string>
#include <string_view>

#include "common/status.h"

namespace airt {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

// Set once at process start (InitProcess reads AIRT_LOG_LEVEL); messages below it are dropped.
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();
// "debug", "info", "warning", "error" (case-insensitive); kInfo for anything else.
LogLevel ParseLogLevel(std::string_view name);
// The name printed before each line, e.g. "airt-store"; set once at process start.
void SetLogProcessName(std::string_view name);
// Sends log lines to the file at `path` (appended) instead of stderr; set once at process start.
// A worker uses it to keep airt's own lines apart from what user code prints. kNotFound or
// another errno status when the file cannot be opened (logging then stays on stderr).
Status SetLogFile(const std::string& path);

namespace internal {

// Collects one line and writes it to stderr in a single write when destroyed; a kFatal
// message aborts the process after writing.
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Swallows the stream expression of a disabled log statement.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace internal
}  // namespace airt

#define AIRT_LOG_LEVEL_DEBUG ::airt::LogLevel::kDebug
#define AIRT_LOG_LEVEL_INFO ::airt::LogLevel::kInfo
#define AIRT_LOG_LEVEL_WARNING ::airt::LogLevel::kWarning
#define AIRT_LOG_LEVEL_ERROR ::airt::LogLevel::kError
#define AIRT_LOG_LEVEL_FATAL ::airt::LogLevel::kFatal

#define AIRT_LOG(level)                            \
  (AIRT_LOG_LEVEL_##level < ::airt::MinLogLevel()) \
      ? (void)0                                    \
      : ::airt::internal::LogVoidify() &           \
            ::airt::internal::LogMessage(AIRT_LOG_LEVEL_##level, __FILE__, __LINE__).stream()

// Aborts with the condition and any streamed detail when `cond` is false. For invariants of our
// own code only; bad input and a bad environment return a Status instead.
#define AIRT_CHECK(cond)                                                                           \
  (cond) ? (void)0                                                                                 \
         : ::airt::internal::LogVoidify() &                                                        \
               ::airt::internal::LogMessage(::airt::LogLevel::kFatal, __FILE__, __LINE__).stream() \
                   << "check failed: " #cond " "
