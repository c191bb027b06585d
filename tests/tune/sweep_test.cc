// The C++ sweep's bookkeeping without a cluster (the driver's loop in airt::tune::Run calls it the
// same way): retries of failed trials from their checkpoints, and resuming an interrupted sweep
// from its folder with the scheduler rebuilt from the kept results.
#include "airt/tune/sweep.h"

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "airt/exceptions.h"
#include "tests/testing/test_support.h"

namespace airt::tune {
namespace {

SweepOptions Options(const std::string& storage) {
  SweepOptions o;
  o.name = "exp";
  o.storage_path = storage;
  o.metric = "loss";
  o.verbose = false;
  return o;
}

size_t Lines(const std::string& path) {
  std::ifstream f(path);
  size_t n = 0;
  for (std::string line; std::getline(f, line);) n += !line.empty();
  return n;
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(Sweep, RetriesAFailedTrialFromItsLatestCheckpointThenEndsItInError) {
  testing::TempDir dir;
  SweepOptions o = Options(dir.path());
  o.max_failures = 1;
  o.checkpoint_frequency = 2;
  internal::Sweep sweep(SearchSpace().Grid("lr", {0.1}).Variants(1, 0), o);
  ASSERT_EQ(sweep.Launchable(0), std::vector<size_t>{0});
  sweep.Started(0);
  EXPECT_FALSE(sweep.CheckpointOf(0).has_value());
  ASSERT_TRUE(sweep.Report(0, {{"loss", 3}}));
  EXPECT_FALSE(sweep.WantsCheckpoint(0));
  ASSERT_TRUE(sweep.Report(0, {{"loss", 2}}));
  ASSERT_TRUE(sweep.WantsCheckpoint(0));
  sweep.Checkpointed(0, std::string("after-2\0bytes", 13));
  ASSERT_TRUE(sweep.Report(0, {{"loss", 1}}));

  EXPECT_TRUE(sweep.Failed(0, "step 4 threw"));  // retried: its third result is dropped
  SweepResult mid = sweep.Finish();
  const std::string trial = mid.trials[0].path;
  EXPECT_EQ(mid.trials[0].status, "PENDING");
  EXPECT_EQ(mid.trials[0].results.size(), 2u);
  EXPECT_EQ(Lines(trial + "/result.json"), 2u);
  EXPECT_EQ(Lines(trial + "/progress.csv"), 3u);  // header and two rows
  EXPECT_EQ(*sweep.CheckpointOf(0), std::string("after-2\0bytes", 13));
  ASSERT_EQ(sweep.Launchable(0), std::vector<size_t>{0});
  sweep.Started(0);
  ASSERT_TRUE(sweep.Report(0, {{"loss", 1}}));
  EXPECT_EQ(sweep.Finish().trials[0].results.back().at("training_iteration"), 3);

  EXPECT_FALSE(sweep.Failed(0, "step 4 threw again"));  // max_failures spent
  SweepResult end = sweep.Finish();
  EXPECT_EQ(end.trials[0].status, "ERROR");
  EXPECT_EQ(end.trials[0].error, "step 4 threw again");
  EXPECT_EQ(end.trials[0].num_failures, 2);
  std::string errors = Read(trial + "/error.txt");
  EXPECT_NE(errors.find("Failure #1"), std::string::npos);
  EXPECT_NE(errors.find("Failure #2"), std::string::npos);
  EXPECT_TRUE(sweep.Launchable(0).empty());
}

TEST(Sweep, ResumesAnInterruptedSweepWithItsCheckpointsAndTheSchedulersRungs) {
  testing::TempDir dir;
  auto space = SearchSpace().Grid("lr", {0.1, 0.2});
  auto asha = [] {
    AshaOptions a;
    a.max_t = 4;
    a.grace_period = 1;
    a.reduction_factor = 2;
    return MakeAshaScheduler(a);
  };
  {
    SweepOptions o = Options(dir.path());
    o.max_iterations = 4;
    o.checkpoint_frequency = 1;
    o.scheduler = asha();
    internal::Sweep sweep(space.Variants(1, 0), o);
    ASSERT_EQ(sweep.Launchable(0).size(), 2u);
    sweep.Started(0);
    sweep.Started(1);
    for (double loss : {1.0, 0.5, 0.4}) ASSERT_TRUE(sweep.Report(0, {{"loss", loss}}));
    EXPECT_FALSE(sweep.Report(0, {{"loss", 0.3}}));  // at max_iterations: TERMINATED
    ASSERT_TRUE(sweep.Report(1, {{"loss", 0.9}}));   // better than trial 0 at rung 1
    sweep.Checkpointed(1, "trial-2-after-1");
    ASSERT_TRUE(sweep.Report(1, {{"loss", 0.45}}));  // better than trial 0 at rung 2
    // Interrupted here: trial 2 had two results, a checkpoint after the first.
  }
  SweepOptions o = Options(dir.path());
  o.max_iterations = 4;
  o.resume = true;
  o.scheduler = asha();
  internal::Sweep sweep(space.Variants(1, 0), o);
  SweepResult state = sweep.Finish();
  EXPECT_EQ(state.trials[0].status, "TERMINATED");
  EXPECT_EQ(state.trials[0].results.size(), 4u);
  EXPECT_EQ(state.trials[1].status, "PENDING");
  EXPECT_EQ(state.trials[1].results.size(), 1u);  // the result after the checkpoint dropped
  EXPECT_EQ(Lines(state.trials[1].path + "/result.json"), 1u);
  EXPECT_EQ(*sweep.CheckpointOf(1), "trial-2-after-1");
  ASSERT_EQ(sweep.Launchable(0), std::vector<size_t>{1});
  sweep.Started(1);
  // Rung 2 holds trial 1's 0.5 from before the interruption: trial 2's second result, run
  // again, is 0.8 now, below it, so ASHA stops trial 2 (a scheduler that forgot the rung would
  // let it run alone).
  EXPECT_FALSE(sweep.Report(1, {{"loss", 0.8}}));
  EXPECT_TRUE(sweep.Finish().trials[1].stopped_early);

  SweepOptions other = Options(dir.path());
  other.resume = true;
  EXPECT_THROW(internal::Sweep(SearchSpace().Grid("lr", {0.1, 0.2, 0.3}).Variants(1, 0), other),
               InvalidArgumentError);
  other.max_failures = -2;
  other.resume = false;
  EXPECT_THROW(internal::Sweep(space.Variants(1, 0), other), InvalidArgumentError);
}

}  // namespace
}  // namespace airt::tune
