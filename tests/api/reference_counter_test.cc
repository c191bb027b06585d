#include "api/core_worker/reference_counter.h"

#include <vector>

#include <gtest/gtest.h>

namespace airt::core_worker {
namespace {

ObjectId Id(uint32_t n) { return ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), n); }

TEST(ReferenceCounter, FreesOnceTheLastLocalAndTaskReferenceGo) {
  std::vector<ObjectId> freed;
  ReferenceCounter refs([&](const ObjectId& id) { freed.push_back(id); });
  ObjectId a = Id(1);
  refs.AddLocal(a);
  refs.AddLocal(a);
  refs.AddSubmitted(a);
  refs.RemoveLocal(a);
  refs.RemoveLocal(a);
  EXPECT_TRUE(freed.empty()) << "a task still takes it";
  EXPECT_EQ(refs.size(), 1u);
  refs.RemoveSubmitted(a);
  EXPECT_EQ(freed, std::vector<ObjectId>{a});
  EXPECT_EQ(refs.size(), 0u);
}

TEST(ReferenceCounter, AnObjectOnlyATaskHeldIsFreedWhenTheTaskEnds) {
  std::vector<ObjectId> freed;
  ReferenceCounter refs([&](const ObjectId& id) { freed.push_back(id); });
  ObjectId a = Id(2);
  refs.AddSubmitted(a);
  refs.AddSubmitted(a);
  refs.RemoveSubmitted(a);
  EXPECT_TRUE(freed.empty());
  refs.RemoveSubmitted(a);
  EXPECT_EQ(freed.size(), 1u);
}

TEST(ReferenceCounter, ReleasingWhatWasNotHeldFreesNothing) {
  std::vector<ObjectId> freed;
  ReferenceCounter refs([&](const ObjectId& id) { freed.push_back(id); });
  ObjectId a = Id(3);
  refs.RemoveLocal(a);  // logged, ignored
  refs.AddLocal(a);
  refs.RemoveSubmitted(a);  // not a task's: ignored
  EXPECT_TRUE(freed.empty());
  refs.RemoveLocal(a);
  EXPECT_EQ(freed.size(), 1u);
}

}  // namespace
}  // namespace airt::core_worker
