#include "head/internal/placement_group_manager.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "common/bundle_resources.h"
#include "common/logging.h"
#include "common/rpc_status.h"
#include "head/internal/demand.h"

namespace airt::head::internal {
namespace {

constexpr std::string_view kRemovedCause = "its placement group was removed";
// Reservations in flight at once (each a prepare and a commit per node it uses).
constexpr size_t kMaxInFlight = 64;

capnp::Data::Reader AsData(const uint8_t* data, size_t size) {
  return capnp::Data::Reader(data, size);
}

std::string AddressOf(const NodeView& v) {
  return v.info.address + ":" + std::to_string(v.info.node_port);
}

kj::Promise<Status> Sent(kj::Promise<void> call) {
  return call.then([] { return Status::Ok(); },
                   [](kj::Exception&& e) { return FromKjException(e); });
}

}  // namespace

PlacementGroupManager::PlacementGroupManager(MetadataStore& store, Clock& clock,
                                             const NodeTable& nodes, ActorTable& actors,
                                             const JobTable& jobs, NodeConnector* connector,
                                             CommitFn commit)
    : clock_(clock),
      nodes_(nodes),
      actors_(actors),
      jobs_(jobs),
      connector_(connector),
      commit_(std::move(commit)),
      table_(store),
      tasks_(*this) {}

PlacementGroupManager::~PlacementGroupManager() noexcept = default;

void PlacementGroupManager::taskFailed(kj::Exception&& exception) {
  AIRT_LOG(WARNING) << "placement group work failed: " << FromKjException(exception).ToString();
}

kj::Promise<Status> PlacementGroupManager::Create(PlacementGroupRecord spec,
                                                  std::shared_ptr<PlacementGroupId> id) {
  std::optional<JobRecord> job = jobs_.Find(spec.job);
  if (!job || !job->alive) {
    return Status(FailedPrecondition("job " + spec.job.Hex() +
                                     " is not running: it cannot create placement groups"));
  }
  spec.create_ms = static_cast<uint64_t>(clock_.WallMs());
  spec.pending_reason = "not tried yet";
  return commit_([this, spec = std::move(spec), id]() -> Result<Change> {
           AIRT_ASSIGN_OR_RETURN(Staged<PlacementGroupId> staged, table_.Create(spec));
           *id = staged.value;
           return std::move(staged.change);
         })
      .then([this](Status s) {
        if (s.ok()) Schedule();
        return s;
      });
}

kj::Promise<Status> PlacementGroupManager::Remove(const PlacementGroupId& id) {
  std::optional<PlacementGroupRecord> group = table_.Find(id);
  if (!group) return Status(NotFound("no placement group " + id.Hex()));
  std::string hex = id.Hex();
  return commit_([this, id, hex]() -> Result<Change> {
           AIRT_ASSIGN_OR_RETURN(Change change, table_.MarkRemoved(id));
           if (change.rows.empty()) return change;
           for (const ActorRecord& actor : actors_.List()) {
             if (actor.state == ActorState::kDead) continue;
             bool in_group = std::any_of(actor.resources.begin(), actor.resources.end(),
                                         [&](const Resource& r) {
                                           return IsBundleResourceOf(r.name, hex);
                                         });
             if (!in_group) continue;
             Result<Staged<ActorRecord>> killed = actors_.Kill(actor.id, std::string(kRemovedCause));
             if (killed.ok()) change.Add(std::move(killed->change));
           }
           return change;
         })
      .then([this, id, was = std::move(*group)](Status s) {
        if (!s.ok()) return s;
        if (was.state == GroupState::kCreated || was.state == GroupState::kRescheduling) {
          std::map<NodeId, std::string> addresses = Addresses();
          CancelPlan plan;
          for (size_t i = 0; i < was.bundle_nodes.size() && i < was.bundles.size(); ++i) {
            const NodeId& node = was.bundle_nodes[i];
            if (node.IsNil()) continue;
            plan[addresses[node]];  // every bundle of the group there
            BundleUnits& released = released_since_report_[node];
            for (const auto& [name, n] : ToBundleUnits(was.bundles[i])) released[name] += n;
          }
          CancelOn(id, plan);
        }
        auto range = waiters_.equal_range(id);
        for (auto it = range.first; it != range.second; ++it) {
          if (it->second->isWaiting()) {
            it->second->reject(
                ToKjException(FailedPrecondition("placement group " + id.Hex() + " was removed")));
          }
        }
        waiters_.erase(id);
        AIRT_LOG(DEBUG) << "placement group " << id.Hex() << " removed";
        Schedule();
        return s;
      });
}

kj::Promise<PlacementGroupRecord> PlacementGroupManager::Wait(const PlacementGroupId& id) {
  std::optional<PlacementGroupRecord> group = table_.Find(id);
  if (!group) return ToKjException(NotFound("no placement group " + id.Hex()));
  if (group->state == GroupState::kCreated) return kj::mv(*group);
  if (group->state == GroupState::kRemoved) {
    return ToKjException(FailedPrecondition("placement group " + id.Hex() + " was removed"));
  }
  // Waiters that went away are dropped now and then.
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    it = it->second->isWaiting() ? std::next(it) : waiters_.erase(it);
  }
  auto paf = kj::newPromiseAndFulfiller<PlacementGroupRecord>();
  waiters_.emplace(id, kj::mv(paf.fulfiller));
  return kj::mv(paf.promise);
}

