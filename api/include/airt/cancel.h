// Cancelling tasks, as Ray's ray.cancel:
//
//   auto slow = airt::Task(Sleep).Remote(60'000);
//   airt::Cancel(slow);                    // Get(slow) now throws TaskCancelledError
//   airt::Cancel(other, /*force=*/true);   // kills the worker process running it
//
// Only the process that submitted a task can cancel it. Once cancelled, the task's returns fail
// with TaskCancelledError at once, whatever it was doing, and it is never retried:
//   - not yet sent to a worker (waiting for its arguments, a lease, or a free slot): dropped;
//   - sent to a worker but not started there: dropped by the worker (a C++ worker that runs its
//     tasks straight off the wire may start it anyway; its result is then discarded);
//   - running: without force, a Python task is interrupted (KeyboardInterrupt raised in it, also
//     out of time.sleep and other blocking calls that honour Ctrl-C); C++ code cannot be
//     interrupted and runs to its end, its result discarded. With force, its worker process is
//     killed; other tasks that worker had queued are re-run elsewhere without spending a retry.
//   - finished: nothing happens (Get gives its result).
// With `recursive` (the default), the tasks a running task submitted are cancelled the same way.
// An actor method's call is cancelled likewise, never with force (Exception: Ray refuses it too),
// and the actor lives on: queued at the caller, it leaves the actor's queue (later calls keep their
// order); sent, the actor drops it, or interrupts it if it is a running Python method (an async
// one's coroutine gets asyncio.CancelledError); C++ methods run to their end, results discarded.
// A cancelled call is never resent after the actor restarts.
#pragma once

#include <string>

#include "airt/driver.h"

namespace airt {

namespace internal {
// Cancels the task that makes the object `object_id` (a return id). Throws Exception when the id
// is a Put's or `force` is asked for an actor method's return, UnavailableError before Init.
void CancelTask(const std::string& object_id, bool force, bool recursive = true);
}  // namespace internal

template <typename T>
void Cancel(const ObjectRef<T>& ref, bool force = false, bool recursive = true) {
  internal::CancelTask(ref.ID(), force, recursive);
}

}  // namespace airt
