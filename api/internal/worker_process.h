// airt-worker's life: make the process's one core worker (joined to its job, connected to the
// node's store), load the user's code, serve proto::Worker on the core worker's loop, register
// with the node over the core worker's connection to it, run tasks until told to exit or until
// the node goes away.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "api/internal/task_executor.h"
#include "api/internal/worker_options.h"

namespace airt::internal {

// Exit codes of airt-worker.
inline constexpr int kExitOk = 0;           // exit() was called
inline constexpr int kExitStartFailed = 1;  // the store, the port or the node registration failed
inline constexpr int kExitBadFlags = 2;
inline constexpr int kExitNodeLost = 3;  // the connection to the node dropped

// Runs the worker: its event loop is its core worker's (a thread of its own); user code runs on
// the task executor's thread, or with `interrupt` on the calling thread (a Python worker's main
// thread, where signals are handled); the calling thread otherwise waits. Tasks the user code
// submits go through the same core worker. Returns kExitOk after exit() has been answered and its
// callers have disconnected (or options.exit_grace_ms passed); kExitStartFailed, having logged
// why. When the node's connection drops it ends the process at once with kExitNodeLost, not
// waiting for a running task.
// `fallback` runs the functions no loaded library registers (a Python worker's); may be null.
// `interrupt` stops a running task that is cancelled (a Python worker's); null: running tasks
// cannot be interrupted. Either way, cancelling a task cancels the tasks it submitted.
int RunWorker(const WorkerOptions& options, Fallback fallback = nullptr,
              Interrupt interrupt = nullptr);

}  // namespace airt::internal
