// Streaming generators end to end: a real airt-head, an airt-node starting real airt-worker
// processes, and this test as the driver, over the functions and the actor of
// generator_functions.cc (the same generators run as tasks and as actor methods). The generators
// and the test synchronize through files, never through timing.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/generator_functions.h"
#include "tests/e2e/task_cluster.h"

namespace airt {
namespace {

using namespace std::chrono_literals;
using airt::testing::ReadFile;
using airt::testing::WaitUntil;

class Generators : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new e2e::TaskCluster({"--num-cpus=2"}); }
  static void TearDownTestSuite() { delete cluster_; }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- node log ----\n" << cluster_->NodeLog();
  }
  static std::string File(const std::string& name) {
    static int next = 0;
    return cluster_->dir().File(name + "-" + std::to_string(next++));
  }
  static int Count(const std::string& path) {
    if (!std::filesystem::exists(path)) return 0;
    std::string text = ReadFile(path);
    return text.empty() ? 0 : std::stoi(text);
  }
  template <typename T>
  static std::vector<T> Values(ObjectRefGenerator<T>& items) {
    std::vector<T> out;
    for (const ObjectRef<T>& item : items) out.push_back(*Get(item));
    return out;
  }

  static e2e::TaskCluster* cluster_;
};

e2e::TaskCluster* Generators::cluster_ = nullptr;

