// Ray's C++ API names over airt: a program written against Ray's ray/api.h builds against airt
// with only its include line changed, and runs with Ray's semantics (docs/cpp_api.md, "Ray's C++
// API", lists what works and what differs).
#pragma once

#include "airt/api.h"
#include "ray/ray_exception.h"  // IWYU pragma: export

namespace ray {

using RayConfig = airt::Config;
using ActorLifetime = airt::ActorLifetime;
using RuntimeEnv = airt::RuntimeEnv;

// Ray's Init takes its RayConfig by reference; airt's by value or const reference, so both an
// lvalue and a temporary work.
inline void Init(RayConfig config, int argc, char** argv) {
  airt::Init(std::move(config), argc, argv);
}
inline void Init(const RayConfig& config) { airt::Init(config); }
inline void Init() { airt::Init(); }
inline bool IsInitialized() { return airt::IsInitialized(); }
inline void Shutdown() { airt::Shutdown(); }

template <typename T>
using ObjectRef = airt::ObjectRef<T>;
template <typename T>
using WaitResult = airt::WaitResult<T>;
using PlacementGroup = airt::PlacementGroup;
using PlacementGroupCreationOptions = airt::PlacementGroupCreationOptions;
using PlacementStrategy = airt::PlacementStrategy;
using PlacementGroupState = airt::PlacementGroupState;
using airt::CreatePlacementGroup;
using airt::GetAllPlacementGroups;
using airt::GetPlacementGroup;
using airt::GetPlacementGroupById;
using airt::RemovePlacementGroup;
using airt::WaitPlacementGroupReady;
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
using airt::ExitActor;
using airt::Get;
using airt::GetActor;
using airt::GetNamespace;
using airt::Put;
using airt::Task;
using airt::Wait;
using airt::WasCurrentActorRestarted;

}  // namespace ray

#define RAY_REMOTE AIRT_REMOTE
#define RAY_FUNC AIRT_FUNC
