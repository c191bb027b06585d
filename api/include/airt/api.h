// airt's C++ API, shaped like Ray's (ray/api.h). For now: remote functions and their
// serialization (airt/remote.h); task submission, objects and actors come with the core worker.
#pragma once

#include "airt/remote.h"  // IWYU pragma: export
