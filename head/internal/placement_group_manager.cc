#include "head/internal/placement_group_manager.h"

#include <algorithm>
#include <utility>

#include "common/bundle_resources.h"
#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::head::internal {
namespace {

constexpr std::string_view kRemovedCause = "its placement group was removed";

capnp::Data::Reader AsData(const uint8_t* data, size_t size) {
  return capnp::Data::Reader(data, size);
}

std::string AddressOf(const NodeView& v) {
  return v.info.address + ":" + std::to_string(v.info.node_port);
}

std::map<std::string, double> ToMap(const std::vector<Resource>& resources) {
  std::map<std::string, double> out;
  for (const Resource& r : resources) out[r.name] += r.amount;
  return out;
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
        if (was.state == GroupState::kCreated) {
          std::map<NodeId, std::string> addresses;
          for (const NodeView& v : nodes_.View()) addresses[v.info.id] = AddressOf(v);
          std::map<NodeId, std::string> on;
          for (size_t i = 0; i < was.bundle_nodes.size(); ++i) {
            const NodeId& node = was.bundle_nodes[i];
            on[node] = addresses[node];
            BundleUnits& released = released_since_report_[node];
            for (const auto& [name, n] : ToBundleUnits(was.bundles[i])) released[name] += n;
          }
          CancelOn(id, on);
        }
        auto range = waiters_.equal_range(id);
        for (auto it = range.first; it != range.second; ++it) {
          if (it->second->isWaiting()) {
            it->second->reject(
                ToKjException(FailedPrecondition("placement group " + id.Hex() + " was removed")));
          }
        }
        waiters_.erase(id);
        AIRT_LOG(INFO) << "placement group " << id.Hex() << " removed";
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
  Schedule();
}

std::vector<BundleNode> PlacementGroupManager::FreeNodes(const std::vector<NodeView>& view) const {
  std::map<NodeId, BundleUnits> reserved;
  for (const PlacementGroupRecord& group : table_.List()) {
    if (group.state != GroupState::kCreated) continue;
    for (size_t i = 0; i < group.bundle_nodes.size() && i < group.bundles.size(); ++i) {
      BundleUnits& r = reserved[group.bundle_nodes[i]];
      for (const auto& [name, n] : ToBundleUnits(group.bundles[i])) r[name] += n;
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
      avail = avail - get(reserved_since_report_, v.info.id, name) +
              get(released_since_report_, v.info.id, name);
      int64_t cap = total - get(reserved, v.info.id, name);
      node.free[name] = std::clamp<int64_t>(avail, 0, std::max<int64_t>(cap, 0));
    }
    out.push_back(std::move(node));
  }
  return out;
}

void PlacementGroupManager::Schedule() {
  if (reserving_) return;
  std::vector<PlacementGroupId> pending = table_.Pending();
  if (pending.empty()) return;
  if (connector_ == nullptr) {
    for (const PlacementGroupId& id : pending) {
      table_.SetPending(id, "the head has no connection to its nodes", false);
    }
    return;
  }
  std::vector<NodeView> view = nodes_.View();
  std::vector<BundleNode> free = FreeNodes(view);
  for (const PlacementGroupId& id : pending) {
    std::optional<PlacementGroupRecord> group = table_.Find(id);
    BundleDecision decision = DecideBundles(group->strategy, group->bundles, free,
                                            group->bundle_label_selector);
    if (auto* wait = std::get_if<BundlesWait>(&decision)) {
      if (wait->infeasible && warned_infeasible_.insert(id).second) {
        AIRT_LOG(WARNING) << "placement group " << id.Hex() << " cannot be placed on any alive "
                          << "node: " << wait->reason << "; it stays pending until one joins";
      }
      table_.SetPending(id, std::move(wait->reason), wait->infeasible);
      continue;
    }
    warned_infeasible_.erase(id);
    std::map<NodeId, std::string> addresses;
    for (const NodeView& v : view) addresses[v.info.id] = AddressOf(v);
    reserving_ = true;
    tasks_.add(Reserve(std::move(*group), std::get<BundlesOn>(decision).nodes, addresses)
                   .then([this](bool created) {
                     reserving_ = false;
                     if (created) Schedule();  // after a refusal: at the next report
                   }));
    return;
  }
}

kj::Promise<bool> PlacementGroupManager::Reserve(PlacementGroupRecord group,
                                                 std::vector<NodeId> on,
                                                 std::map<NodeId, std::string> addresses) {
  std::map<NodeId, std::vector<size_t>> by_node;
  for (size_t i = 0; i < on.size(); ++i) by_node[on[i]].push_back(i);
  std::map<NodeId, std::string> involved;
  for (const auto& [node, indices] : by_node) involved[node] = addresses[node];
  PlacementGroupId id = group.id;

  // Phase 1: prepare on every node at once.
  kj::Vector<kj::Promise<Status>> prepares;
  for (const auto& [node, indices] : by_node) {
    auto request = connector_->Connect(involved[node]).prepareBundlesRequest();
    request.setGroupId(AsData(id.data(), PlacementGroupId::kSize));
    auto bundles = request.initBundles(indices.size());
    for (size_t k = 0; k < indices.size(); ++k) {
      const std::vector<Resource>& resources = group.bundles[indices[k]];
      bundles[k].setIndex(static_cast<uint32_t>(indices[k]));
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
  auto fail = [this, id, involved](const std::string& why) {
    AIRT_LOG(INFO) << "placement group " << id.Hex() << " not reserved this time, every prepared "
                   << "bundle rolled back: " << why;
    CancelOn(id, involved);
    table_.SetPending(id, why, false);
    return false;
  };
  return kj::joinPromises(prepares.releaseAsArray())
      .then([this, id, involved, fail](kj::Array<Status> prepared) -> kj::Promise<bool> {
        for (const Status& s : prepared) {
          if (!s.ok()) return fail(s.message());
        }
        std::optional<PlacementGroupRecord> now = table_.Find(id);
        if (!now || now->state != GroupState::kPending) return fail("it was removed meanwhile");
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
            .then([this, id, involved, fail](kj::Array<Status> committed) -> kj::Promise<bool> {
              for (const Status& s : committed) {
                if (!s.ok()) return fail(s.message());
              }
              return true;
            });
      })
      .then([this, id, on, group, fail](bool ok) -> kj::Promise<bool> {
        if (!ok) return false;
        return commit_([this, id, on] { return table_.MarkCreated(id, on); })
            .then([this, id, on, group, fail](Status s) {
              if (!s.ok()) return fail("recording it failed: " + s.ToString());
              for (size_t i = 0; i < on.size(); ++i) {
                BundleUnits& r = reserved_since_report_[on[i]];
                for (const auto& [name, n] : ToBundleUnits(group.bundles[i])) r[name] += n;
              }
              std::optional<PlacementGroupRecord> created = table_.Find(id);
              auto range = waiters_.equal_range(id);
              for (auto it = range.first; it != range.second; ++it) {
                if (it->second->isWaiting()) it->second->fulfill(PlacementGroupRecord(*created));
              }
              waiters_.erase(id);
              AIRT_LOG(DEBUG) << "placement group " << id.Hex() << " CREATED";
              return true;
            });
      });
}

void PlacementGroupManager::CancelOn(const PlacementGroupId& id,
                                     const std::map<NodeId, std::string>& addresses) {
  for (const auto& [node, address] : addresses) {
    if (address.empty()) continue;
    auto request = connector_->Connect(address).cancelBundlesRequest();
    request.setGroupId(AsData(id.data(), PlacementGroupId::kSize));
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
  std::map<NodeId, std::map<std::string, double>> extra;
  for (const PlacementGroupRecord& group : table_.List()) {
    if (group.state != GroupState::kCreated) continue;
    std::string hex = group.id.Hex();
    for (size_t i = 0; i < group.bundle_nodes.size() && i < group.bundles.size(); ++i) {
      auto& add = extra[group.bundle_nodes[i]];
      for (const auto& [name, amount] :
           CommittedBundleResources(hex, static_cast<int64_t>(i), ToMap(group.bundles[i]))) {
        add[name] += amount;
      }
    }
  }
  for (NodeView& v : view) {
    auto it = extra.find(v.info.id);
    if (it == extra.end()) continue;
    for (const auto& [name, amount] : it->second) v.info.total.push_back({name, amount});
  }
  return view;
}

}  // namespace airt::head::internal
