#include "api/core_worker/task_spec.h"

#include <kj/vector.h>

#include "api/core_worker/capnp_util.h"

namespace airt::core_worker {

namespace {
std::optional<ObjectError> FirstFailedArgument(const PendingTask& task);
}  // namespace

kj::Promise<std::optional<ObjectError>> ResolveArguments(MemoryStore& memory, PendingTask& task) {
  task.resolved.resize(task.args.size());
  task.resolved_lists.resize(task.args.size());
  kj::Vector<kj::Promise<void>> waits;
  for (size_t i = 0; i < task.args.size(); ++i) {
    const TaskArgument& arg = task.args[i];
    if (arg.ref) {
      waits.add(memory.WhenReady(*arg.ref).then(
          [&task, i](ObjectEntry entry) { task.resolved[i] = std::move(entry); }));
    }
    if (arg.is_list) {
      task.resolved_lists[i].resize(arg.ref_list.size());
      for (size_t j = 0; j < arg.ref_list.size(); ++j) {
        waits.add(memory.WhenReady(arg.ref_list[j]).then([&task, i, j](ObjectEntry entry) {
          task.resolved_lists[i][j] = std::move(entry);
        }));
      }
    }
  }
  return kj::joinPromises(waits.releaseAsArray()).then([&task] {
    task.args_ready = true;
    task.arg_error = FirstFailedArgument(task);
    return task.arg_error;
  });
}

namespace {
// The first argument (or list element) whose object is an error, as the task's error.
std::optional<ObjectError> FirstFailedArgument(const PendingTask& task) {
  for (size_t i = 0; i < task.args.size(); ++i) {
    if (task.args[i].ref && task.resolved[i].error) {
      ObjectError failed = *task.resolved[i].error;
      failed.message = "argument " + std::to_string(i) + " failed: " + failed.message;
      return failed;
    }
    for (size_t j = 0; j < task.resolved_lists[i].size(); ++j) {
      if (!task.resolved_lists[i][j].error) continue;
      ObjectError failed = *task.resolved_lists[i][j].error;
      failed.message =
          "argument " + std::to_string(i) + "[" + std::to_string(j) + "] failed: " + failed.message;
      return failed;
    }
  }
  return std::nullopt;
}
}  // namespace

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
  if (task.kind == proto::TaskKind::NORMAL) {
    SetAmounts(spec.initResources(static_cast<uint>(task.options.resources.size())),
               task.options.resources);
  }
  if (task.stream) spec.setGeneratorSink(MakeGeneratorSink(task.stream));
  spec.setOwnerAddress(task.owner);
  auto args = spec.initArgs(static_cast<uint>(task.args.size()));
  // A resolved reference: its value inline when the owner has it, else where it lies.
  auto set_resolved = [](const ObjectEntry& dep, proto::TaskArg::Builder out) {
    if (dep.value) {
      out.setInline(AsData(*dep.value));
      return;
    }
    auto where = out.initObject();
    where.setObjectId(AsData(dep.location->id.Binary()));
    where.setTransferAddress(dep.location->transfer_address);
    where.setSize(dep.location->size);
    where.setNodeAddress(dep.location->node_address);
  };
  for (size_t i = 0; i < task.args.size(); ++i) {
    const TaskArgument& arg = task.args[i];
    if (arg.is_list) {
      const std::vector<ObjectEntry>& deps = task.resolved_lists[i];
      auto list = args[i].initList(static_cast<uint>(deps.size()));
      for (size_t j = 0; j < deps.size(); ++j) set_resolved(deps[j], list[static_cast<uint>(j)]);
    } else if (arg.ref) {
      set_resolved(task.resolved[i], args[i]);
    } else {
      args[i].setInline(AsData(arg.value));
    }
  }
}

void ReportCopies(const CopiesFn& on_copies, proto::Worker::PushTaskResults::Reader reply) {
  if (!on_copies || !reply.hasCopies() || reply.getCopies().size() == 0) return;
  std::vector<ObjectLocation> copies;
  copies.reserve(reply.getCopies().size());
  for (auto copy : reply.getCopies()) {
    auto raw = copy.getObjectId();
    if (raw.size() != ObjectId::kSize) continue;  // a malformed entry is no location
    copies.push_back(ObjectLocation{ObjectId::FromRaw(raw.begin()),
                                    copy.getTransferAddress().cStr(), copy.getSize(),
                                    copy.getNodeAddress().cStr()});
  }
  if (!copies.empty()) on_copies(std::move(copies));
}

void RecordTaskReply(MemoryStore& memory, PendingTask& task,
                     proto::Worker::PushTaskResults::Reader reply) {
  if (reply.getFailed()) {
    auto error = reply.getError();
    ErrorKind kind = error.getKind();
    std::string message = error.getMessage().cStr();
    if (!IsKnownErrorKind(kind)) {  // a newer worker's kind: the message still says what it was
      message = "(error kind " + std::to_string(static_cast<int>(kind)) + ") " + message;
      kind = ErrorKind::SYSTEM;
    }
    FailTask(memory, task, kind, message, ToString(error.getData()));
    return;
  }
  auto returns = reply.getReturns();
  if (returns.size() != task.returns.size()) {
    FailTask(memory, task, ErrorKind::SYSTEM,
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

void FailTask(MemoryStore& memory, PendingTask& task, ErrorKind kind, const std::string& message,
              const std::string& data) {
  for (const ObjectId& id : task.returns) {
    memory.Put(id, ObjectEntry{nullptr, std::nullopt, ObjectError{kind, task.function, message, data}});
  }
  if (task.done) task.done->fulfill();
}

void DropTaskReply(const ConnectFn& connect, kj::TaskSet& background,
                   proto::Worker::PushTaskResults::Reader reply) {
  if (reply.getFailed()) return;
  for (auto value : reply.getReturns()) {
    if (!value.isObject() || value.getObject().getNodeAddress().size() == 0) continue;
    auto where = value.getObject();
    auto request =
        connect(where.getNodeAddress().cStr()).castAs<proto::Node>().freeObjectsRequest();
    request.initObjectIds(1).set(0, where.getObjectId());
    background.add(request.send().ignoreResult());
  }
}

bool MarkCancelled(MemoryStore& memory, PendingTask& task) {
  if (task.cancelled) return false;
  task.cancelled = true;
  for (const ObjectId& id : task.returns) {
    memory.Put(id, ObjectEntry{nullptr, std::nullopt,
                               ObjectError{ErrorKind::CANCELLED, task.function,
                                           "task " + task.id.Hex() + " was cancelled", ""}});
  }
  return true;
}

}  // namespace airt::core_worker
