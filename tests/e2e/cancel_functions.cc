// Remote functions for the cancel tests (cancel_test.cc) and the lease owner test
// (lease_owner_test.cc): each leaves a file behind when it runs, so a test can tell that it
// started, which process ran it, or that it never ran.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "airt/api.h"

namespace {

void WritePid(const std::string& marker) {
  // Written under another name, then renamed: a reader never sees a half-written file.
  std::string partial = marker + ".partial";
  if (FILE* f = std::fopen(partial.c_str(), "w")) {
    std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
    std::fclose(f);
    std::rename(partial.c_str(), marker.c_str());
  }
}

}  // namespace

// Writes its worker's pid to `marker`, then keeps the worker busy for `ms` milliseconds.
int MarkThenSleepMs(std::string marker, int ms) {
  WritePid(marker);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}

// Writes its worker's pid to `marker` and answers `value`: the marker says that it ran.
int MarkRun(std::string marker, int value) {
  WritePid(marker);
  return value;
}

// Submits MarkThenSleepMs(child_marker, child_ms), a subtask on a lease this worker holds, then
// writes its worker's pid to `marker` and keeps the worker busy for `ms` milliseconds: a parent to
// kill while its subtask runs.
int SubmitThenSleepMs(std::string child_marker, int child_ms, std::string marker, int ms) {
  airt::ObjectRef<int> child = airt::Task(MarkThenSleepMs).Remote(child_marker, child_ms);
  WritePid(marker);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}

AIRT_REMOTE(MarkThenSleepMs, MarkRun, SubmitThenSleepMs);
