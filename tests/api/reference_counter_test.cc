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

TEST(ReferenceCounter, ABorrowedObjectIsFreedWhenItsLastBorrowerLeaves) {
  std::vector<ObjectId> freed;
  ReferenceCounter refs([&](const ObjectId& id) { freed.push_back(id); });
  ObjectId a = Id(3);
  WorkerId one = WorkerId::FromRandom(), two = WorkerId::FromRandom();
  refs.AddLocal(a);
  EXPECT_TRUE(refs.AddBorrower(a, one));
  EXPECT_TRUE(refs.AddBorrower(a, one)) << "a second registration counts once";
  EXPECT_TRUE(refs.AddBorrower(a, two));
  EXPECT_EQ(refs.NumBorrowers(a), 2u);
  refs.RemoveLocal(a);
  refs.RemoveBorrower(a, one);
  EXPECT_TRUE(freed.empty()) << "freed while borrowed";
  refs.RemoveBorrower(a, two);
  EXPECT_EQ(freed, std::vector<ObjectId>{a});
  EXPECT_FALSE(refs.AddBorrower(a, one)) << "a freed object cannot be borrowed";
}

TEST(ReferenceCounter, ABorrowerThatIsGoneReleasesEverythingItBorrowed) {
  std::vector<ObjectId> freed;
  ReferenceCounter refs([&](const ObjectId& id) { freed.push_back(id); });
  ObjectId a = Id(4), b = Id(5);
  WorkerId dead = WorkerId::FromRandom(), alive = WorkerId::FromRandom();
  refs.AddLocal(a);
  refs.AddLocal(b);
  refs.AddBorrower(a, dead);
  refs.AddBorrower(b, dead);
  refs.AddBorrower(b, alive);
  refs.RemoveLocal(a);
  refs.RemoveLocal(b);
  refs.RemoveBorrowerEverywhere(dead);
  EXPECT_EQ(freed, std::vector<ObjectId>{a}) << "b is still borrowed by another";
  refs.RemoveBorrowerEverywhere(alive);
  EXPECT_EQ(freed.size(), 2u);
}

TEST(ReferenceCounter, AnEscrowedObjectWaitsForItsFirstBorrower) {
  std::vector<ObjectId> freed;
  ReferenceCounter refs([&](const ObjectId& id) { freed.push_back(id); });
  ObjectId a = Id(6);
  EXPECT_FALSE(refs.AddEscrow(a)) << "nothing holds it: nothing to keep";
  refs.AddLocal(a);
  EXPECT_TRUE(refs.AddEscrow(a));
  refs.RemoveLocal(a);
  EXPECT_TRUE(freed.empty()) << "freed before its reader borrowed it";
  WorkerId reader = WorkerId::FromRandom();
  refs.AddBorrower(a, reader);
  refs.RemoveBorrower(a, reader);
  EXPECT_EQ(freed.size(), 1u);
}

}  // namespace
}  // namespace airt::core_worker
