// Ray's C++ API names over airt: a program written against ray/api.h builds against airt with
// only its include line changed. What airt does not have yet (actors: ray::Actor, ActorHandle,
// GetActor) is left out, so such a program fails to compile rather than misbehave.
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

using airt::Get;
using airt::Put;
using airt::Task;
using airt::Wait;

namespace internal {
using RayException = airt::Exception;
using RayTaskException = airt::TaskError;
// Ray raises this for dead actors; airt has no actors yet, so nothing throws it.
class RayActorException : public airt::Exception {
 public:
  using airt::Exception::Exception;
};
}  // namespace internal

}  // namespace ray

#define RAY_REMOTE AIRT_REMOTE
#define RAY_FUNC AIRT_FUNC