size_t PlacementGroupManager::Waiting() {
  return static_cast<size_t>(std::count_if(waiters_.begin(), waiters_.end(), [](auto& w) {
    return w.second->isWaiting();
  }));
}

void PlacementGroupManager::OnJobFinished(const JobId& job) {
  for (const PlacementGroupRecord& group : table_.List()) {
    if (group.job != job || group.detached || group.state == GroupState::kRemoved) continue;
    AIRT_LOG(INFO) << "job " << job.Hex() << " finished: removing its placement group "
                   << group.id.Hex();
    tasks_.add(Remove(group.id).then([](Status s) {
      if (!s.ok()) AIRT_LOG(WARNING) << "removing a finished job's group: " << s.ToString();
    }));
  }
}

void PlacementGroupManager::OnNodeReport(const NodeId& node) {
  reserved_since_report_.erase(node);
  released_since_report_.erase(node);
  refused_since_report_ = false;
  Schedule();
}

std::map<NodeId, std::string> PlacementGroupManager::Addresses() const {
  std::map<NodeId, std::string> addresses;
  for (const NodeView& v : nodes_.View()) addresses[v.info.id] = AddressOf(v);
  return addresses;
}

std::vector<BundleNode> PlacementGroupManager::FreeNodes(const std::vector<NodeView>& view) const {
  // What the head's records hold on each node (bounding what it can give), and what reservations
  // in flight take from its last report.
  std::map<NodeId, BundleUnits> reserved = table_.reserved_units(), taking;
  for (const auto& [id, on] : in_flight_) {
    for (const auto& [node, units] : on) {
      for (const auto& [name, n] : units) {
        reserved[node][name] += n;
        taking[node][name] += n;
      }
    }
  }
  auto get = [](const std::map<NodeId, BundleUnits>& m, const NodeId& node,
                const std::string& name) -> int64_t {
    auto it = m.find(node);
    if (it == m.end()) return 0;
    auto found = it->second.find(name);
    return found == it->second.end() ? 0 : found->second;
  };
  std::vector<BundleNode> out;
  for (const NodeView& v : view) {
    if (!v.alive || v.draining) continue;  // a draining node takes no new bundles
    BundleNode node{v.info.id, ToBundleUnits(v.info.total), {}, {}};
    for (const Label& l : v.info.labels) node.labels[l.key] = l.value;
    BundleUnits reported = ToBundleUnits(v.load.available);
    for (const auto& [name, total] : node.total) {
      auto it = reported.find(name);
      int64_t avail = it == reported.end() ? 0 : it->second;
      avail = avail - get(reserved_since_report_, v.info.id, name) -
              get(taking, v.info.id, name) + get(released_since_report_, v.info.id, name);
      int64_t cap = total - get(reserved, v.info.id, name);
      node.free[name] = std::clamp<int64_t>(avail, 0, std::max<int64_t>(cap, 0));
    }
    out.push_back(std::move(node));
  }
  return out;
}

std::variant<PlacementGroupManager::Placed, BundlesWait> PlacementGroupManager::Decide(
    const PlacementGroupRecord& group, const std::vector<BundleNode>& free) const {
  std::vector<uint32_t> missing;
  std::set<NodeId> kept;
  for (size_t i = 0; i < group.bundles.size(); ++i) {
    if (i < group.bundle_nodes.size() && !group.bundle_nodes[i].IsNil()) {
      kept.insert(group.bundle_nodes[i]);
    } else {
      missing.push_back(static_cast<uint32_t>(i));
    }
  }
  std::vector<std::vector<Resource>> bundles;
  std::vector<sched::LabelSelector> selectors;
  for (uint32_t i : missing) {
    bundles.push_back(group.bundles[i]);
    selectors.push_back(i < group.bundle_label_selector.size() ? group.bundle_label_selector[i]
                                                               : sched::LabelSelector{});
  }
  // The bundles kept keep the strict strategies' rule: STRICT_PACK's new ones go on the node
  // of the kept ones, STRICT_SPREAD's on nodes holding none of the group.
  std::vector<BundleNode> nodes;
  for (const BundleNode& node : free) {
    bool holds = kept.count(node.id) != 0;
    if (group.strategy == PlacementStrategy::kStrictPack && !kept.empty() && !holds) continue;
    if (group.strategy == PlacementStrategy::kStrictSpread && holds) continue;
    nodes.push_back(node);
  }
  BundleDecision decision = DecideBundles(group.strategy, bundles, nodes, selectors);
  if (auto* wait = std::get_if<BundlesWait>(&decision)) {
    if (!kept.empty()) {
      wait->reason = std::to_string(missing.size()) + " of its bundles lost their node (" +
                     group.pending_reason + "), and: " + wait->reason;
    }
    return std::move(*wait);
  }
  const std::vector<NodeId>& on = std::get<BundlesOn>(decision).nodes;
  Placed placed;
  for (size_t k = 0; k < missing.size(); ++k) placed[missing[k]] = on[k];
  return placed;
}

