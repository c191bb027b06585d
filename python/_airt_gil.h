// How airt._airt's functions let go of the GIL while they wait on the core worker, safely at
// interpreter exit: a daemon thread still inside a call when Python finalizes must not take the
// process down ("terminate called without an active exception": Python ends a thread that retakes
// the GIL during finalization by unwinding it, which std::terminate stops at a noexcept frame,
// such as pybind11's gil_scoped_release destructor).
#pragma once

#include <Python.h>

#include <atomic>

namespace airt::python {

// Set by the module's atexit hook (Python's atexit handlers run before finalization starts):
// from then on a thread coming back from the core never retakes the GIL.
inline std::atomic<bool> g_exiting{false};

// Releases the GIL for its scope. Its destructor retakes it; once the interpreter exits it parks
// the thread instead (the process is ending: exit() does not wait for it), and it is
// noexcept(false) so that the unwinding with which Python ends a thread that retakes the GIL
// while finalizing passes through it.
class GilRelease {
 public:
  GilRelease() : state_(PyEval_SaveThread()) {}
  ~GilRelease() noexcept(false) {
    if (g_exiting.load()) Park();
    PyEval_RestoreThread(state_);
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  [[noreturn]] static void Park();
  PyThreadState* state_;
};

}  // namespace airt::python
