// Each scheduler driven by scripted reports, checked against the decisions Ray Tune's scheduler
// of the same name takes on the same numbers.
#include "airt/tune/schedulers.h"

#include <string>

#include <gtest/gtest.h>

#include "airt/exceptions.h"

namespace airt::tune {
namespace {

TEST(FifoScheduler, ContinuesEveryTrial) {
  auto fifo = MakeFifoScheduler();
  fifo->OnTrialAdd("a");
  for (int t = 1; t <= 100; ++t) EXPECT_EQ(fifo->OnTrialResult("a", t, -t), Decision::kContinue);
  EXPECT_EQ(fifo->Name(), "FIFOScheduler");
}

AshaOptions Asha(double max_t, double grace, double rf, int brackets = 1) {
  AshaOptions o;
  o.max_t = max_t;
  o.grace_period = grace;
  o.reduction_factor = rf;
  o.brackets = brackets;
  return o;
}

TEST(AshaScheduler, StopsATrialBelowTheRungQuantileWhenItReachesTheRung) {
  auto asha = MakeAshaScheduler(Asha(9, 1, 3));
  for (const char* t : {"a", "b", "c"}) asha->OnTrialAdd(t);
  EXPECT_EQ(asha->OnTrialResult("a", 1, 1.0), Decision::kContinue);  // the rung is empty
  EXPECT_EQ(asha->OnTrialResult("b", 1, 2.0), Decision::kStop);      // worse than a (min mode)
  // Rewards recorded at rung 1: -1, -2; the 2/3 quantile is -1.333: -0.5 is above it.
  EXPECT_EQ(asha->OnTrialResult("c", 1, 0.5), Decision::kContinue);
  // Between rungs a trial goes on whatever it reports.
  EXPECT_EQ(asha->OnTrialResult("a", 2, 100.0), Decision::kContinue);
}

TEST(AshaScheduler, StopsATrialAtMaxT) {
  auto asha = MakeAshaScheduler(Asha(9, 1, 3));
  asha->OnTrialAdd("a");
  EXPECT_EQ(asha->OnTrialResult("a", 8, 1.0), Decision::kContinue);
  EXPECT_EQ(asha->OnTrialResult("a", 9, 1.0), Decision::kStop);
}

TEST(AshaScheduler, LetsTheLastTrialsRunOnWhenStopLastTrialsIsOff) {
  AshaOptions o = Asha(9, 1, 3);
  o.stop_last_trials = false;
  auto asha = MakeAshaScheduler(o);
  asha->OnTrialAdd("a");
  EXPECT_EQ(asha->OnTrialResult("a", 9, 1.0), Decision::kContinue);
  EXPECT_EQ(asha->OnTrialResult("a", 10, 1.0), Decision::kContinue);
}

TEST(AshaScheduler, ComparesHigherIsBetterInMaxMode) {
  AshaOptions o = Asha(9, 1, 3);
  o.mode = Mode::kMax;
  auto asha = MakeAshaScheduler(o);
  asha->OnTrialAdd("a");
  asha->OnTrialAdd("b");
  asha->OnTrialAdd("c");
  EXPECT_EQ(asha->OnTrialResult("a", 1, 0.5), Decision::kContinue);
  EXPECT_EQ(asha->OnTrialResult("b", 1, 0.9), Decision::kContinue);
  EXPECT_EQ(asha->OnTrialResult("c", 1, 0.1), Decision::kStop);
}

TEST(AshaScheduler, JudgesEachRungAgainstTheTrialsThatReachedIt) {
  auto asha = MakeAshaScheduler(Asha(27, 1, 3));
  for (const char* t : {"a", "b", "c"}) asha->OnTrialAdd(t);
  asha->OnTrialResult("a", 1, 5.0);
  asha->OnTrialResult("b", 1, 1.0);
  EXPECT_EQ(asha->OnTrialResult("a", 3, 5.0), Decision::kContinue);  // first at rung 3
  // b is better than a at rung 3; c, worse than a at rung 1 (cutoff over -5, -1), stops there.
  EXPECT_EQ(asha->OnTrialResult("b", 3, 1.0), Decision::kContinue);
  EXPECT_EQ(asha->OnTrialResult("c", 1, 6.0), Decision::kStop);
}

TEST(AshaScheduler, CountsACompletedTrialsLastResultInItsRung) {
  auto asha = MakeAshaScheduler(Asha(9, 1, 3));
  asha->OnTrialAdd("a");
  asha->OnTrialAdd("b");
  asha->OnTrialComplete("a", 1, 1.0);
  EXPECT_EQ(asha->OnTrialResult("b", 1, 2.0), Decision::kStop);
}

TEST(AshaScheduler, ContinuesAReportWithoutTheMetricOrAnUnknownTrial) {
  auto asha = MakeAshaScheduler(Asha(9, 1, 3));
  asha->OnTrialAdd("a");
  EXPECT_EQ(asha->OnTrialResult("a", 9, std::nullopt), Decision::kContinue);
  EXPECT_EQ(asha->OnTrialResult("never-added", 9, 1.0), Decision::kContinue);
}

TEST(AshaScheduler, LaterBracketsSkipTheFirstRung) {
  // One bracket: every trial worse than all before it is stopped at rung 1. Three brackets:
  // trials drawn into brackets 1 and 2 have no rung at 1, so some of them go on.
  auto stopped_at_rung_one = [](int brackets) {
    AshaOptions o = Asha(27, 1, 3, brackets);
    o.seed = 7;
    auto asha = MakeAshaScheduler(o);
    int stopped = 0;
    for (int i = 0; i < 30; ++i) {
      std::string t = "t" + std::to_string(i);
      asha->OnTrialAdd(t);
      if (asha->OnTrialResult(t, 1, i) == Decision::kStop) ++stopped;
    }
    return stopped;
  };
  EXPECT_EQ(stopped_at_rung_one(1), 29);
  int with_three = stopped_at_rung_one(3);
  EXPECT_LT(with_three, 29);
  EXPECT_GT(with_three, 0);
}

TEST(AshaScheduler, RejectsBadOptions) {
  EXPECT_THROW(MakeAshaScheduler(Asha(0, 1, 3)), InvalidArgumentError);
  EXPECT_THROW(MakeAshaScheduler(Asha(9, 10, 3)), InvalidArgumentError);
  EXPECT_THROW(MakeAshaScheduler(Asha(9, 1, 1)), InvalidArgumentError);
  EXPECT_THROW(MakeAshaScheduler(Asha(9, 1, 3, 0)), InvalidArgumentError);
}

HyperBandOptions Hyperband(double max_t, double rf) {
  HyperBandOptions o;
  o.max_t = max_t;
  o.reduction_factor = rf;
  return o;
}

TEST(HyperBandScheduler, RunsTheFirstBracketToMaxTThenStopsItsTrialsTogether) {
  // max_t 9, eta 3: brackets of (3 trials, 9), (5, 3), (9, 1).
  auto hb = MakeHyperBandScheduler(Hyperband(9, 3));
  for (const char* t : {"a", "b", "c"}) hb->OnTrialAdd(t);
  EXPECT_EQ(hb->OnTrialResult("a", 3, 1.0), Decision::kContinue);
  EXPECT_EQ(hb->OnTrialResult("a", 9, 1.0), Decision::kPause);
  EXPECT_EQ(hb->OnTrialResult("b", 9, 2.0), Decision::kPause);
  EXPECT_EQ(hb->OnTrialResult("c", 9, 3.0), Decision::kStop);
  auto actions = hb->TakeActions();
  ASSERT_EQ(actions.size(), 2u);
  for (const Action& a : actions) EXPECT_EQ(a.decision, Decision::kStop);
  EXPECT_TRUE(hb->TakeActions().empty());
}

TEST(HyperBandScheduler, PausesABracketAtItsMilestoneThenResumesTheBestAndStopsTheRest) {
  auto hb = MakeHyperBandScheduler(Hyperband(9, 3));
  for (const char* t : {"x1", "x2", "x3"}) hb->OnTrialAdd(t);  // fills the first bracket
  const char* second[] = {"a", "b", "c", "d", "e"};            // the (5 trials, 3) bracket
  for (const char* t : second) hb->OnTrialAdd(t);
  double metric[] = {5, 1, 4, 2, 3};  // min mode: b and d are the best two
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(hb->OnTrialResult(second[i], 3, metric[i]), Decision::kPause) << second[i];
  }
  EXPECT_EQ(hb->OnTrialResult("e", 3, metric[4]), Decision::kStop);  // e is third: cut
  std::map<std::string, Decision> decided;
  for (const Action& a : hb->TakeActions()) decided[a.trial] = a.decision;
  EXPECT_EQ(decided["a"], Decision::kStop);
  EXPECT_EQ(decided["c"], Decision::kStop);
  EXPECT_EQ(decided["b"], Decision::kContinue);
  EXPECT_EQ(decided["d"], Decision::kContinue);
  // The survivors run to 9, where the bracket ends.
  EXPECT_EQ(hb->OnTrialResult("b", 6, 1.0), Decision::kContinue);
  EXPECT_EQ(hb->OnTrialResult("b", 9, 1.0), Decision::kPause);
  EXPECT_EQ(hb->OnTrialResult("d", 9, 2.0), Decision::kStop);
  auto last = hb->TakeActions();
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].trial, "b");
  EXPECT_EQ(last[0].decision, Decision::kStop);
}

