#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/scheduling/scheduling_test_util.h"
#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling {
namespace {

using testing::Set;
using testing::Shape;

// The kInvalidArgument message of FromDoubles(amounts); "" when it is valid.
std::string Why(const std::map<std::string, double>& amounts) {
  Result<ResourceSet> set = ResourceSet::FromDoubles(amounts);
  if (set.ok()) return "";
  EXPECT_EQ(set.status().code(), Code::kInvalidArgument);
  return set.status().message();
}

TEST(Amount, AddsTenthsExactly) {
  ResourceSet sum;
  for (int i = 0; i < 10; ++i) sum.Add(Set("CPU: 0.1"));
  EXPECT_EQ(sum, Set("CPU: 1"));
  ResourceSet tenth_and_fifth = Set("CPU: 0.1");
  tenth_and_fifth.Add(Set("CPU: 0.2"));
  EXPECT_EQ(tenth_and_fifth, Set("CPU: 0.3"));
  EXPECT_EQ(tenth_and_fifth.Get("CPU"), Amount::Units(3000));
}

TEST(Amount, PrintsWithoutTrailingZeros) {
  EXPECT_EQ(Amount::Whole(3).ToString(), "3");
  EXPECT_EQ(Amount::Units(5000).ToString(), "0.5");
  EXPECT_EQ(Amount::Units(12500).ToString(), "1.25");
  EXPECT_EQ(Amount::Units(1).ToString(), "0.0001");
  EXPECT_EQ(Amount::Units(-5000).ToString(), "-0.5");
  EXPECT_EQ(Amount().ToString(), "0");
}

TEST(Amount, SaturatesInsteadOfOverflowing) {
  Amount max = Amount::Units(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(max + Amount::Whole(1), max);
}

TEST(ResourceSet, ToStringListsCpuGpuMemoryThenOtherNamesInOrder) {
  Result<ResourceSet> set = ResourceSet::FromDoubles(
      {{"zeta", 1}, {"memory", 1073741824}, {"GPU", 0.5}, {"CPU", 1}, {"alpha", 2}});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->ToString(), "{CPU: 1, GPU: 0.5, memory: 1073741824, alpha: 2, zeta: 1}");
  EXPECT_EQ(ResourceSet().ToString(), "{}");
}

TEST(ResourceSet, RejectsNegativeAmountNamingResourceAndSet) {
  EXPECT_EQ(Why({{"CPU", -1}, {"GPU", 1}}),
            "invalid resources {CPU: -1, GPU: 1}: CPU is -1, amounts must not be negative");
}

TEST(ResourceSet, RejectsNanAndInfinity) {
  std::string nan = Why({{"CPU", std::nan("")}});
  EXPECT_NE(nan.find("CPU is nan"), std::string::npos) << nan;
  EXPECT_NE(nan.find("finite"), std::string::npos) << nan;
  std::string inf = Why({{"custom", std::numeric_limits<double>::infinity()}});
  EXPECT_NE(inf.find("custom is inf"), std::string::npos) << inf;
}

TEST(ResourceSet, RejectsEmptyAndMalformedNames) {
  EXPECT_NE(Why({{"", 1}}).find("a resource name is empty"), std::string::npos);
  EXPECT_NE(Why({{"my res", 1}}).find("'my res'"), std::string::npos);
  EXPECT_NE(Why({{"a,b", 1}}).find("'a,b'"), std::string::npos);
  EXPECT_NE(Why({{"tab\t", 1}}).find("control character"), std::string::npos);
  EXPECT_NE(Why({{std::string(300, 'x'), 1}}).find("longer than 256"), std::string::npos);
  EXPECT_NE(Why({{"accelerator_type", 1}}).find("node label"), std::string::npos);
  EXPECT_EQ(Why({{"node:10.0.0.1", 0.01}}), "");  // Ray's node resources hold ':'
}

TEST(ResourceSet, RejectsFractionalGpuAboveOne) {
  EXPECT_EQ(Why({{"GPU", 1.5}}),
            "invalid resources {GPU: 1.5}: GPU is 1.5, a GPU amount above 1 must be a whole "
            "number (0.5 and 2 are fine)");
  EXPECT_EQ(Why({{"GPU", 0.5}}), "");
  EXPECT_EQ(Why({{"GPU", 1}}), "");
  EXPECT_EQ(Why({{"GPU", 2}}), "");
  EXPECT_EQ(Why({{"CPU", 1.5}}), "");  // only GPUs are whole ids
}

TEST(ResourceSet, RejectsFractionalMemoryBytes) {
  EXPECT_NE(Why({{"memory", 1.5}}).find("memory is a whole number of bytes"), std::string::npos);
  EXPECT_EQ(Why({{"memory", 1099511627776.0 * 64}}), "");  // 64 TiB
}

TEST(ResourceSet, RejectsAmountsBelowSmallestUnitOrAboveLargest) {
  EXPECT_NE(Why({{"CPU", 0.00001}}).find("below the smallest amount 0.0001"), std::string::npos);
  EXPECT_NE(Why({{"memory", 1e15}}).find("above the largest amount"), std::string::npos);
  EXPECT_EQ(Why({{"CPU", 0.0001}}), "");
}

TEST(ResourceSet, DropsZeroAmounts) {
  Result<ResourceSet> set = ResourceSet::FromDoubles({{"CPU", 1}, {"GPU", 0}});
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->ToString(), "{CPU: 1}");
  EXPECT_EQ(*set, Set("CPU: 1"));
}

