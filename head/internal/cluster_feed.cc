#include "head/internal/cluster_feed.h"

#include <string>
#include <utility>

#include "common/logging.h"

namespace airt::head::internal {
namespace {

// Whether `now` is no news against `kept`: how long ago the node last heartbeated, and the
// wording of a death's cause (a timed-out node's names the time since its last heartbeat), are
// none. Compared in place (kept's two fields set aside meanwhile, then put back), not on copies:
// a node's info holds every bundle resource placed on it, and the feed compares each node at
// every change of the head's tables.
bool SameNews(NodeView& kept, const NodeView& now) {
  uint64_t age = std::exchange(kept.ms_since_heartbeat, now.ms_since_heartbeat);
  std::string cause;
  bool swapped = kept.death_cause.empty() == now.death_cause.empty() &&
                 kept.death_cause != now.death_cause;
  if (swapped) cause = std::exchange(kept.death_cause, now.death_cause);
  bool same = kept == now;
  kept.ms_since_heartbeat = age;
  if (swapped) kept.death_cause = std::move(cause);
  return same;
}

}  // namespace

ClusterFeed::ClusterFeed(uint64_t epoch) : epoch_(epoch) { AIRT_CHECK(epoch != 0); }

ClusterFeed::~ClusterFeed() { *alive_ = false; }

void ClusterFeed::Update(Entry& entry, const NodeView& view, bool& membership) {
  if (SameNews(entry.view, view)) return;
  if (entry.view.alive != view.alive || entry.view.draining != view.draining ||
      !(entry.view.info == view.info)) {
    membership = true;  // submitters follow drains (their leases there take no new task)
  }
  entry.view = view;
  entry.version = version_ + 1;
}

void ClusterFeed::Publish(const std::vector<NodeView>& view, const std::vector<NodeInfo>& types) {
  uint64_t next = version_ + 1;
  bool membership = false;
  std::vector<Entry> entries;
  entries.reserve(view.size());
  std::unordered_map<NodeId, size_t> index;
  for (const NodeView& v : view) {
    auto found = index_.find(v.info.id);
    if (found == index_.end()) {
      entries.push_back(Entry{v, next});
      membership = true;
    } else {
      entries.push_back(std::move(entries_[found->second]));
      Update(entries.back(), v, membership);
    }
    index[v.info.id] = entries.size() - 1;
  }
  // An id of the last view missing from this one: the head forgot that (dead) node.
  bool forgot = false;
  for (const auto& [id, at] : index_) forgot = forgot || index.count(id) == 0;
  if (forgot) {
    forgotten_version_ = next;
    membership = true;
  }
  if (!(types == types_)) {
    types_ = types;
    membership = true;
  }
  bool changed = membership;
  for (const Entry& e : entries) changed = changed || e.version == next;
  entries_ = std::move(entries);
  index_ = std::move(index);
  if (!changed) return;
  version_ = next;
  if (membership) membership_version_ = next;
  Wake();
}

bool ClusterFeed::PublishNode(const NodeView& node) {
  auto found = index_.find(node.info.id);
  if (found == index_.end()) return false;
  bool membership = false;
  Entry& entry = entries_[found->second];
  Update(entry, node, membership);
  if (entry.version != version_ + 1) return true;  // nothing new
  ++version_;
  if (membership) membership_version_ = version_;
  Wake();
  return true;
}

ClusterFeed::Delta ClusterFeed::Since(uint64_t epoch, uint64_t since) const {
  Delta delta;
  delta.epoch = epoch_;
  delta.version = version_;
  delta.full = epoch != epoch_ || since == 0 || since > version_ || since < forgotten_version_;
  for (const Entry& e : entries_) {
    if (delta.full || e.version > since) delta.nodes.push_back(e.view);
  }
  delta.types = types_;
  return delta;
}

bool ClusterFeed::Due(uint64_t epoch, uint64_t since, bool membership_only) const {
  if (epoch != epoch_ || since == 0 || since > version_ || since < forgotten_version_) return true;
  return (membership_only ? membership_version_ : version_) > since;
}

kj::Promise<void> ClusterFeed::Wait(uint64_t epoch, uint64_t since, bool membership_only,
                                    int64_t deadline_ms) {
  if (Due(epoch, since, membership_only)) return kj::READY_NOW;
  auto paf = kj::newPromiseAndFulfiller<void>();
  uint64_t id = next_waiter_++;
  waiters_.emplace(id, Waiter{epoch, since, membership_only, deadline_ms, kj::mv(paf.fulfiller)});
  return paf.promise.attach(kj::defer([this, alive = alive_, id] {
    if (*alive) waiters_.erase(id);
  }));
}

void ClusterFeed::Wake() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (Due(it->second.epoch, it->second.since, it->second.membership_only)) {
      it->second.fulfiller->fulfill();
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void ClusterFeed::Expire(int64_t now_ms) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.deadline_ms != 0 && it->second.deadline_ms <= now_ms) {
      it->second.fulfiller->fulfill();
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

ClusterFeed::Snapshot ClusterFeed::snapshot() const {
  return Snapshot{epoch_, version_, membership_version_, entries_.size(), waiters_.size()};
}

}  // namespace airt::head::internal