TEST(HyperBandScheduler, ProcessesTheBracketWhenAMemberEnds) {
  auto hb = MakeHyperBandScheduler(Hyperband(9, 3));
  for (const char* t : {"a", "b", "c"}) hb->OnTrialAdd(t);
  EXPECT_EQ(hb->OnTrialResult("a", 9, 1.0), Decision::kPause);
  EXPECT_EQ(hb->OnTrialResult("b", 9, 2.0), Decision::kPause);
  hb->OnTrialRemove("c");  // errored: a and b are the whole bracket now, and done
  auto actions = hb->TakeActions();
  EXPECT_EQ(actions.size(), 2u);
}

TEST(HyperBandScheduler, RejectsBadOptions) {
  EXPECT_THROW(MakeHyperBandScheduler(Hyperband(0.5, 3)), InvalidArgumentError);
  EXPECT_THROW(MakeHyperBandScheduler(Hyperband(9, 1)), InvalidArgumentError);
}

MedianStoppingOptions Median(double grace, int min_samples) {
  MedianStoppingOptions o;
  o.grace_period = grace;
  o.min_samples_required = min_samples;
  return o;
}

TEST(MedianStoppingRule, StopsATrialWhoseBestIsWorseThanTheMedianOfRunningMeans) {
  auto median = MakeMedianStoppingRule(Median(0, 2));
  EXPECT_EQ(median->OnTrialResult("a", 1, 1.0), Decision::kContinue);  // too few others
  EXPECT_EQ(median->OnTrialResult("a", 2, 1.0), Decision::kContinue);
  EXPECT_EQ(median->OnTrialResult("b", 1, 2.0), Decision::kContinue);  // one other only
  EXPECT_EQ(median->OnTrialResult("b", 2, 2.0), Decision::kContinue);
  // Others at time 1: means -1, -2, median -1.5; c's best, -5, is below.
  EXPECT_EQ(median->OnTrialResult("c", 1, 5.0), Decision::kStop);
  EXPECT_EQ(median->OnTrialResult("c", 2, 0.0), Decision::kStop);  // stays stopped
  // Others at time 1: a, b, c (means -1, -2, -5): median -2; d's -0.5 is above.
  EXPECT_EQ(median->OnTrialResult("d", 1, 0.5), Decision::kContinue);
}