TEST_F(Generators, RangeForGivesEveryItemInOrder) {
  ObjectRefGenerator<int> items = Task(CountTo).Remote(5);
  EXPECT_EQ(Values(items), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(items.Next().has_value());
  EXPECT_NO_THROW(Get(items.Completed()));
}

TEST_F(Generators, ItemsArriveWhileTheGeneratorStillRuns) {
  std::string go = File("go");
  ObjectRefGenerator<std::string> items = Task(GatedItems).Remote(go, 2);
  std::optional<ObjectRef<std::string>> first = items.Next(30'000);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*Get(*first), "first");
  // The generator waits for `go`, which only this test writes: it still runs.
  EXPECT_TRUE(
      Wait(std::vector<ObjectRef<msgpack::type::nil_t>>{items.Completed()}, 1, 0).ready.empty());
  { std::ofstream(go).put('\n'); }
  EXPECT_EQ(Values(items), (std::vector<std::string>{"0", "1"}));
}

TEST_F(Generators, BackpressureHoldsTheGeneratorNItemsAheadOfTheConsumer) {
  constexpr int kItems = 10, kAhead = 2;
  std::string count = File("count");
  ObjectRefGenerator<int> items =
      Task(CountInto).SetGeneratorBackpressure(kAhead).Remote(count, kItems);
  int taken = 0;
  for (const ObjectRef<int>& item : items) {
    EXPECT_EQ(*Get(item), taken);
    ++taken;
    if (taken + kAhead <= kItems) {
      EXPECT_TRUE(WaitUntil([&] { return Count(count) >= taken + kAhead; }, 30s)) << taken;
    }
    EXPECT_LE(Count(count), taken + kAhead);
  }
  EXPECT_EQ(taken, kItems);
}

TEST_F(Generators, AnErrorAfterKItemsIsTheNextItemsError) {
  ObjectRefGenerator<int> items = Task(FailAfter).Remote(2);
  std::vector<ObjectRef<int>> refs;
  for (const ObjectRef<int>& item : items) refs.push_back(item);
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_EQ(*Get(refs[0]), 0);
  EXPECT_EQ(*Get(refs[1]), 1);
  try {
    Get(refs[2]);
    ADD_FAILURE() << "the third item should hold the error";
  } catch (const TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("failed after 2 items"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Get(items.Completed()), TaskError);
}

TEST_F(Generators, ARetriedGeneratorResumesWithoutDuplicates) {
  std::string marker = File("died");
  ObjectRefGenerator<int> items = Task(DieOnceAfter).SetMaxRetries(2).Remote(marker, 6, 2);
  EXPECT_EQ(Values(items), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(std::filesystem::exists(marker)) << "the first attempt did not die";
}

TEST_F(Generators, CancelStopsAHeldBackGeneratorAndTheNextItemThrows) {
  std::string count = File("count"), stopped = File("stopped");
  ObjectRefGenerator<int> items =
      Task(Endless).SetGeneratorBackpressure(1).SetMaxRetries(0).Remote(count, stopped);
  std::optional<ObjectRef<int>> first = items.Next(30'000);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*Get(*first), 0);
  ASSERT_TRUE(WaitUntil([&] { return Count(count) >= 2; }, 30s));
  Cancel(items.Completed());
  EXPECT_TRUE(WaitUntil([&] { return std::filesystem::exists(stopped); }, 30s));
  EXPECT_LE(Count(count), 3);
  bool cancelled = false;
  try {
    for (const ObjectRef<int>& item : items) Get(item);
  } catch (const TaskCancelledError&) {
    cancelled = true;
  }
  EXPECT_TRUE(cancelled);
}

// ---- Actor methods returning Generator<T> stream as tasks do ----------------------------------

// A fresh StreamingActor for one test, killed at its end.
struct ScopedActor {
  ActorHandle<StreamingActor> actor =
      Actor(StreamingActor::Create).SetMaxRestarts(1).SetMaxTaskRetries(1).Remote();
  ~ScopedActor() { actor.Kill(); }
};

TEST_F(Generators, AnActorMethodsRangeForGivesEveryItemInOrder) {
  ScopedActor scoped;
  ActorHandle<StreamingActor>& actor = scoped.actor;
  ObjectRefGenerator<int> items = actor.Task(&StreamingActor::CountTo).Remote(5);
  EXPECT_EQ(Values(items), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(items.Next().has_value());
  EXPECT_NO_THROW(Get(items.Completed()));
}

TEST_F(Generators, AnActorMethodsItemsArriveWhileItStillRuns) {
  ScopedActor scoped;
  ActorHandle<StreamingActor>& actor = scoped.actor;
  std::string go = File("go");
  ObjectRefGenerator<std::string> items = actor.Task(&StreamingActor::GatedItems).Remote(go, 2);
  std::optional<ObjectRef<std::string>> first = items.Next(30'000);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*Get(*first), "first");
  // The method waits for `go`, which only this test writes: it still runs, and so does the call
  // made after it (the actor runs one call at a time).
  ObjectRef<int> calls = actor.Task(&StreamingActor::Calls).Remote();
  EXPECT_TRUE(
      Wait(std::vector<ObjectRef<msgpack::type::nil_t>>{items.Completed()}, 1, 0).ready.empty());
  EXPECT_TRUE(Wait(std::vector<ObjectRef<int>>{calls}, 1, 0).ready.empty());
  { std::ofstream(go).put('\n'); }
  EXPECT_EQ(Values(items), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(*Get(calls, 30'000), 2);
}

TEST_F(Generators, BackpressureHoldsAnActorMethodNItemsAheadOfTheConsumer) {
  ScopedActor scoped;
  ActorHandle<StreamingActor>& actor = scoped.actor;
  constexpr int kItems = 10, kAhead = 2;
  std::string count = File("count");
  ObjectRefGenerator<int> items =
      actor.Task(&StreamingActor::CountInto).SetGeneratorBackpressure(kAhead).Remote(count, kItems);
  int taken = 0;
  for (const ObjectRef<int>& item : items) {
    EXPECT_EQ(*Get(item), taken);
    ++taken;
    if (taken + kAhead <= kItems) {
      EXPECT_TRUE(WaitUntil([&] { return Count(count) >= taken + kAhead; }, 30s)) << taken;
    }
    EXPECT_LE(Count(count), taken + kAhead);
  }
  EXPECT_EQ(taken, kItems);
}

TEST_F(Generators, AnActorMethodsErrorAfterKItemsIsTheNextItemsErrorAndTheActorLivesOn) {
  ScopedActor scoped;
  ActorHandle<StreamingActor>& actor = scoped.actor;
  ObjectRefGenerator<int> items = actor.Task(&StreamingActor::FailAfter).Remote(2);
  std::vector<ObjectRef<int>> refs;
  for (const ObjectRef<int>& item : items) refs.push_back(item);
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_EQ(*Get(refs[0]), 0);
  EXPECT_EQ(*Get(refs[1]), 1);
  try {
    Get(refs[2]);
    ADD_FAILURE() << "the third item should hold the error";
  } catch (const TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("failed after 2 items"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Get(items.Completed()), TaskError);
  EXPECT_EQ(*Get(actor.Task(&StreamingActor::Calls).Remote(), 30'000), 2);
}

TEST_F(Generators, AnActorsStreamingCallsRunInTheOrderMadeEachToItsEnd) {
  ScopedActor scoped;
  ActorHandle<StreamingActor>& actor = scoped.actor;
  ObjectRefGenerator<int> first = actor.Task(&StreamingActor::Numbered).Remote(3);
  ObjectRef<int> between = actor.Task(&StreamingActor::ItemTotal).Remote();
  ObjectRefGenerator<int> second = actor.Task(&StreamingActor::Numbered).Remote(4);
  ObjectRef<int> after = actor.Task(&StreamingActor::ItemTotal).Remote();
  // Read in the other order: each call still ran after the one before had made all its items.
  EXPECT_EQ(Values(second), (std::vector<int>{100, 101, 102, 103}));
  EXPECT_EQ(*Get(after, 30'000), 7);
  EXPECT_EQ(*Get(between, 30'000), 3);
  EXPECT_EQ(Values(first), (std::vector<int>{0, 1, 2}));
}

TEST_F(Generators, AnActorMethodResentAfterItsProcessDiedResumesWithoutDuplicates) {
  ScopedActor scoped;
  ActorHandle<StreamingActor>& actor = scoped.actor;
  std::string marker = File("died");
  ObjectRefGenerator<int> items = actor.Task(&StreamingActor::DieOnceAfter).Remote(marker, 6, 2);
  EXPECT_EQ(Values(items), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(std::filesystem::exists(marker)) << "the first attempt did not die";
  // The restarted actor is a new instance: the resent call is its first.
  EXPECT_EQ(*Get(actor.Task(&StreamingActor::Calls).Remote(), 30'000), 2);
}

TEST_F(Generators, CancelStopsAHeldBackActorMethodAndTheActorLivesOn) {
  ScopedActor scoped;
  ActorHandle<StreamingActor>& actor = scoped.actor;
  std::string count = File("count"), stopped = File("stopped");
  ObjectRefGenerator<int> items =
      actor.Task(&StreamingActor::Endless).SetGeneratorBackpressure(1).Remote(count, stopped);
  std::optional<ObjectRef<int>> first = items.Next(30'000);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*Get(*first), 0);
  ASSERT_TRUE(WaitUntil([&] { return Count(count) >= 2; }, 30s));
  Cancel(items.Completed());
  EXPECT_TRUE(WaitUntil([&] { return std::filesystem::exists(stopped); }, 30s));
  EXPECT_LE(Count(count), 3);
  bool cancelled = false;
  try {
    for (const ObjectRef<int>& item : items) Get(item);
  } catch (const TaskCancelledError&) {
    cancelled = true;
  }
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(*Get(actor.Task(&StreamingActor::Calls).Remote(), 30'000), 2);
}

}  // namespace
}  // namespace airt
