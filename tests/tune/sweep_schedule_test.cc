// The C++ sweep's scheduling without a cluster (the driver's loop in airt::tune::Run calls the
// Sweep the same way): HyperBand pausing trials and resuming them from their checkpoints, the
// median rule's time-slicing, PBT's exploits, callbacks and CheckpointConfig.num_to_keep.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "airt/exceptions.h"
#include "airt/tune/pbt.h"
#include "airt/tune/sweep.h"
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

std::vector<Config> Variants(int n) {
  std::vector<double> lrs;
  for (int i = 0; i < n; ++i) lrs.push_back(0.1 * (i + 1));
  return SearchSpace().Grid("lr", lrs).Variants(1, 0);
}

TEST(SweepSchedule, HyperBandPausesABracketThenResumesTheBestFromTheirCheckpoints) {
  testing::TempDir dir;
  SweepOptions o = Options(dir.path());
  o.max_iterations = 9;
  HyperBandOptions hb;
  hb.max_t = 9;
  hb.reduction_factor = 3;
  o.scheduler = MakeHyperBandScheduler(hb);
  // Brackets of (3 trials, 9) and (5 trials, 3): trials 3..7 are the second.
  internal::Sweep sweep(Variants(8), o);
  for (size_t i : sweep.Launchable(0)) sweep.Started(i);
  const double loss[] = {5, 1, 4, 2, 3};  // trials 4 and 6 are the best two
  for (size_t k = 0; k < 5; ++k) {
    size_t i = 3 + k;
    ASSERT_TRUE(sweep.Report(i, {{"loss", loss[k]}}));
    ASSERT_TRUE(sweep.Report(i, {{"loss", loss[k]}}));
    bool next = sweep.Report(i, {{"loss", loss[k]}});  // at the milestone, 3
    if (k < 4) {
      EXPECT_FALSE(next);
      EXPECT_EQ(sweep.Status(i), "PAUSED") << i;
      if (i == 4) sweep.Checkpointed(i, "four-after-3");  // as the loop does when pausing
    }
  }
  SweepResult mid = sweep.Finish();
  EXPECT_EQ(mid.trials[4].status, "PENDING");  // resumed: it relaunches from its checkpoint
  EXPECT_EQ(mid.trials[4].results.size(), 3u);
  EXPECT_EQ(mid.trials[4].num_pauses, 1);
  EXPECT_EQ(mid.trials[6].status, "PENDING");  // resumed without a checkpoint: from the start
  EXPECT_EQ(mid.trials[6].results.size(), 0u);
  for (size_t i : {3, 5, 7}) {
    EXPECT_EQ(mid.trials[i].status, "TERMINATED") << i;
    EXPECT_TRUE(mid.trials[i].stopped_early);
  }
  ASSERT_EQ(sweep.Launchable(3), (std::vector<size_t>{6, 4}));  // in the order resumed
  sweep.Started(4);
  EXPECT_EQ(*sweep.CheckpointOf(4), "four-after-3");
  ASSERT_TRUE(sweep.Report(4, {{"loss", 1}}));
  EXPECT_EQ(sweep.Finish().trials[4].results.back().at("training_iteration"), 4);
}

TEST(SweepSchedule, TheMedianRuleYieldsAnUnjudgedTrialToAWaitingOne) {
  testing::TempDir dir;
  SweepOptions o = Options(dir.path());
  o.max_concurrent = 1;
  o.max_iterations = 5;
  MedianStoppingOptions m;
  m.grace_period = 0;
  m.min_samples_required = 1;
  m.min_time_slice = 1;
  o.scheduler = MakeMedianStoppingRule(m);
  internal::Sweep sweep(Variants(2), o);
  ASSERT_EQ(sweep.Launchable(0), std::vector<size_t>{0});
  sweep.Started(0);
  // Trial 1 waits and nobody else reached time 1: trial 0 yields.
  EXPECT_FALSE(sweep.Report(0, {{"loss", 2}}));
  EXPECT_EQ(sweep.Status(0), "PAUSED");
  sweep.Checkpointed(0, "zero-after-1");
  ASSERT_EQ(sweep.Launchable(0), std::vector<size_t>{1});
  sweep.Started(1);
  sweep.Tick();  // nobody waits now: trial 0 is queued again, behind none
  EXPECT_EQ(sweep.Status(0), "PENDING");
  EXPECT_TRUE(sweep.Launchable(1).empty());  // one at a time
  EXPECT_TRUE(sweep.Report(1, {{"loss", 1}}));  // judged against trial 0: better, goes on
}

