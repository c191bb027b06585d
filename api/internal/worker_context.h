// The API inside airt-worker: remote functions that submit tasks, get objects or call actors use
// the worker process's one core worker, the one that serves its tasks (RunWorker makes it at the
// worker's start, joined to the job of the tasks it runs).
#pragma once

#include <string>

#include "api/core_worker/core_worker.h"

namespace airt::internal {

// Makes the API of this process a worker's: Init is not needed, and every call goes to `core`,
// which must outlive LeaveWorkerMode; Shutdown leaves it alone. `unusable` non-empty: why the API
// cannot submit work from this worker (no head address, no job); each call then throws
// UnavailableError with it. Defined with the API's state in api/driver.cc.
void EnterWorkerMode(core_worker::CoreWorker* core, std::string unusable);
// Forgets the worker's core worker (before it is destroyed): objects still pinned through the API
// are released; later calls need Init.
void LeaveWorkerMode();

// Cancels every normal task this process's core worker submitted that has not finished, with
// `force` (and recursively). Nothing when there is no core worker. Any thread but the core
// worker's loop.
void CancelOwnedTasks(bool force);

}  // namespace airt::internal
