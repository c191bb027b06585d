// GPU id assignment: internal::GpuIdPool directly, and through NodeResources.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/scheduling/scheduling_test_util.h"
#include "worker/scheduling/internal/gpu_id_pool.h"
#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling {
namespace {

using internal::GpuIdPool;
using testing::Set;
using testing::Shape;

Amount Gpu(double g) { return Amount::Units(std::llround(g * Amount::kUnitsPerWhole)); }

std::vector<GpuId> Take(GpuIdPool& pool, double g) {
  Result<std::vector<GpuId>> ids = pool.Assign(Gpu(g));
  EXPECT_TRUE(ids.ok()) << "GPU " << g << ": " << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<GpuId>{};
}

TEST(GpuIds, WholeRequestGetsLowestFreeIds) {
  GpuIdPool pool({3, 1, 0, 2});
  EXPECT_EQ(Take(pool, 2), (std::vector<GpuId>{0, 1}));
  EXPECT_EQ(Take(pool, 1), (std::vector<GpuId>{2}));
  EXPECT_EQ(Take(pool, 1), (std::vector<GpuId>{3}));
  Result<std::vector<GpuId>> none = pool.Assign(Gpu(1));
  EXPECT_EQ(none.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(pool.Available(), Amount());
}

TEST(GpuIds, FractionalRequestsShareOneIdUpToOne) {
  GpuIdPool pool({0, 1});
  EXPECT_EQ(Take(pool, 0.5), (std::vector<GpuId>{0}));
  EXPECT_EQ(Take(pool, 0.5), (std::vector<GpuId>{0}));  // 0.5 + 0.5 = 1 on id 0
  EXPECT_EQ(Take(pool, 0.5), (std::vector<GpuId>{1}));
  EXPECT_EQ(Take(pool, 0.3), (std::vector<GpuId>{1}));
  EXPECT_EQ(Take(pool, 0.2), (std::vector<GpuId>{1}));
  EXPECT_FALSE(pool.CanAssign(Gpu(0.0001)));
}

TEST(GpuIds, FractionalNeverSharesAWholeAssignedId) {
  GpuIdPool pool({0, 1});
  EXPECT_EQ(Take(pool, 1), (std::vector<GpuId>{0}));
  EXPECT_EQ(Take(pool, 0.25), (std::vector<GpuId>{1}));
  EXPECT_EQ(Take(pool, 0.75), (std::vector<GpuId>{1}));
  // Id 0 is held whole: no share of it is left, and none is handed out.
  EXPECT_EQ(pool.Assign(Gpu(0.1)).status().code(), Code::kResourceExhausted);
  ASSERT_TRUE(pool.Release({1}, Gpu(0.25)).ok());
  EXPECT_EQ(Take(pool, 0.1), (std::vector<GpuId>{1}));
}

TEST(GpuIds, WholeNeverTakesAPartlySharedId) {
  GpuIdPool pool({0, 1});
  EXPECT_EQ(Take(pool, 0.1), (std::vector<GpuId>{0}));
  EXPECT_EQ(Take(pool, 1), (std::vector<GpuId>{1}));
  EXPECT_FALSE(pool.CanAssign(Gpu(1)));  // 0.9 of id 0 is free, but not a whole id
  EXPECT_EQ(pool.Available(), Gpu(0.9));
}

TEST(GpuIds, FractionalPacksOntoTheFullestIdItFits) {
  GpuIdPool pool({0, 1, 2});
  EXPECT_EQ(Take(pool, 0.6), (std::vector<GpuId>{0}));
  EXPECT_EQ(Take(pool, 0.6), (std::vector<GpuId>{1}));
  EXPECT_EQ(Take(pool, 0.3), (std::vector<GpuId>{0}));  // 0.9 on id 0, id 2 stays whole-free
  EXPECT_EQ(Take(pool, 0.2), (std::vector<GpuId>{1}));
  EXPECT_EQ(Take(pool, 1), (std::vector<GpuId>{2}));
}

TEST(GpuIds, ReleaseReturnsSharesExactly) {
  GpuIdPool pool({0});
  for (double g : {0.3, 0.3, 0.4}) EXPECT_EQ(Take(pool, g), (std::vector<GpuId>{0}));
  EXPECT_EQ(pool.Available(), Amount());
  for (double g : {0.3, 0.4, 0.3}) ASSERT_TRUE(pool.Release({0}, Gpu(g)).ok());
  EXPECT_EQ(pool.Available(), Amount::Whole(1));
  EXPECT_EQ(Take(pool, 1), (std::vector<GpuId>{0}));  // exactly free again, not 0.9999
}

TEST(GpuIds, ReleaseOfWhatIsNotHeldIsRejectedWithoutChange) {
  GpuIdPool pool({0, 1});
  std::vector<GpuId> whole = Take(pool, 1);
  std::vector<GpuId> half = Take(pool, 0.5);
  EXPECT_EQ(pool.Release(whole, Gpu(0.5)).code(), Code::kInvalidArgument);  // held whole
  EXPECT_EQ(pool.Release(half, Gpu(1)).code(), Code::kInvalidArgument);     // held as a share
  EXPECT_EQ(pool.Release(half, Gpu(0.75)).code(), Code::kInvalidArgument);  // more than held
  EXPECT_EQ(pool.Release({7}, Gpu(1)).code(), Code::kInvalidArgument);
  EXPECT_EQ(pool.Release({0, 1}, Gpu(1)).code(), Code::kInvalidArgument);
  EXPECT_EQ(pool.Available(), Gpu(0.5));
  ASSERT_TRUE(pool.Release(whole, Gpu(1)).ok());
  EXPECT_EQ(pool.Release(whole, Gpu(1)).code(), Code::kInvalidArgument);  // twice
  EXPECT_EQ(pool.Available(), Gpu(1.5));
}

TEST(GpuIds, QuarantinedIdIsNeverAssigned) {
  GpuIdPool pool({0, 1, 2});
  ASSERT_TRUE(pool.Quarantine(0).ok());
  EXPECT_EQ(pool.Schedulable(), Amount::Whole(2));
  EXPECT_EQ(pool.Available(), Amount::Whole(2));
  EXPECT_EQ(Take(pool, 0.5), (std::vector<GpuId>{1}));
  EXPECT_EQ(Take(pool, 1), (std::vector<GpuId>{2}));
  EXPECT_FALSE(pool.CanAssign(Gpu(1)));
  EXPECT_EQ(pool.Quarantine(9).code(), Code::kNotFound);
}

TEST(GpuIds, QuarantineOfHeldIdKeepsShareUntilReleaseThenRestoreReturnsIt) {
  GpuIdPool pool({0, 1});
  std::vector<GpuId> held = Take(pool, 0.5);
  ASSERT_EQ(held, (std::vector<GpuId>{0}));
  ASSERT_TRUE(pool.Quarantine(0).ok());
  EXPECT_EQ(Take(pool, 0.5), (std::vector<GpuId>{1}));  // not onto the quarantined id
  ASSERT_TRUE(pool.Release(held, Gpu(0.5)).ok());
  EXPECT_EQ(pool.Available(), Gpu(0.5));  // id 0 is free but not schedulable
  ASSERT_TRUE(pool.Restore(0).ok());
  EXPECT_EQ(pool.Available(), Gpu(1.5));
  EXPECT_EQ(Take(pool, 1), (std::vector<GpuId>{0}));
}

TEST(GpuIds, CudaVisibleDevicesListsTheAssignedIds) {
  Result<NodeResources> node = NodeResources::Create(Set("CPU: 8"), {7, 2, 3});
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->Total(), Set("CPU: 8, GPU: 3"));
  Result<Allocation> two = node->Acquire(Shape("GPU: 2"));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->CudaVisibleDevices(), "2,3");
  Result<Allocation> half = node->Acquire(Shape("GPU: 0.5"));
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->CudaVisibleDevices(), "7");
  Result<Allocation> cpu = node->Acquire(Shape("CPU: 1"));
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->CudaVisibleDevices(), "");
}

