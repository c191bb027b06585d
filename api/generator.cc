// The per-thread emitter of streaming tasks: one per process, in libairt_api.
#include "airt/generator.h"

namespace airt::internal {

std::shared_ptr<GeneratorEmitter>& ThisThreadsGenerator() {
  thread_local std::shared_ptr<GeneratorEmitter> emitter;
  return emitter;
}

}  // namespace airt::internal