TEST(MedianStoppingRule, ContinuesWithinTheGracePeriod) {
  auto median = MakeMedianStoppingRule(Median(10, 1));
  median->OnTrialResult("a", 1, 1.0);
  EXPECT_EQ(median->OnTrialResult("b", 1, 100.0), Decision::kContinue);
  median->OnTrialResult("a", 10, 1.0);
  EXPECT_EQ(median->OnTrialResult("b", 10, 100.0), Decision::kStop);
}

TEST(MedianStoppingRule, AnUnjudgedTrialYieldsToWaitingTrialsAfterMinTimeSlice) {
  MedianStoppingOptions o = Median(0, 2);
  o.min_time_slice = 2;
  auto median = MakeMedianStoppingRule(o);
  // Nothing waits: a trial that cannot be judged goes on (Ray's "Continuing anyways").
  EXPECT_EQ(median->OnTrialResult("a", 1, 1.0), Decision::kContinue);
  median->SetWaiting(1);
  // Something waits and a has never yielded: it yields at once (Ray's last pause is -inf).
  EXPECT_EQ(median->OnTrialResult("a", 2, 1.0), Decision::kPause);
  EXPECT_TRUE(median->TakeActions().empty());  // still waiting: a stays paused
  median->SetWaiting(0);
  auto resumed = median->TakeActions();
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0].trial, "a");
  EXPECT_EQ(resumed[0].decision, Decision::kContinue);
  EXPECT_TRUE(median->TakeActions().empty());
  median->SetWaiting(3);
  // It yielded at time 2: it runs on until more than min_time_slice (2) later.
  EXPECT_EQ(median->OnTrialResult("a", 3, 1.0), Decision::kContinue);
  EXPECT_EQ(median->OnTrialResult("a", 4, 1.0), Decision::kContinue);
  EXPECT_EQ(median->OnTrialResult("a", 5, 1.0), Decision::kPause);
  // b and c cannot be judged either (too few others at time 6): they yield too.
  EXPECT_EQ(median->OnTrialResult("b", 6, 2.0), Decision::kPause);
  EXPECT_EQ(median->OnTrialResult("c", 6, 1.0), Decision::kPause);
  // With b and c at time 6, a is judged, not time-sliced: its best (-1) is above the median of
  // their means (-2, -1), so it goes on.
  EXPECT_EQ(median->OnTrialResult("a", 6, 1.0), Decision::kContinue);
  median->OnTrialComplete("a", 6, 1.0);  // a yielded trial that ends is not resumed
  median->SetWaiting(0);
  auto last = median->TakeActions();  // the others, in the order they yielded
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0].trial, "b");
  EXPECT_EQ(last[1].trial, "c");
}

TEST(MedianStoppingRule, NeverYieldsWithinTheGracePeriod) {
  MedianStoppingOptions o = Median(5, 3);
  auto median = MakeMedianStoppingRule(o);
  median->SetWaiting(4);
  EXPECT_EQ(median->OnTrialResult("a", 4, 1.0), Decision::kContinue);
  EXPECT_EQ(median->OnTrialResult("a", 5, 1.0), Decision::kPause);
}

TEST(MedianStoppingRule, RejectsBadOptions) {
  EXPECT_THROW(MakeMedianStoppingRule(Median(-1, 3)), InvalidArgumentError);
  EXPECT_THROW(MakeMedianStoppingRule(Median(0, 0)), InvalidArgumentError);
  MedianStoppingOptions o = Median(0, 1);
  o.min_time_slice = -1;
  EXPECT_THROW(MakeMedianStoppingRule(o), InvalidArgumentError);
}

}  // namespace
}  // namespace airt::tune