TEST(SweepSchedule, PbtRestartsTheBottomTrialFromACopyOfTheTopOnesCheckpoint) {
  testing::TempDir dir;
  SweepOptions o = Options(dir.path());
  PbtOptions p;
  p.perturbation_interval = 1;
  p.quantile_fraction = 0.5;
  p.resample_probability = 0;
  p.mutations.number_ranges["lr"] = {0.01, 1};
  auto pbt = std::make_shared<PopulationBasedTraining>(p);
  o.scheduler = pbt;
  internal::Sweep sweep(Variants(2), o);
  for (size_t i : sweep.Launchable(0)) sweep.Started(i);
  ASSERT_TRUE(sweep.Report(0, {{"loss", 1}}));
  sweep.Checkpointed(0, "zero-after-1");
  EXPECT_FALSE(sweep.Report(1, {{"loss", 5}}));  // the bottom half: exploits trial 1
  SweepResult r = sweep.Finish();
  EXPECT_EQ(r.trials[1].status, "PENDING");
  EXPECT_EQ(r.trials[1].num_exploits, 1);
  EXPECT_EQ(r.trials[1].results.size(), 1u);  // its own results are kept
  double lr = r.trials[1].config.Number("lr");  // trial 0's 0.1, perturbed
  EXPECT_TRUE(std::abs(lr - 0.12) < 1e-12 || std::abs(lr - 0.08) < 1e-12) << lr;
  EXPECT_EQ(*sweep.CheckpointOf(1), "zero-after-1");
  EXPECT_TRUE(std::filesystem::exists(r.trials[1].path + "/checkpoint_000001/state.bin"));
  EXPECT_TRUE(std::filesystem::exists(r.trials[1].path + "/pbt_policy.txt"));
  EXPECT_EQ(pbt->num_perturbations(), 1);
  ASSERT_EQ(sweep.Launchable(1), std::vector<size_t>{1});
  sweep.Started(1);
  ASSERT_TRUE(sweep.Report(1, {{"loss", 0.5}}));
  EXPECT_EQ(sweep.Finish().trials[1].results.back().at("training_iteration"), 2);
}

struct Recorder : Callback {
  std::vector<std::string> events;
  void OnTrialStart(const TrialRecord& t) override { events.push_back("start " + t.id); }
  void OnTrialResult(const TrialRecord& t, const Metrics& r) override {
    events.push_back("result " + t.id + " " + std::to_string(int(r.at("training_iteration"))));
  }
  void OnTrialComplete(const TrialRecord& t) override { events.push_back("complete " + t.id); }
  void OnTrialError(const TrialRecord& t) override {
    events.push_back("error " + t.id + " " + t.error);
  }
};

TEST(SweepSchedule, CallbacksSeeStartsResultsEndsAndErrors) {
  testing::TempDir dir;
  SweepOptions o = Options(dir.path());
  o.max_iterations = 2;
  auto recorder = std::make_shared<Recorder>();
  o.callbacks = {recorder};
  internal::Sweep sweep(Variants(2), o);
  for (size_t i : sweep.Launchable(0)) sweep.Started(i);
  ASSERT_TRUE(sweep.Report(0, {{"loss", 1}}));
  EXPECT_FALSE(sweep.Report(0, {{"loss", 1}}));
  EXPECT_FALSE(sweep.Failed(1, "boom"));
  EXPECT_EQ(recorder->events,
            (std::vector<std::string>{"start 00001", "start 00002", "result 00001 1",
                                      "result 00001 2", "complete 00001", "error 00002 boom"}));
}

TEST(SweepSchedule, NumToKeepDeletesAllButTheNewestCheckpoints) {
  testing::TempDir dir;
  SweepOptions o = Options(dir.path());
  o.checkpoint_frequency = 1;
  o.checkpoint_config.num_to_keep = 2;
  internal::Sweep sweep(Variants(1), o);
  sweep.Started(0);
  for (int k = 1; k <= 4; ++k) {
    ASSERT_TRUE(sweep.Report(0, {{"loss", 1.0 / k}}));
    sweep.Checkpointed(0, "state-" + std::to_string(k));
  }
  std::vector<std::string> left;
  const std::string trial = sweep.Finish().trials[0].path;
  for (const auto& e : std::filesystem::directory_iterator(trial)) {
    std::string name = e.path().filename().string();
    if (name.rfind("checkpoint_", 0) == 0) left.push_back(name);
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"checkpoint_000003", "checkpoint_000004"}));
  EXPECT_EQ(*sweep.CheckpointOf(0), "state-4");
  o.checkpoint_config.num_to_keep = 0;
  EXPECT_THROW(internal::Sweep(Variants(1), o), InvalidArgumentError);
}

}  // namespace
}  // namespace airt::tune