void PlacementGroupManager::Schedule() {
  if (refused_since_report_) return;
  std::vector<PlacementGroupId> pending = table_.Pending();
  if (pending.empty()) return;
  if (connector_ == nullptr) {
    for (const PlacementGroupId& id : pending) {
      table_.SetPending(id, "the head has no connection to its nodes", false);
    }
    return;
  }
  std::vector<BundleNode> free = FreeNodes(nodes_.View());
  std::optional<std::map<NodeId, std::string>> addresses;
  for (const PlacementGroupId& id : pending) {
    if (in_flight_.size() >= kMaxInFlight) return;
    if (in_flight_.count(id) != 0) continue;
    const PlacementGroupRecord& group = *table_.Get(id);
    std::variant<Placed, BundlesWait> decision = Decide(group, free);
    if (auto* wait = std::get_if<BundlesWait>(&decision)) {
      if (wait->infeasible && node_types_ &&
          NodeTypesHoldGroup(node_types_(), group.strategy, group.bundles,
                             group.bundle_label_selector)) {
        wait->infeasible = false;  // the autoscaler can add nodes that hold it
        wait->reason += "; a node type of the autoscaler holds it";
      }
      if (wait->infeasible && warned_infeasible_.insert(id).second) {
        AIRT_LOG(WARNING) << "placement group " << id.Hex() << " cannot be placed on any alive "
                          << "node: " << wait->reason << "; it stays pending until one joins";
      }
      if (group.state == GroupState::kPending) {
        table_.SetPending(id, std::move(wait->reason), wait->infeasible);
      }
      continue;
    }
    warned_infeasible_.erase(id);
    Placed& placed = std::get<Placed>(decision);
    // What it takes, for the groups after it (and for the next Schedule until it is recorded).
    std::map<NodeId, BundleUnits>& taking = in_flight_[id];
    for (const auto& [index, node] : placed) {
      for (const auto& [name, n] : ToBundleUnits(group.bundles[index])) taking[node][name] += n;
    }
    for (BundleNode& node : free) {
      auto it = taking.find(node.id);
      if (it == taking.end()) continue;
      for (const auto& [name, n] : it->second) node.free[name] -= n;
    }
    if (!addresses) addresses = Addresses();
    tasks_.add(Reserve(id, std::move(placed), *addresses).then([this](bool created) {
      if (created) Schedule();  // after a refusal: at the next report
    }));
  }
}

