// The C++ PopulationBasedTraining's decisions on scripted reports: who exploits whom, when,
// and how explore changes the donor's config.
#include "airt/tune/pbt.h"

#include <set>

#include <gtest/gtest.h>

#include "airt/exceptions.h"

namespace airt::tune {
namespace {

PbtOptions Options() {
  PbtOptions o;
  o.mode = Mode::kMax;
  o.perturbation_interval = 2;
  o.quantile_fraction = 0.25;
  o.resample_probability = 0;
  o.mutations.number_ranges["lr"] = {0.1, 1.0};
  o.mutations.number_choices["bs"] = {16, 32, 64};
  o.seed = 3;
  return o;
}

Config Lr(double lr) {
  Config c;
  c.numbers = {{"lr", lr}, {"bs", 32}};
  return c;
}

TEST(PopulationBasedTraining, TheBottomTrialExploitsTheTopOneAtItsInterval) {
  PopulationBasedTraining pbt(Options());
  const char* names[] = {"t0", "t1", "t2", "t3"};
  for (int i = 0; i < 4; ++i) {
    pbt.OnTrialAdd(names[i]);
    pbt.SetConfig(names[i], Lr(0.1 * (i + 1)));
    pbt.SetCheckpointed(names[i]);
  }
  // Before the interval nobody is perturbed.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(pbt.OnTrialResult(names[i], 1, i), Decision::kContinue);
  EXPECT_TRUE(pbt.TakeExploits().empty());
  // At time 2: t3 (score 3) is the top quarter, t0 (0) the bottom one.
  for (int i = 1; i < 4; ++i) pbt.OnTrialResult(names[i], 2, i);
  EXPECT_TRUE(pbt.TakeExploits().empty());  // they are not in the bottom quarter
  EXPECT_EQ(pbt.OnTrialResult("t0", 2, 0), Decision::kContinue);
  auto exploits = pbt.TakeExploits();
  ASSERT_EQ(exploits.size(), 1u);
  EXPECT_EQ(exploits[0].trial, "t0");
  EXPECT_EQ(exploits[0].donor, "t3");
  double lr = exploits[0].config.Number("lr");  // t3's 0.4, times 1.2 or 0.8
  EXPECT_TRUE(std::abs(lr - 0.48) < 1e-12 || std::abs(lr - 0.32) < 1e-12) << lr;
  double bs = exploits[0].config.Number("bs");  // a neighbour of 32 in the list
  EXPECT_TRUE(bs == 16 || bs == 64) << bs;
  EXPECT_EQ(pbt.num_perturbations(), 1);
  // t0's next interval is 2 later: at 3 it is not perturbed again.
  pbt.OnTrialResult("t0", 3, 0);
  EXPECT_TRUE(pbt.TakeExploits().empty());
}

TEST(PopulationBasedTraining, OnlyATopTrialWithACheckpointIsADonorAndBurnInWaits) {
  PbtOptions o = Options();
  o.burn_in_period = 4;
  PopulationBasedTraining pbt(o);
  for (const char* t : {"a", "b"}) {
    pbt.OnTrialAdd(t);
    pbt.SetConfig(t, Lr(0.5));
  }
  pbt.OnTrialResult("b", 4, 10);
  pbt.OnTrialResult("a", 2, 1);  // within the burn-in
  pbt.OnTrialResult("a", 4, 1);  // b has no checkpoint: no donor
  EXPECT_TRUE(pbt.TakeExploits().empty());
  pbt.SetCheckpointed("b");
  pbt.OnTrialResult("a", 6, 1);
  auto exploits = pbt.TakeExploits();
  ASSERT_EQ(exploits.size(), 1u);
  EXPECT_EQ(exploits[0].donor, "b");
  pbt.OnTrialComplete("b", 6, 10);  // an ended trial is no donor
  pbt.OnTrialResult("a", 8, 1);
  EXPECT_TRUE(pbt.TakeExploits().empty());
}

TEST(PopulationBasedTraining, ExploreResamplesWithItsProbabilityAndSetsMissingKeys) {
  PbtOptions o = Options();
  o.resample_probability = 1;
  o.mutations.string_choices["opt"] = {"sgd", "adam"};
  PopulationBasedTraining pbt(o);
  std::set<double> bs;
  for (int k = 0; k < 50; ++k) {
    Config c = pbt.Explore(Lr(0.5));
    EXPECT_GE(c.Number("lr"), 0.1);
    EXPECT_LT(c.Number("lr"), 1.0);
    EXPECT_TRUE(c.String("opt") == "sgd" || c.String("opt") == "adam");
    bs.insert(c.Number("bs"));
  }
  EXPECT_EQ(bs, (std::set<double>{16, 32, 64}));  // redrawn from the whole list
}

TEST(PopulationBasedTraining, RejectsBadOptions) {
  PbtOptions o = Options();
  o.mutations = {};
  EXPECT_THROW(PopulationBasedTraining{o}, InvalidArgumentError);
  o = Options();
  o.quantile_fraction = 0.6;
  EXPECT_THROW(PopulationBasedTraining{o}, InvalidArgumentError);
  o = Options();
  o.perturbation_interval = 0;
  EXPECT_THROW(PopulationBasedTraining{o}, InvalidArgumentError);
  o = Options();
  o.mutations.number_choices["bs"] = {};
  EXPECT_THROW(PopulationBasedTraining{o}, InvalidArgumentError);
}

}  // namespace
}  // namespace airt::tune
