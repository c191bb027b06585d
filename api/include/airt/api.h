// airt's C++ API, shaped like Ray's (ray/api.h): remote functions (airt/remote.h), and tasks,
// objects and errors from a driver (airt/driver.h), actors (airt/actor.h), cancelling tasks
// (airt/cancel.h), calling Python (airt/cross_language.h) and bytes read without a copy
// (airt/buffer.h).
#pragma once

#include "airt/actor.h"           // IWYU pragma: export
#include "airt/buffer.h"          // IWYU pragma: export
#include "airt/cancel.h"          // IWYU pragma: export
#include "airt/cross_language.h"  // IWYU pragma: export
#include "airt/driver.h"          // IWYU pragma: export
#include "airt/remote.h"          // IWYU pragma: export
