#include "worker/scheduling/internal/gpu_id_pool.h"

#include <algorithm>
#include <string>

namespace airt::worker::scheduling::internal {
namespace {

const Amount kOne = Amount::Whole(1);

bool IsFractional(Amount gpu) { return gpu > Amount() && gpu < kOne; }

std::string IdList(const std::vector<GpuId>& ids) {
  std::string out;
  for (GpuId id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

}  // namespace

GpuIdPool::GpuIdPool(std::vector<GpuId> ids) {
  std::sort(ids.begin(), ids.end());
  for (GpuId id : ids) {
    IdState state;
    state.id = id;
    ids_.push_back(state);
  }
}

bool GpuIdPool::CanAssign(Amount gpu) const {
  if (gpu.IsZero()) return true;
  if (IsFractional(gpu)) {
    return std::any_of(ids_.begin(), ids_.end(), [&](const IdState& s) {
      return !s.quarantined && !s.whole && s.used + gpu <= kOne;
    });
  }
  int64_t free = std::count_if(ids_.begin(), ids_.end(), [](const IdState& s) {
    return !s.quarantined && !s.whole && s.used.IsZero();
  });
  return Amount::Whole(free) >= gpu;
}

Result<std::vector<GpuId>> GpuIdPool::Assign(Amount gpu) {
  if (gpu.IsZero()) return std::vector<GpuId>{};
  if (!CanAssign(gpu)) {
    return ResourceExhausted("no GPU ids free for GPU " + gpu.ToString() + " (" +
                             Available().ToString() + " of " + Schedulable().ToString() +
                             " schedulable free)");
  }
  if (IsFractional(gpu)) {
    IdState* best = nullptr;  // the fullest id it still fits on; the first (lowest) on a tie
    for (IdState& s : ids_) {
      if (s.quarantined || s.whole || s.used + gpu > kOne) continue;
      if (best == nullptr || s.used > best->used) best = &s;
    }
    best->used = best->used + gpu;
    return std::vector<GpuId>{best->id};
  }
  std::vector<GpuId> taken;
  int64_t want = gpu.units() / Amount::kUnitsPerWhole;
  for (IdState& s : ids_) {
    if (static_cast<int64_t>(taken.size()) == want) break;
    if (s.quarantined || s.whole || !s.used.IsZero()) continue;
    s.whole = true;
    s.used = kOne;
    taken.push_back(s.id);
  }
  return taken;
}

Status GpuIdPool::Release(const std::vector<GpuId>& ids, Amount gpu) {
  auto fail = [&](const std::string& why) {
    return InvalidArgument("cannot release GPU " + gpu.ToString() + " on ids [" + IdList(ids) +
                           "]: " + why);
  };
  bool fractional = IsFractional(gpu);
  size_t expected = gpu.IsZero() ? 0 : fractional ? 1 : gpu.units() / Amount::kUnitsPerWhole;
  if (ids.size() != expected || (!gpu.IsZero() && !fractional && !gpu.IsWhole())) {
    return fail("not the number of ids such a request is given");
  }
  std::vector<IdState*> states;
  for (GpuId id : ids) {
    IdState* s = Find(id);
    if (s == nullptr) return fail("no GPU id " + std::to_string(id) + " on this node");
    if (std::find(states.begin(), states.end(), s) != states.end()) return fail("an id twice");
    if (fractional ? (s->whole || s->used < gpu) : !s->whole) {
      return fail("GPU id " + std::to_string(id) + " is not held that way");
    }
    states.push_back(s);
  }
  for (IdState* s : states) {
    s->used = fractional ? s->used - gpu : Amount();
    s->whole = false;
  }
  return Status::Ok();
}

Status GpuIdPool::Quarantine(GpuId id) {
  IdState* s = Find(id);
  if (s == nullptr) return NotFound("no GPU id " + std::to_string(id) + " on this node");
  s->quarantined = true;
  return Status::Ok();
}

Status GpuIdPool::Restore(GpuId id) {
  IdState* s = Find(id);
  if (s == nullptr) return NotFound("no GPU id " + std::to_string(id) + " on this node");
  s->quarantined = false;
  return Status::Ok();
}

Amount GpuIdPool::Schedulable() const {
  return Amount::Whole(
      std::count_if(ids_.begin(), ids_.end(), [](const IdState& s) { return !s.quarantined; }));
}

Amount GpuIdPool::Available() const {
  Amount free;
  for (const IdState& s : ids_) {
    if (!s.quarantined) free = free + (kOne - s.used);
  }
  return free;
}

GpuIdPool::IdState* GpuIdPool::Find(GpuId id) {
  auto it = std::lower_bound(ids_.begin(), ids_.end(), id,
                             [](const IdState& s, GpuId v) { return s.id < v; });
  return it != ids_.end() && it->id == id ? &*it : nullptr;
}

}  // namespace airt::worker::scheduling::internal
