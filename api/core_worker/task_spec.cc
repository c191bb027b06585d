#include "api/core_worker/task_spec.h"

#include <kj/vector.h>

#include "api/core_worker/capnp_util.h"

namespace airt::core {

kj::Promise<std::optional<ObjectError>> ResolveArguments(MemoryStore& memory, PendingTask& task) {
  task.resolved.resize(task.args.size());
  kj::Vector<kj::Promise<void>> waits;
  for (size_t i = 0; i < task.args.size(); ++i) {
    if (!task.args[i].ref) continue;
    waits.add(memory.WhenReady(*task.args[i].ref).then([&task, i](ObjectEntry entry) {
      task.resolved[i] = std::move(entry);
    }));
  }
  return kj::joinPromises(waits.releaseAsArray()).then([&task]() -> std::optional<ObjectError> {
    task.args_ready = true;
    for (size_t i = 0; i < task.args.size(); ++i) {
      if (task.args[i].ref && task.resolved[i].error) {
        ObjectError failed = *task.resolved[i].error;
        failed.message = "argument " + std::to_string(i) + " failed: " + failed.message;
        return failed;
      }
    }
    return std::nullopt;
  });
}

void FillTaskSpec(const PendingTask& task, const JobId& job, proto::TaskSpec::Builder spec) {
  spec.setTaskId(AsData(task.id.Binary()));
  // An actor's worker runs tasks of the actor's job, whoever calls it.
  const JobId& of = task.kind == proto::TaskKind::ACTOR_METHOD ? task.actor_id.Job() : job;
  spec.setJobId(AsData(of.Binary()));
  spec.setFunctionName(task.function);
  spec.setNumReturns(static_cast<uint32_t>(task.returns.size()));
  spec.setName(task.options.name);
  spec.setKind(task.kind);
  if (task.kind != proto::TaskKind::NORMAL) spec.setActorId(AsData(task.actor_id.Binary()));
  spec.setMaxConcurrency(task.max_concurrency);
  auto args = spec.initArgs(static_cast<uint>(task.args.size()));
  for (size_t i = 0; i < task.args.size(); ++i) {
    const ObjectEntry& dep = task.resolved[i];
    if (!task.args[i].ref) {
      args[i].setInline(AsData(task.args[i].value));
    } else if (dep.value) {
      args[i].setInline(AsData(*dep.value));
    } else {
      auto where = args[i].initObject();
      where.setObjectId(AsData(dep.location->id.Binary()));
      where.setTransferAddress(dep.location->transfer_address);
      where.setSize(dep.location->size);
    }
  }
}

void RecordTaskReply(MemoryStore& memory, PendingTask& task,
                     proto::Worker::PushTaskResults::Reader reply) {
  if (reply.getFailed()) {
    auto error = reply.getError();
    ObjectErrorKind kind = error.getKind() == proto::TaskError::Kind::FUNCTION_NOT_FOUND
                               ? ObjectErrorKind::kFunctionNotFound
                               : ObjectErrorKind::kTaskError;
    FailTask(memory, task, kind, error.getMessage().cStr());
    return;
  }
  auto returns = reply.getReturns();
  if (returns.size() != task.returns.size()) {
    FailTask(memory, task, ObjectErrorKind::kTaskError,
             "the worker answered " + std::to_string(returns.size()) + " returns, expected " +
                 std::to_string(task.returns.size()));
    return;
  }
  for (uint i = 0; i < returns.size(); ++i) {
    ObjectEntry entry;
    if (returns[i].isInline()) {
      entry.value = std::make_shared<const std::string>(ToString(returns[i].getInline()));
    } else {
      auto where = returns[i].getObject();
      entry.location = ObjectLocation{task.returns[i], where.getTransferAddress().cStr(),
                                      where.getSize(), where.getNodeAddress().cStr()};
    }
    memory.Put(task.returns[i], std::move(entry));
  }
  if (task.done) task.done->fulfill();
}

void FailTask(MemoryStore& memory, PendingTask& task, ObjectErrorKind kind,
              const std::string& message) {
  for (const ObjectId& id : task.returns) {
    memory.Put(id, ObjectEntry{nullptr, std::nullopt, ObjectError{kind, task.function, message}});
  }
  if (task.done) task.done->fulfill();
}

}  // namespace airt::core