// A model of the rules, written plainly: per id, the list of holders.
struct ModelId {
  bool quarantined = false;
  std::vector<std::pair<int, int64_t>> holders;  // (lease, units); units 10000 marks whole
  bool whole = false;
  int64_t Used() const {
    int64_t used = 0;
    for (const auto& h : holders) used += h.second;
    return used;
  }
};

TEST(GpuIds, NoDoubleBookingUnderRandomWorkloads) {
  const std::vector<int64_t> requests = {1000, 2500, 3000,  3333,  5000,
                                         7000, 9999, 10000, 20000, 30000};
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    std::vector<GpuId> ids = {0, 1, 2, 3, 4, 5};
    GpuIdPool pool(ids);
    std::map<GpuId, ModelId> model;
    for (GpuId id : ids) model[id];
    struct Lease {
      int id;
      Amount gpu;
      std::vector<GpuId> ids;
    };
    std::vector<Lease> leases;
    int next_lease = 0;
    for (int step = 0; step < 2000; ++step) {
      int op = rng() % 10;
      if (op < 5) {
        int64_t units = requests[rng() % requests.size()];
        Amount gpu = Amount::Units(units);
        bool fractional = units < 10000;
        // The model's answer to "can it be had now".
        bool model_fits;
        if (fractional) {
          model_fits = std::any_of(model.begin(), model.end(), [&](const auto& m) {
            return !m.second.quarantined && !m.second.whole && m.second.Used() + units <= 10000;
          });
        } else {
          int64_t free = std::count_if(model.begin(), model.end(), [](const auto& m) {
            return !m.second.quarantined && m.second.holders.empty();
          });
          model_fits = free >= units / 10000;
        }
        ASSERT_EQ(pool.CanAssign(gpu), model_fits) << "seed " << seed << " step " << step;
        Result<std::vector<GpuId>> got = pool.Assign(gpu);
        ASSERT_EQ(got.ok(), model_fits) << "seed " << seed << " step " << step;
        if (!got.ok()) {
          EXPECT_EQ(got.status().code(), Code::kResourceExhausted);
          continue;
        }
        ASSERT_EQ(got->size(), fractional ? 1u : static_cast<size_t>(units / 10000));
        EXPECT_TRUE(std::is_sorted(got->begin(), got->end()));
        EXPECT_EQ(std::set<GpuId>(got->begin(), got->end()).size(), got->size());
        for (GpuId id : *got) {
          ModelId& m = model.at(id);
          ASSERT_FALSE(m.quarantined) << "assigned quarantined id " << id;
          ASSERT_FALSE(m.whole) << "id " << id << " is already held whole";
          if (!fractional) {
            ASSERT_TRUE(m.holders.empty()) << "whole onto shared id " << id;
          }
          m.holders.emplace_back(next_lease, fractional ? units : 10000);
          m.whole = !fractional;
          ASSERT_LE(m.Used(), 10000) << "id " << id << " over-booked";
        }
        leases.push_back(Lease{next_lease++, gpu, *got});
      } else if (op < 9 && !leases.empty()) {
        size_t i = rng() % leases.size();
        Lease lease = leases[i];
        leases.erase(leases.begin() + i);
        ASSERT_TRUE(pool.Release(lease.ids, lease.gpu).ok());
        if (lease.gpu >= Amount::Whole(1)) {  // a whole id cannot be given back twice
          ASSERT_EQ(pool.Release(lease.ids, lease.gpu).code(), Code::kInvalidArgument);
        }
        for (GpuId id : lease.ids) {
          ModelId& m = model.at(id);
          auto it = std::find_if(m.holders.begin(), m.holders.end(),
                                 [&](const auto& h) { return h.first == lease.id; });
          ASSERT_NE(it, m.holders.end());
          m.holders.erase(it);
          if (m.holders.empty()) m.whole = false;
        }
      } else {
        GpuId id = ids[rng() % ids.size()];
        bool quarantine = rng() % 2 == 0;
        ASSERT_TRUE((quarantine ? pool.Quarantine(id) : pool.Restore(id)).ok());
        model.at(id).quarantined = quarantine;
      }
      // The pool's view of every id agrees with the model.
      for (const auto& s : pool.ids()) {
        const ModelId& m = model.at(s.id);
        ASSERT_EQ(s.used.units(), m.Used())
            << "seed " << seed << " step " << step << " id " << s.id;
        ASSERT_EQ(s.whole, m.whole);
        ASSERT_EQ(s.quarantined, m.quarantined);
        ASSERT_LE(s.used, Amount::Whole(1));
        if (m.whole) {
          ASSERT_EQ(m.holders.size(), 1u) << "a whole id shared, id " << s.id;
        }
      }
    }
    for (const auto& lease : leases) ASSERT_TRUE(pool.Release(lease.ids, lease.gpu).ok());
    for (GpuId id : ids) ASSERT_TRUE(pool.Restore(id).ok());
    EXPECT_EQ(pool.Available(), Amount::Whole(6));
  }
}

}  // namespace
}  // namespace airt::worker::scheduling
