// The C++ sweep's search space: grids crossed, random leaves within bounds and seeded.
#include <set>

#include <gtest/gtest.h>

#include "airt/exceptions.h"
#include "airt/tune/sweep.h"

namespace airt::tune {
namespace {

TEST(SearchSpace, CrossesGridsNumSamplesTimesWithTheFirstKeyFastest) {
  auto v = SearchSpace().Grid("a", {1, 2}).GridStrings("b", {"x", "y", "z"}).Variants(2, 0);
  ASSERT_EQ(v.size(), 12u);
  EXPECT_EQ(v[0].Number("a"), 1);
  EXPECT_EQ(v[1].Number("a"), 2);
  EXPECT_EQ(v[1].String("b"), "x");
  EXPECT_EQ(v[2].String("b"), "y");
  std::set<std::pair<double, std::string>> seen;
  for (const Config& c : v) seen.insert({c.Number("a"), c.String("b")});
  EXPECT_EQ(seen.size(), 6u);
}

TEST(SearchSpace, DrawsRandomLeavesWithinBoundsAndRepeatsWithTheSeed) {
  SearchSpace space;
  space.Uniform("u", -1, 1).LogUniform("l", 1e-4, 1e-1).RandInt("i", 0, 3).Choice("c", {"p", "q"});
  auto v = space.Variants(200, 42);
  std::set<double> ints;
  for (const Config& c : v) {
    EXPECT_GE(c.Number("u"), -1);
    EXPECT_LE(c.Number("u"), 1);
    EXPECT_GE(c.Number("l"), 1e-4);
    EXPECT_LE(c.Number("l"), 1e-1);
    ints.insert(c.Number("i"));
    EXPECT_TRUE(c.String("c") == "p" || c.String("c") == "q");
  }
  EXPECT_EQ(ints, (std::set<double>{0, 1, 2}));  // upper exclusive
  EXPECT_EQ(space.Variants(3, 42)[2].Number("u"), v[2].Number("u"));
  EXPECT_NE(space.Variants(3, 43)[2].Number("u"), v[2].Number("u"));
}

TEST(SearchSpace, RejectsBadBoundsAndMissingKeys) {
  EXPECT_THROW(SearchSpace().Grid("a", {}), InvalidArgumentError);
  EXPECT_THROW(SearchSpace().Uniform("a", 1, 0), InvalidArgumentError);
  EXPECT_THROW(SearchSpace().LogUniform("a", 0, 1), InvalidArgumentError);
  EXPECT_THROW(SearchSpace().Variants(0, 0), InvalidArgumentError);
  Config c;
  EXPECT_THROW(c.Number("missing"), InvalidArgumentError);
}

}  // namespace
}  // namespace airt::tune
