// airt-worker: the C++ worker process a node starts (DESIGN.md "Processes"). It loads the user's
// libraries from --code-search-path, registers with its node, and runs the tasks submitters push
// to it. Exit status: 0 after exit(), 1 when it cannot start, 2 for bad flags, 3 when its node's
// connection drops. A user function's stdout and stderr are the process's (the node points them at
// the worker's log file); stdout is line-buffered so that lines show up as they are printed.
#include <cstdio>
#include <iostream>

#include "api/internal/worker_options.h"
#include "api/internal/worker_process.h"
#include "common/logging.h"
#include "common/process.h"

int main(int argc, char** argv) {
  airt::InitProcess("airt-worker");
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  auto options = airt::internal::ParseWorkerOptions(argc, argv);
  if (!options.ok()) {
    if (options.status().code() == airt::Code::kCancelled) {
      std::cout << options.status().message();
      return 0;
    }
    std::cerr << "airt-worker: " << options.status().message() << "\n"
              << "run airt-worker --help for the flags\n";
    return airt::internal::kExitBadFlags;
  }
  if (!options->log_file.empty()) {
    if (airt::Status s = airt::SetLogFile(options->log_file); !s.ok()) {
      std::cerr << "airt-worker: " << s.ToString() << "; logging to stderr\n";
    }
  }
  return airt::internal::RunWorker(*options);
}
