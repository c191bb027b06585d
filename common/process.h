// What every airt process does first (daemons, workers, drivers, tests, benchmarks).
#pragma once

#include <string_view>

namespace airt {

// Applies the process-wide settings airt depends on, once, before any thread starts:
// - malloc keeps large freed blocks instead of returning them to the kernel
//   (M_MMAP_THRESHOLD 64 MiB, M_TRIM_THRESHOLD 1 GiB): big messages otherwise crawl;
// - SIGPIPE is ignored, so a dead peer is an EPIPE Status, not a dead process;
// - the log level from AIRT_LOG_LEVEL and the log's process name.
void InitProcess(std::string_view process_name);

}  // namespace airt
