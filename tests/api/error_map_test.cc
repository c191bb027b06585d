// The one error map: every kind of the schema's ErrorKind throws its documented C++ type, every
// Status code maps to its documented kind, and a task's exception (TaskError.data) travels from
// the worker's answer to the owner's memory store byte for byte.
#include <capnp/message.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "airt/exceptions.h"
#include "api/core_worker/memory_store.h"
#include "api/core_worker/task_spec.h"
#include "api/internal/error_kinds.h"
#include "api/internal/worker_service.h"
#include "common/error_kind.h"

namespace airt {
namespace {

using internal::ThrowError;
using internal::ThrowStatus;

// docs/cpp_api.md's error table: each kind, the type it throws, and that type's Ray-like bases.
struct Row {
  ErrorKind kind;
  std::string schema_name;
  std::function<bool(const Exception&)> is_type;
};
template <typename T>
std::function<bool(const Exception&)> Is() {
  return [](const Exception& e) { return dynamic_cast<const T*>(&e) != nullptr; };
}
template <typename T>
std::function<bool(const Exception&)> IsExactly() {
  return [](const Exception& e) { return typeid(e) == typeid(T); };
}

std::vector<Row> Table() {
  return {
      {ErrorKind::kUserException, "userException", IsExactly<TaskError>()},
      {ErrorKind::kFunctionNotFound, "functionNotFound", IsExactly<FunctionNotFoundError>()},
      {ErrorKind::kBadArguments, "badArguments", IsExactly<TaskError>()},
      {ErrorKind::kCancelled, "cancelled", IsExactly<TaskCancelledError>()},
      {ErrorKind::kWorkerCrashed, "workerCrashed", IsExactly<WorkerCrashedError>()},
      {ErrorKind::kInfeasible, "infeasible", IsExactly<InfeasibleError>()},
      {ErrorKind::kUnavailable, "unavailable", IsExactly<UnavailableError>()},
      {ErrorKind::kActorDied, "actorDied", IsExactly<ActorDiedError>()},
      {ErrorKind::kActorUnavailable, "actorUnavailable", IsExactly<ActorUnavailableError>()},
      {ErrorKind::kObjectLost, "objectLost", IsExactly<ObjectLostError>()},
      {ErrorKind::kOwnerDied, "ownerDied", IsExactly<OwnerDiedError>()},
      {ErrorKind::kObjectReconstructionFailed, "objectReconstructionFailed",
       IsExactly<ObjectReconstructionFailedError>()},
      {ErrorKind::kObjectStoreFull, "objectStoreFull", IsExactly<ObjectStoreFullError>()},
      {ErrorKind::kOutOfMemory, "outOfMemory", IsExactly<OutOfMemoryError>()},
      {ErrorKind::kTimeout, "timeout", IsExactly<TimeoutError>()},
      {ErrorKind::kRuntimeEnvSetup, "runtimeEnvSetup", IsExactly<RuntimeEnvSetupError>()},
      {ErrorKind::kInvalidArgument, "invalidArgument", IsExactly<InvalidArgumentError>()},
      {ErrorKind::kUnimplemented, "unimplemented", IsExactly<UnimplementedError>()},
      {ErrorKind::kSystem, "system", IsExactly<Exception>()},
      {ErrorKind::kObjectReconstructionFailedMaxAttemptsExceeded,
       "objectReconstructionFailedMaxAttemptsExceeded",
       IsExactly<ObjectReconstructionFailedMaxAttemptsExceededError>()},
      {ErrorKind::kObjectReconstructionFailedLineageEvicted,
       "objectReconstructionFailedLineageEvicted",
       IsExactly<ObjectReconstructionFailedLineageEvictedError>()},
  };
}

TEST(ErrorMap, SchemaAndApiHaveTheSameKinds) {
  ASSERT_EQ(NumErrorKinds(), static_cast<size_t>(kNumErrorKinds));
  std::vector<Row> table = Table();
  ASSERT_EQ(table.size(), NumErrorKinds()) << "a kind is missing from the table";
  for (const Row& row : table) {
    EXPECT_EQ(ErrorKindName(internal::ToProto(row.kind)), row.schema_name);
  }
  EXPECT_EQ(ErrorKindName(static_cast<proto::ErrorKind>(kNumErrorKinds)), "");
  EXPECT_FALSE(IsKnownErrorKind(static_cast<proto::ErrorKind>(kNumErrorKinds)));
}

TEST(ErrorMap, EveryKindThrowsItsOwnType) {
  for (const Row& row : Table()) {
    try {
      ThrowError(row.kind, "what of " + row.schema_name, "data");
      FAIL() << row.schema_name << " threw nothing";
    } catch (const Exception& e) {
      EXPECT_TRUE(row.is_type(e)) << row.schema_name << " threw " << typeid(e).name();
      EXPECT_EQ(e.kind(), row.kind) << row.schema_name;
      EXPECT_EQ(std::string(e.what()), "what of " + row.schema_name);
    }
  }
  // A kind off the wire that this build does not know: airt's own error, not a crash.
  EXPECT_THROW(ThrowError(static_cast<ErrorKind>(kNumErrorKinds + 3), "?"), Exception);
}

TEST(ErrorMap, TypesKeepRayLikeBases) {
  EXPECT_TRUE(Is<TaskError>()(FunctionNotFoundError("f")));
  EXPECT_TRUE(Is<ActorError>()(ActorDiedError("a")));
  EXPECT_TRUE(Is<ActorError>()(ActorUnavailableError("a")));
  EXPECT_TRUE(Is<ObjectLostError>()(OwnerDiedError("o")));
  EXPECT_TRUE(Is<ObjectReconstructionFailedError>()(
      ObjectReconstructionFailedMaxAttemptsExceededError("m")));
  EXPECT_TRUE(
      Is<ObjectReconstructionFailedError>()(ObjectReconstructionFailedLineageEvictedError("l")));
  EXPECT_TRUE(Is<ObjectLostError>()(ObjectReconstructionFailedLineageEvictedError("l")));
  EXPECT_TRUE(Is<ObjectLostError>()(ObjectReconstructionFailedError("o")));
  EXPECT_FALSE(Is<ObjectLostError>()(ObjectStoreFullError("s")));
}

TEST(ErrorMap, OnlyTaskErrorsKeepTheirData) {
  try {
    ThrowError(ErrorKind::kUserException, "f: boom", std::string("pickled\0bytes", 13));
  } catch (const TaskError& e) {
    EXPECT_EQ(e.data(), std::string("pickled\0bytes", 13));
  }
  try {
    ThrowError(ErrorKind::kObjectStoreFull, "full", "ignored");
  } catch (const ObjectStoreFullError& e) {
    EXPECT_EQ(e.data(), "");
  }
}

TEST(ErrorMap, EveryStatusCodeThrowsItsDocumentedType) {
  struct Case {
    Status status;
    ErrorKind kind;
  };
  std::vector<Case> cases = {
      {DeadlineExceeded("d"), ErrorKind::kTimeout},
      {ResourceExhausted("r"), ErrorKind::kObjectStoreFull},
      {Unavailable("u"), ErrorKind::kUnavailable},
      {Cancelled("c"), ErrorKind::kCancelled},
      {InvalidArgument("i"), ErrorKind::kInvalidArgument},
      {AlreadyExists("a"), ErrorKind::kInvalidArgument},
      {NotFound("n"), ErrorKind::kInvalidArgument},
      {Unimplemented("m"), ErrorKind::kUnimplemented},
      {FailedPrecondition("f"), ErrorKind::kSystem},
      {Internal("x"), ErrorKind::kSystem},
  };
  ASSERT_EQ(cases.size(), static_cast<size_t>(Code::kInternal));  // every code but kOk
  for (const Case& c : cases) {
    try {
      ThrowStatus(c.status);
      FAIL() << c.status.ToString();
    } catch (const Exception& e) {
      EXPECT_EQ(e.kind(), c.kind) << c.status.ToString();
      EXPECT_EQ(std::string(e.what()), c.status.message());
    }
  }
  EXPECT_THROW(ThrowStatus(ResourceExhausted("object 00ab does not fit")), ObjectStoreFullError);
  EXPECT_THROW(ThrowStatus(DeadlineExceeded("late")), GetTimeoutError);
}

TEST(ErrorMap, TaskErrorDataTravelsFromWorkerAnswerToOwner) {
  const std::string pickled("\x80\x05\x95\x00pickled exception\xff", 22);
  internal::TaskOutcome outcome;
  outcome.failure =
      internal::TaskFailure{proto::ErrorKind::USER_EXCEPTION, "Traceback ...", pickled};
  capnp::MallocMessageBuilder message;
  auto results = message.initRoot<proto::Worker::PushTaskResults>();
  internal::FillTaskResults(outcome, "f", internal::ReturnsAt{}, results);

  core_worker::MemoryStore memory;
  core_worker::PendingTask task;
  task.function = "f";
  task.returns = {ObjectId::ForReturn(TaskId::ForDriver(JobId::FromRandom()), 1)};
  core_worker::RecordTaskReply(memory, task, results.asReader());
  auto entries = memory.Wait(task.returns, 0);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_TRUE((*entries)[0].error);
  const core_worker::ObjectError& error = *(*entries)[0].error;
  EXPECT_EQ(error.kind, proto::ErrorKind::USER_EXCEPTION);
  EXPECT_EQ(error.message, "Traceback ...");
  EXPECT_EQ(error.data, pickled);
}

TEST(ErrorMap, UnknownKindFromAWorkerIsASystemErrorKeepingItsMessage) {
  capnp::MallocMessageBuilder message;
  auto results = message.initRoot<proto::Worker::PushTaskResults>();
  results.setFailed(true);
  auto error = results.initError();
  error.setKind(static_cast<proto::ErrorKind>(kNumErrorKinds + 7));
  error.setMessage("from a newer worker");
  core_worker::MemoryStore memory;
  core_worker::PendingTask task;
  task.function = "f";
  task.returns = {ObjectId::ForReturn(TaskId::ForDriver(JobId::FromRandom()), 1)};
  core_worker::RecordTaskReply(memory, task, results.asReader());
  auto entries = memory.Wait(task.returns, 0);
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ((*entries)[0].error->kind, proto::ErrorKind::SYSTEM);
  EXPECT_NE((*entries)[0].error->message.find("from a newer worker"), std::string::npos);
}

TEST(ErrorMap, AStoreThatCannotTakeAReturnIsObjectStoreFull) {
  internal::TaskOutcome outcome;
  outcome.status = ResourceExhausted("object 00ab of 2 MiB cannot fit in the store");
  capnp::MallocMessageBuilder message;
  auto results = message.initRoot<proto::Worker::PushTaskResults>();
  internal::FillTaskResults(outcome, "f", internal::ReturnsAt{}, results);
  ASSERT_TRUE(results.getFailed());
  EXPECT_EQ(results.getError().getKind(), proto::ErrorKind::OBJECT_STORE_FULL);
}

TEST(ErrorMap, AnUnreadableCopyIsALostObjectNamingObjectAndNode) {
  ObjectId id = ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), 1);
  core_worker::ObjectLocation where{id, "10.0.0.7:7001", 100, "10.0.0.7:7000"};
  core_worker::ObjectError lost = core_worker::LostObject(where, NotFound("not in the store"));
  EXPECT_EQ(lost.kind, proto::ErrorKind::OBJECT_LOST);
  EXPECT_NE(lost.message.find(id.Hex()), std::string::npos) << lost.message;
  EXPECT_NE(lost.message.find("10.0.0.7:7000"), std::string::npos) << lost.message;
  core_worker::ObjectError full = core_worker::LostObject(where, ResourceExhausted("no room"));
  EXPECT_EQ(full.kind, proto::ErrorKind::OBJECT_STORE_FULL);
}

}  // namespace
}  // namespace airt