kj::Promise<bool> PlacementGroupManager::Reserve(PlacementGroupId id, Placed placed,
                                                 std::map<NodeId, std::string> addresses) {
  const PlacementGroupRecord& group = *table_.Get(id);
  std::map<NodeId, std::vector<uint32_t>> by_node;
  for (const auto& [index, node] : placed) by_node[node].push_back(index);
  std::map<NodeId, std::string> involved;
  CancelPlan rollback;
  for (const auto& [node, indices] : by_node) {
    involved[node] = addresses[node];
    rollback[addresses[node]] = indices;
  }

  // Phase 1: prepare on every node at once.
  kj::Vector<kj::Promise<Status>> prepares;
  for (const auto& [node, indices] : by_node) {
    auto request = connector_->Connect(involved[node]).prepareBundlesRequest();
    request.setGroupId(AsData(id.data(), PlacementGroupId::kSize));
    auto bundles = request.initBundles(indices.size());
    for (size_t k = 0; k < indices.size(); ++k) {
      const std::vector<Resource>& resources = group.bundles[indices[k]];
      bundles[k].setIndex(indices[k]);
      auto list = bundles[k].initResources(resources.size());
      for (size_t j = 0; j < resources.size(); ++j) {
        list[j].setName(resources[j].name);
        list[j].setAmount(resources[j].amount);
      }
    }
    NodeId n = node;
    prepares.add(Sent(request.send().ignoreResult()).then([this, n, involved](Status s) {
      if (!s.ok()) {
        if (s.code() == Code::kUnavailable) connector_->Forget(involved.at(n));
        return Status(s.code(), "node " + n.Hex().substr(0, 8) + " refused: " + s.message());
      }
      return s;
    }));
  }
  // `refused`: a node said no (or could not be reached): nothing more before its next report.
  auto fail = [this, id, rollback](const std::string& why, bool refused = true) {
    AIRT_LOG(INFO) << "placement group " << id.Hex() << " not reserved this time, every prepared "
                   << "bundle rolled back: " << why;
    in_flight_.erase(id);
    if (refused) refused_since_report_ = true;
    CancelOn(id, rollback);
    const PlacementGroupRecord* now = table_.Get(id);
    if (now != nullptr && now->state == GroupState::kPending) table_.SetPending(id, why, false);
    return false;
  };
  return kj::joinPromises(prepares.releaseAsArray())
      .then([this, id, involved, fail](kj::Array<Status> prepared) -> kj::Promise<bool> {
        for (const Status& s : prepared) {
          if (!s.ok()) return fail(s.message());
        }
        const PlacementGroupRecord* now = table_.Get(id);
        if (now == nullptr || now->state == GroupState::kRemoved) {
          return fail("it was removed meanwhile", false);
        }
        // Phase 2: commit on every node.
        kj::Vector<kj::Promise<Status>> commits;
        for (const auto& [node, address] : involved) {
          auto request = connector_->Connect(address).commitBundlesRequest();
          request.setGroupId(AsData(id.data(), PlacementGroupId::kSize));
          NodeId n = node;
          commits.add(Sent(request.send().ignoreResult()).then([n](Status s) {
            if (s.ok()) return s;
            return Status(s.code(), "node " + n.Hex().substr(0, 8) + " failed to commit: " +
                                        s.message());
          }));
        }
        return kj::joinPromises(commits.releaseAsArray())
            .then([fail](kj::Array<Status> committed) -> kj::Promise<bool> {
              for (const Status& s : committed) {
                if (!s.ok()) return fail(s.message());
              }
              return true;
            });
      })
      .then([this, id, placed, fail](bool ok) -> kj::Promise<bool> {
        if (!ok) return false;
        return commit_([this, id, placed] { return table_.MarkPlaced(id, placed); })
            .then([this, id, placed, fail](Status s) {
              if (!s.ok()) return fail("recording it failed: " + s.ToString(), false);
              in_flight_.erase(id);
              const PlacementGroupRecord& group = *table_.Get(id);
              for (const auto& [index, node] : placed) {
                BundleUnits& r = reserved_since_report_[node];
                for (const auto& [name, n] : ToBundleUnits(group.bundles[index])) r[name] += n;
              }
              if (group.state == GroupState::kCreated) Created(id);
              // A node of it may have died while it was reserved.
              for (const auto& [index, node] : placed) {
                std::optional<NodeView> v = nodes_.Find(node);
                if (!v || !v->alive) {
                  OnNodesMayHaveDied();
                  break;
                }
              }
              return true;
            });
      });
}

void PlacementGroupManager::Created(const PlacementGroupId& id) {
  auto range = waiters_.equal_range(id);
  if (range.first == range.second) return;
  PlacementGroupRecord created = *table_.Get(id);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second->isWaiting()) it->second->fulfill(PlacementGroupRecord(created));
  }
  waiters_.erase(id);
}

void PlacementGroupManager::CancelOn(const PlacementGroupId& id, const CancelPlan& plan) {
  for (const auto& [address, indices] : plan) {
    if (address.empty()) continue;
    auto request = connector_->Connect(address).cancelBundlesRequest();
    request.setGroupId(AsData(id.data(), PlacementGroupId::kSize));
    auto list = request.initIndices(indices.size());
    for (size_t k = 0; k < indices.size(); ++k) list.set(k, indices[k]);
    tasks_.add(Sent(request.send().ignoreResult()).then([this, id, address](Status s) {
      if (s.ok()) return;
      // A node that cannot be reached gives its bundles back when it restarts (its reservations
      // live in its memory only).
      AIRT_LOG(WARNING) << "cancelling placement group " << id.Hex() << " on " << address << ": "
                        << s.ToString();
      if (s.code() == Code::kUnavailable) connector_->Forget(address);
    }));
  }
}

std::vector<NodeView> PlacementGroupManager::WithBundleResources(std::vector<NodeView> view) const {
  const auto& extra = table_.bundle_resources();
  if (extra.empty()) return view;
  for (NodeView& v : view) {
    auto it = extra.find(v.info.id);
    if (it == extra.end()) continue;
    v.info.total.reserve(v.info.total.size() + it->second.size());
    for (const auto& [name, amount] : it->second) v.info.total.push_back({name, amount});
  }
  return view;
}

}  // namespace airt::head::internal
