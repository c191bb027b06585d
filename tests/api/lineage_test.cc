// The lineage an owner keeps (api/core_worker/lineage.h): kept while a return is referenced or a
// kept task depends on it, released when neither holds, and evicted oldest first past its cap.
#include "api/core_worker/lineage.h"

#include <gtest/gtest.h>

namespace airt::core_worker {
namespace {

const JobId kJob = JobId::FromRaw(reinterpret_cast<const uint8_t*>("job1"));

LineageTask MakeTask(std::vector<ObjectId> args = {}, int32_t retries = 3) {
  LineageTask task;
  task.id = TaskId::Of(ActorId::NilFor(kJob));
  task.function = "Make";
  task.returns = {ObjectId::ForReturn(task.id, 1)};
  for (const ObjectId& arg : args) {
    TaskArgument a;
    a.ref = arg;
    task.args.push_back(a);
  }
  task.retries_left = retries;
  return task;
}

TEST(Lineage, KeepsATaskWhileItsReturnIsReferenced) {
  Lineage lineage(1 << 20);
  LineageTask task = MakeTask();
  TaskId id = task.id;
  ObjectId ret = task.returns[0];
  lineage.Add(task, {ret});
  ASSERT_NE(lineage.Find(id), nullptr);
  EXPECT_EQ(lineage.Find(id)->retries_left, 3);
  EXPECT_EQ(lineage.Stats().tasks, 1u);
  lineage.ReleaseReturn(ret);
  EXPECT_EQ(lineage.Find(id), nullptr);
  EXPECT_FALSE(lineage.Evicted(id));
  EXPECT_EQ(lineage.Stats().bytes, 0u);
}

TEST(Lineage, KeepsNothingWhenNoReturnIsReferenced) {
  Lineage lineage(1 << 20);
  LineageTask task = MakeTask();
  lineage.Add(task, {});
  EXPECT_EQ(lineage.Find(task.id), nullptr);
}

TEST(Lineage, KeepsAnArgumentsTaskWhileATaskThatTookItIsKept) {
  Lineage lineage(1 << 20);
  LineageTask first = MakeTask();
  lineage.Add(first, {first.returns[0]});
  LineageTask second = MakeTask({first.returns[0]});
  lineage.Add(second, {second.returns[0]});
  // The argument's last reference goes: its task stays, for the second one's re-run.
  lineage.ReleaseReturn(first.returns[0]);
  EXPECT_NE(lineage.Find(first.id), nullptr);
  lineage.ReleaseReturn(second.returns[0]);
  EXPECT_EQ(lineage.Find(second.id), nullptr);
  EXPECT_EQ(lineage.Find(first.id), nullptr);
}

TEST(Lineage, EvictsTheOldestPastItsCapAndRemembersIt) {
  LineageTask probe = MakeTask();
  uint64_t one = Lineage::SizeOf(probe);
  Lineage lineage(2 * one);
  std::vector<LineageTask> tasks;
  for (int i = 0; i < 3; ++i) {
    tasks.push_back(MakeTask());
    lineage.Add(tasks.back(), {tasks.back().returns[0]});
  }
  EXPECT_EQ(lineage.Find(tasks[0].id), nullptr);
  EXPECT_TRUE(lineage.Evicted(tasks[0].id));
  EXPECT_NE(lineage.Find(tasks[1].id), nullptr);
  EXPECT_NE(lineage.Find(tasks[2].id), nullptr);
  EXPECT_LE(lineage.Stats().bytes, 2 * one);
  EXPECT_EQ(lineage.Stats().evicted, 1u);
}

TEST(Lineage, ATaskLargerThanTheCapIsEvictedAtOnce) {
  Lineage lineage(1);
  LineageTask task = MakeTask();
  lineage.Add(task, {task.returns[0]});
  EXPECT_EQ(lineage.Find(task.id), nullptr);
  EXPECT_TRUE(lineage.Evicted(task.id));
  EXPECT_EQ(lineage.Stats().bytes, 0u);
}

TEST(Lineage, EvictingATaskReleasesItsHoldOnItsArguments) {
  LineageTask first = MakeTask();
  uint64_t one = Lineage::SizeOf(first);
  Lineage lineage(one + Lineage::SizeOf(MakeTask({first.returns[0]})));
  lineage.Add(first, {first.returns[0]});
  lineage.ReleaseReturn(first.returns[0]);  // gone already: nothing held it
  EXPECT_EQ(lineage.Find(first.id), nullptr);
  EXPECT_FALSE(lineage.Evicted(first.id));
  LineageTask a = MakeTask();
  lineage.Add(a, {a.returns[0]});
  LineageTask b = MakeTask({a.returns[0]});
  lineage.Add(b, {b.returns[0]});
  lineage.ReleaseReturn(a.returns[0]);  // held by b
  ASSERT_NE(lineage.Find(a.id), nullptr);
  LineageTask c = MakeTask();
  lineage.Add(c, {c.returns[0]});  // over the cap: `a`, the oldest, goes
  EXPECT_TRUE(lineage.Evicted(a.id));
}

TEST(Lineage, PutsHaveNoLineage) {
  Lineage lineage(1 << 20);
  LineageTask task = MakeTask();
  ObjectId put = ObjectId::ForPut(task.id, 1);
  lineage.ReleaseReturn(put);  // ignored
  EXPECT_EQ(lineage.Find(put.Task()), nullptr);
  EXPECT_FALSE(lineage.Evicted(put.Task()));
}

}  // namespace
}  // namespace airt::core_worker
