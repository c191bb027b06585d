#include "common/process.h"

#include <malloc.h>

#include <csignal>
#include <cstdlib>

#include "common/logging.h"

namespace airt {

void InitProcess(std::string_view process_name) {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  std::signal(SIGPIPE, SIG_IGN);
  SetLogProcessName(process_name);
  if (const char* level = std::getenv("AIRT_LOG_LEVEL")) SetMinLogLevel(ParseLogLevel(level));
}

}  // namespace airt
