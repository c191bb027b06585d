// Ray's C++ API names over airt: a program written against ray/api.h builds against airt with
// only its include line changed.
#pragma once

#include "airt/api.h"

namespace ray {

using RayConfig = airt::Config;

inline void Init(RayConfig config, int argc, char** argv) {
  airt::Init(std::move(config), argc, argv);
}
inline void Init(const RayConfig& config = {}) { airt::Init(config); }
inline bool IsInitialized() { return airt::IsInitialized(); }
inline void Shutdown() { airt::Shutdown(); }

template <typename T>
using ObjectRef = airt::ObjectRef<T>;
template <typename T>
using WaitResult = airt::WaitResult<T>;
using PlacementGroup = airt::PlacementGroup;
template <typename T>
using ActorHandle = airt::ActorHandle<T>;

// Calling Python (Ray's cross-language API): ray::Task(ray::PyFunction<int>{"mod", "f"}).
template <typename R>
using PyFunction = airt::PyFunction<R>;
using PyActorClass = airt::PyActorClass;
template <typename R>
using PyActorMethod = airt::PyActorMethod<R>;
using ActorHandleXlang = airt::PyActorHandle;

using airt::Actor;
using airt::Cancel;
using airt::Get;
using airt::GetActor;
using airt::Put;
using airt::Task;
using airt::Wait;

namespace internal {
using RayException = airt::Exception;
using RayTaskException = airt::TaskError;
using RayActorException = airt::ActorDiedError;
using RayTaskCancelledException = airt::TaskCancelledError;
}  // namespace internal

}  // namespace ray

#define RAY_REMOTE AIRT_REMOTE
#define RAY_FUNC AIRT_FUNC