TEST(ResourceSet, ParseRoundTripsToString) {
  for (std::string text :
       {"{}", "{CPU: 1}", "{CPU: 0.25, GPU: 2, memory: 1024, node:1.2.3.4: 0.01}",
        "{GPU: 0.0001, a: 3.5, b: 100000}"}) {
    EXPECT_EQ(Set(text).ToString(), text);
  }
  EXPECT_EQ(Set("CPU: 1,GPU:0.5").ToString(), "{CPU: 1, GPU: 0.5}");
  EXPECT_EQ(Set("").ToString(), "{}");
}

TEST(ResourceSet, ParseRejectsMalformedTextNamingIt) {
  struct Case {
    std::string text, why;
  };
  for (const Case& c : std::vector<Case>{{"{CPU: 1", "unbalanced braces"},
                                         {"CPU 1", "entry 'CPU 1' is not 'name: amount'"},
                                         {"CPU: one", "the amount of CPU is not a number: 'one'"},
                                         {"CPU: 1, CPU: 2", "CPU is named twice"},
                                         {"CPU: 1,", "entry '' is not 'name: amount'"},
                                         {"GPU: 1.5", "GPU is 1.5"},
                                         {"accelerator_type: A10", "a node label"}}) {
    Result<ResourceSet> set = ResourceSet::Parse(c.text);
    ASSERT_FALSE(set.ok()) << c.text;
    EXPECT_EQ(set.status().code(), Code::kInvalidArgument);
    EXPECT_NE(set.status().message().find(c.why), std::string::npos) << set.status().message();
  }
}

TEST(ResourceSet, FitsInComparesEveryAmount) {
  ResourceSet capacity = Set("CPU: 4, GPU: 1, custom: 2");
  EXPECT_TRUE(Set("CPU: 4, GPU: 1").FitsIn(capacity));
  EXPECT_TRUE(Set("{}").FitsIn(capacity));
  EXPECT_FALSE(Set("CPU: 4.0001").FitsIn(capacity));
  EXPECT_FALSE(Set("other: 1").FitsIn(capacity));
}

TEST(ResourceSet, SubtractFailsWithoutChangeWhenShort) {
  ResourceSet have = Set("CPU: 1, GPU: 1");
  Status s = have.Subtract(Set("CPU: 0.5, GPU: 2"));
  EXPECT_EQ(s.code(), Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "cannot take {CPU: 0.5, GPU: 2} from {CPU: 1, GPU: 1}: GPU is short by 1");
  EXPECT_EQ(have, Set("CPU: 1, GPU: 1"));
  ASSERT_TRUE(have.Subtract(Set("CPU: 1")).ok());
  EXPECT_EQ(have.ToString(), "{GPU: 1}");  // zero amounts disappear
}

TEST(ResourceSet, RandomAddAndSubtractReturnExactlyToStart) {
  std::mt19937 rng(7);
  const std::vector<std::string> names = {"CPU", "GPU", "memory", "custom"};
  std::uniform_int_distribution<int64_t> units(0, 50'000);
  for (int round = 0; round < 200; ++round) {
    ResourceSet total = Set("CPU: 64, GPU: 8, memory: 1000000, custom: 10");
    ResourceSet available = total;
    std::vector<ResourceSet> taken;
    for (int step = 0; step < 50; ++step) {
      if (taken.empty() || rng() % 3 != 0) {
        std::map<std::string, double> amounts;
        for (const auto& name : names) {
          double v = static_cast<double>(units(rng)) / Amount::kUnitsPerWhole;
          if (name == "memory") v = std::floor(v * 1000);
          if (name == "GPU" && v > 1) v = std::floor(v);
          amounts[name] = v;
        }
        Result<ResourceSet> request = ResourceSet::FromDoubles(amounts);
        ASSERT_TRUE(request.ok()) << request.status().ToString();
        ResourceSet before = available;
        if (available.Subtract(*request).ok()) {
          taken.push_back(*request);
        } else {
          EXPECT_FALSE(request->FitsIn(before));
          EXPECT_EQ(available, before);
        }
      } else {
        size_t i = rng() % taken.size();
        available.Add(taken[i]);
        taken.erase(taken.begin() + i);
      }
      EXPECT_TRUE(available.FitsIn(total)) << available.ToString();
    }
    for (const ResourceSet& t : taken) available.Add(t);
    EXPECT_EQ(available, total);
  }
}

TEST(ResourceShape, ParseReadsAcceleratorTypeAndPrintsIt) {
  ResourceShape shape = Shape("{GPU: 1, accelerator_type: A10, CPU: 2}");
  EXPECT_EQ(shape.accelerator_type(), "A10");
  EXPECT_EQ(shape.amounts(), Set("CPU: 2, GPU: 1"));
  EXPECT_EQ(shape.ToString(), "{CPU: 2, GPU: 1, accelerator_type: A10}");
  EXPECT_EQ(Shape("accelerator_type: H100").ToString(), "{accelerator_type: H100}");
  EXPECT_EQ(Shape(shape.ToString()), shape);
}

TEST(ResourceShape, RejectsBadAcceleratorTypeNamingShape) {
  Result<ResourceShape> shape = ResourceShape::FromDoubles({{"GPU", 1}}, "A 10");
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(shape.status().message(),
            "invalid resource shape {GPU: 1, accelerator_type: A 10}: accelerator_type may hold "
            "only letters, digits and '-_.:'");
  EXPECT_FALSE(ResourceShape::Parse("GPU: 1, accelerator_type: ").ok());
}

TEST(ResourceShape, MakeRechecksGpuRuleOnSetsBuiltByArithmetic) {
  ResourceSet sum = Set("GPU: 1");
  sum.Add(Set("GPU: 0.5"));
  Result<ResourceShape> shape = ResourceShape::Make(sum);
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().code(), Code::kInvalidArgument);
  EXPECT_NE(shape.status().message().find("{GPU: 1.5}"), std::string::npos);
}

}  // namespace
}  // namespace airt::worker::scheduling
