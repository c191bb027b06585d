// LeaseQueue: queued lease requests, FIFO per shape, decided again on every change.
#include <algorithm>
#include <cassert>
#include <string>
#include <vector>

#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling {
namespace {

// Requests the head placed here never spill back, so they queue apart from those that may.
std::string QueueKey(const LeaseRequest& request) {
  std::string key = (request.placed ? "placed " : "") + request.shape.ToString();
  if (!(request.strategy == SchedulingStrategy())) key += " " + ToString(request.strategy);
  if (request.spilled) key += " spilled";
  return key;
}

}  // namespace

Result<LeaseDecision> LeaseQueue::Submit(LeaseRequest request, const NodeResources& local,
                                         const ClusterView& view, TimePoint now) {
  LeaseDecision decision = policy_.Decide(request, local, view, now);
  if (std::holds_alternative<Infeasible>(decision)) return decision;
  auto same_shape = by_shape_.find(QueueKey(request));
  if (same_shape != by_shape_.end()) {
    const auto* queued = std::get_if<QueueLocally>(&decision);
    decision = QueueLocally{queued == nullptr || queued->feasible,
                            "behind " + std::to_string(same_shape->second.size()) +
                                " earlier requests for " + same_shape->first};
  }
  if (std::holds_alternative<QueueLocally>(decision)) {
    AIRT_RETURN_IF_ERROR(Enqueue(std::move(request)));
  }
  return decision;
}

Status LeaseQueue::Enqueue(LeaseRequest request) {
  for (const auto& [key, entries] : by_shape_) {
    for (const Entry& e : entries) {
      if (e.request.id == request.id) {
        return AlreadyExists("lease request " + std::to_string(request.id) + " for " + key +
                             " is already queued");
      }
    }
  }
  std::string key = QueueKey(request);
  by_shape_[key].push_back(Entry{next_seq_++, std::move(request)});
  ++size_;
  return Status::Ok();
}

Status LeaseQueue::Cancel(uint64_t request_id) {
  for (auto it = by_shape_.begin(); it != by_shape_.end(); ++it) {
    auto& entries = it->second;
    auto found = std::find_if(entries.begin(), entries.end(),
                              [&](const Entry& e) { return e.request.id == request_id; });
    if (found == entries.end()) continue;
    entries.erase(found);
    if (entries.empty()) by_shape_.erase(it);
    --size_;
    return Status::Ok();
  }
  return NotFound("lease request " + std::to_string(request_id) + " is not queued");
}

std::vector<DispatchedLease> LeaseQueue::Dispatch(const NodeResources& local,
                                                  const ClusterView& view, TimePoint now) {
  // Nothing queued: no trial copies (the node dispatches at every change of its resources or its
  // view, and both hold every bundle resource placed in the cluster).
  if (by_shape_.empty()) return {};
  NodeResources trial_local = local;
  ClusterView trial_view = view;
  std::vector<DispatchedLease> out;
  // Shapes whose head stays queued; decisions only take resources, so they stay blocked.
  std::vector<std::string> blocked;
  while (true) {
    // The oldest head among the shapes not blocked.
    auto next = by_shape_.end();
    for (auto it = by_shape_.begin(); it != by_shape_.end(); ++it) {
      if (std::find(blocked.begin(), blocked.end(), it->first) != blocked.end()) continue;
      if (next == by_shape_.end() || it->second.front().seq < next->second.front().seq) next = it;
    }
    if (next == by_shape_.end()) break;

    const LeaseRequest& request = next->second.front().request;
    LeaseDecision decision = policy_.Decide(request, trial_local, trial_view, now);
    if (std::holds_alternative<QueueLocally>(decision)) {
      blocked.push_back(next->first);
      continue;
    }
    if (std::holds_alternative<GrantLocally>(decision)) {
      // Same state, same logic: this succeeds, and so will the caller's Acquire.
      [[maybe_unused]] bool granted = trial_local.Acquire(request.shape).ok();
      assert(granted);
    } else if (const auto* spill = std::get_if<SpillBack>(&decision)) {
      for (NodeView& node : trial_view.nodes) {
        if (node.id == spill->node) {
          (void)node.available.Subtract(request.shape.amounts());
          break;
        }
      }
    }
    out.push_back(DispatchedLease{std::move(next->second.front().request), std::move(decision)});
    next->second.pop_front();
    if (next->second.empty()) by_shape_.erase(next);
    --size_;
  }
  return out;
}

std::optional<TimePoint> LeaseQueue::NextGraceEnd(TimePoint now) const {
  std::optional<TimePoint> earliest;
  for (const auto& [key, entries] : by_shape_) {
    for (const Entry& e : entries) {
      TimePoint end = e.request.waiting_since + policy_.options().infeasible_grace;
      if (end > now && (!earliest || end < *earliest)) earliest = end;
    }
  }
  return earliest;
}

std::vector<QueuedShape> LeaseQueue::Snapshot() const {
  std::vector<std::pair<uint64_t, QueuedShape>> shapes;
  for (const auto& [key, entries] : by_shape_) {
    QueuedShape q{entries.front().request.shape, entries.size(),
                  entries.front().request.waiting_since};
    for (const Entry& e : entries) {
      q.oldest_waiting_since = std::min(q.oldest_waiting_since, e.request.waiting_since);
    }
    shapes.emplace_back(entries.front().seq, std::move(q));
  }
  std::sort(shapes.begin(), shapes.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<QueuedShape> out;
  out.reserve(shapes.size());
  for (auto& [seq, q] : shapes) out.push_back(std::move(q));
  return out;
}

}  // namespace airt::worker::scheduling
