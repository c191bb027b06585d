// The API inside airt-worker: remote functions that submit tasks, get objects or call actors use
// the worker's own core worker, which joins the job of the tasks it runs. Set once at the
// worker's start; the core worker connects at the first use of the API.
#pragma once

#include "api/core_worker/core_worker.h"

namespace airt::internal {

// Makes the API of this process a worker's: Init is not needed, and the core worker is made from
// `options` (options.job set) when first used. Defined with the API's state in api/driver.cc.
void EnterWorkerMode(core::CoreWorkerOptions options);

// Cancels every normal task this process's core worker submitted that has not finished, with
// `force` (and recursively): what a worker does when its running task is cancelled. Nothing when
// the core worker was never used. Any thread but the core worker's loop.
void CancelOwnedTasks(bool force);

}  // namespace airt::internal
