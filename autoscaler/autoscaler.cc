#include "autoscaler/autoscaler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>
#include <set>
#include <string_view>

#include "common/ids.h"
#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::autoscaler {
namespace {

constexpr size_t kKeep = 20;  // failed launches and stops kept for the status
constexpr const char* kAcceleratorLabel = "ray.io/accelerator-type";
// The start of a drained node's death cause in the head's view (head/internal/node_table.cc).
constexpr std::string_view kDrainedCause = "it was drained (";

Resources ToResources(capnp::List<proto::Resource>::Reader list) {
  Resources out;
  for (auto r : list) out[r.getName().cStr()] += r.getAmount();
  return out;
}

std::map<std::string, std::string> AcceleratorLabels(capnp::Text::Reader type) {
  std::map<std::string, std::string> labels;
  if (type.size() > 0) labels[kAcceleratorLabel] = type.cStr();
  return labels;
}

std::string Hex(capnp::Data::Reader bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::string WallNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%H:%M:%S UTC", &tm);
  return text;
}

bool SameResources(const Resources& a, const Resources& b) {
  for (const auto& [name, amount] : a) {
    auto it = b.find(name);
    double other = it == b.end() ? 0 : it->second;
    if (std::fabs(other - amount) > 1e-6) return false;
  }
  for (const auto& [name, amount] : b) {
    if (a.count(name) == 0 && std::fabs(amount) > 1e-6) return false;
  }
  return true;
}

template <typename T>
void KeepLatest(std::vector<T>& records) {
  if (records.size() > kKeep) records.erase(records.begin(), records.end() - kKeep);
}

std::string ShapeLine(const ShapeDemand& shape) {
  std::string line = ShapeText(shape.resources);
  for (const auto& [key, value] : shape.labels) line += " with " + key + "=" + value;
  return line + " x" + std::to_string(shape.count) + " (" + shape.source + ")";
}

GroupStrategy ToStrategy(proto::PlacementStrategy strategy) {
  switch (strategy) {
    case proto::PlacementStrategy::PACK: return GroupStrategy::kPack;
    case proto::PlacementStrategy::SPREAD: return GroupStrategy::kSpread;
    case proto::PlacementStrategy::STRICT_PACK: return GroupStrategy::kStrictPack;
    case proto::PlacementStrategy::STRICT_SPREAD: return GroupStrategy::kStrictSpread;
  }
  return GroupStrategy::kPack;
}

const char* StrategyText(GroupStrategy strategy) {
  switch (strategy) {
    case GroupStrategy::kPack: return "PACK";
    case GroupStrategy::kSpread: return "SPREAD";
    case GroupStrategy::kStrictPack: return "STRICT_PACK";
    case GroupStrategy::kStrictSpread: return "STRICT_SPREAD";
  }
  return "?";
}

Demand ParseDemand(proto::Demand::Reader in) {
  Demand demand;
  for (auto shape : in.getQueued()) {
    demand.shapes.push_back({ToResources(shape.getResources()),
                             AcceleratorLabels(shape.getAcceleratorType()), shape.getCount(),
                             "tasks"});
  }
  for (auto shape : in.getPendingActors()) {
    demand.shapes.push_back({ToResources(shape.getResources()),
                             AcceleratorLabels(shape.getAcceleratorType()), shape.getCount(),
                             "actors"});
  }
  for (auto group : in.getPendingGroups()) {
    GroupDemand g{Hex(group.getGroupId()), ToStrategy(group.getStrategy()), {}};
    for (auto bundle : group.getBundles()) g.bundles.push_back(ToResources(bundle.getResources()));
    demand.groups.push_back(std::move(g));
  }
  auto selectors = in.getRequestedSelectors();
  auto requested = in.getRequested();
  for (size_t i = 0; i < requested.size(); ++i) {
    ShapeDemand shape{ToResources(requested[i].getResources()), {}, 1, "request_resources"};
    if (i < selectors.size()) {
      for (auto label : selectors[i].getLabels()) {
        shape.labels[label.getKey().cStr()] = label.getValue().cStr();
      }
    }
    demand.requested.push_back(std::move(shape));
  }
  return demand;
}

// The node types as the head's infeasibility rule reads them: a line per type,
// "<name>\t<resource>=<amount>,...\t<label>=<value>,...".
std::string NodeTypesText(const ClusterConfig& config) {
  std::string text;
  for (const auto& [name, type] : config.node_types) {
    if (type.max_workers == 0) continue;
    text += name + "\t";
    bool first = true;
    for (const auto& [resource, amount] : type.resources) {
      char value[32];
      std::snprintf(value, sizeof(value), "%.17g", amount);
      text += (first ? "" : ",") + resource + "=" + value;
      first = false;
    }
    text += "\t";
    first = true;
    std::map<std::string, std::string> labels = type.labels;
    if (auto it = labels.find("accelerator_type"); it != labels.end()) {
      labels.emplace(kAcceleratorLabel, it->second);
    }
    for (const auto& [key, value] : labels) {
      text += (first ? "" : ",") + key + "=" + value;
      first = false;
    }
    text += "\n";
  }
  return text;
}

}  // namespace

Autoscaler::Autoscaler(ClusterConfig config, NodeProvider& provider, proto::Head::Client head,
                       kj::Timer& timer, std::function<int64_t()> now_ms,
                       AutoscalerOptions options)
    : config_(std::move(config)),
      provider_(provider),
      head_(kj::mv(head)),
      timer_(timer),
      now_ms_(std::move(now_ms)),
      options_(options) {}

kj::Promise<void> Autoscaler::Run() {
  auto put = head_.kvPutRequest();
  put.setNamespace("autoscaler");
  put.setKey("node_types");
  std::string types = NodeTypesText(config_);
  put.setValue(capnp::Data::Reader(reinterpret_cast<const uint8_t*>(types.data()), types.size()));
  put.setOverwrite(true);
  return put.send().ignoreResult().then([this] {
    return WatchDemand().exclusiveJoin(WatchMembership()).exclusiveJoin(Tick());
  });
}

kj::Promise<void> Autoscaler::WatchMembership() {
  auto request = head_.waitClusterChangeRequest();
  request.setEpoch(cluster_epoch_);
  request.setSinceVersion(cluster_version_);
  request.setMembershipOnly(true);
  request.setMaxWaitMs(kMembershipWaitMs);
  return timer_.timeoutAfter((kMembershipWaitMs + 5000) * kj::MILLISECONDS, request.send())
      .then(
          [this](capnp::Response<proto::Head::WaitClusterChangeResults>&& reply) {
            auto change = reply.getChange();
            bool changed = change.getEpoch() != cluster_epoch_ ||
                           change.getVersion() != cluster_version_;
            cluster_epoch_ = change.getEpoch();
            cluster_version_ = change.getVersion();
            // A node joined, died or left: its launch is registered, failed or done with.
            kj::Promise<void> round = changed ? Reconcile() : kj::READY_NOW;
            return round.then([this] { return WatchMembership(); });
          },
          [this](kj::Exception&& e) -> kj::Promise<void> {
            if (e.getType() == kj::Exception::Type::UNIMPLEMENTED) {
              return kj::NEVER_DONE;  // a head without the change feed: the tick alone
            }
            return timer_.afterDelay(500 * kj::MILLISECONDS).then([this] {
              return WatchMembership();
            });
          });
}

kj::Promise<void> Autoscaler::WatchDemand() {
  auto request = head_.waitDemandRequest();
  request.setSinceVersion(demand_version_);
  return request.send()
      .then([this](capnp::Response<proto::Head::WaitDemandResults>&& reply) {
        demand_ = ParseDemand(reply.getDemand());
        demand_version_ = reply.getDemand().getVersion();
        snapshot_.demand_version = demand_version_;
        return Reconcile();
      })
      .then([this] { return WatchDemand(); },
            [this](kj::Exception&& e) {
              AIRT_LOG(WARNING) << "autoscaler: waiting for demand failed: "
                                << e.getDescription().cStr() << "; asking again";
              return timer_.afterDelay(500 * kj::MILLISECONDS).then([this] {
                return WatchDemand();
              });
            });
}

kj::Promise<void> Autoscaler::Tick() {
  return timer_.afterDelay(options_.tick_ms * kj::MILLISECONDS)
      .then([this] { return Reconcile(); })
      .then([this] { return Tick(); });
}

kj::Promise<void> Autoscaler::Reconcile() {
  auto paf = kj::newPromiseAndFulfiller<void>();
  round_waiters_.push_back(kj::mv(paf.fulfiller));
  if (running_round_) {
    round_again_ = true;
    return kj::mv(paf.promise);
  }
  running_round_ = true;
  auto waiters = std::move(round_waiters_);
  round_waiters_.clear();
  auto shared = std::make_shared<decltype(waiters)>(std::move(waiters));
  auto done = [this, shared]() {
    running_round_ = false;
    for (auto& waiter : *shared) waiter->fulfill();
    if (round_again_) {
      round_again_ = false;
      auto pending = std::move(round_waiters_);
      round_waiters_.clear();
      if (!pending.empty()) {
        // Run once more for those who asked meanwhile.
        auto again = std::make_shared<decltype(pending)>(std::move(pending));
        detached_.add(Reconcile().then([again] {
          for (auto& waiter : *again) waiter->fulfill();
        }));
      }
    }
  };
  // Both continuations hold their own copy (then() keeps a reference to an lvalue it is given).
  detached_.add(RunRound().then([done]() { done(); }, [this, done](kj::Exception&& e) {
    AIRT_LOG(WARNING) << "autoscaler: a round failed: " << e.getDescription().cStr();
    done();
  }));
  return kj::mv(paf.promise);
}

kj::Promise<void> Autoscaler::RunRound() {
  return head_.clusterViewRequest().send().then(
      [this](capnp::Response<proto::Head::ClusterViewResults>&& view) {
        auto actors = head_.listActorsRequest().send();
        auto groups = head_.listPlacementGroupsRequest().send();
        return actors.then([this, view = kj::mv(view), groups = kj::mv(groups)](
                               capnp::Response<proto::Head::ListActorsResults>&& actors) mutable {
          return groups.then([this, view = kj::mv(view), actors = kj::mv(actors)](
                                 capnp::Response<proto::Head::ListPlacementGroupsResults>&&
                                     groups) mutable {
            int64_t now = now_ms_();
            // A drained node leaves, then its process or job ends: the head's view (dead or
            // draining), not the provider, tells what became of it (below).
            std::set<std::string> leaving;
            for (auto n : view.getNodes()) {
              if (!n.getAlive() || n.getDraining()) leaving.insert(Hex(n.getInfo().getNodeId()));
            }
            for (InstanceState& state : provider_.Poll()) {
              auto record = launches_.find(state.id);
              if (state.phase == InstanceState::Phase::kFailed && record != launches_.end() &&
                  leaving.count(record->second.node_id) == 0) {
                Fail(state.id, state.error, now);
              }
            }
            std::set<std::string> busy;  // nodes holding actors or placement group bundles
            for (auto actor : actors.getActors()) {
              if (actor.getState() != proto::ActorState::DEAD && actor.getNodeId().size() > 0) {
                busy.insert(Hex(actor.getNodeId()));
              }
            }
            for (auto group : groups.getGroups()) {
              if (group.getState() != proto::PlacementGroupState::CREATED) continue;
              for (auto node : group.getBundleNodes()) busy.insert(Hex(node));
            }
            std::vector<NodeNow> nodes;
            std::set<std::string> seen;
            for (auto n : view.getNodes()) {
              auto info = n.getInfo();
              std::string id = Hex(info.getNodeId());
              std::map<std::string, std::string> labels;
              for (auto l : info.getLabels()) labels[l.getKey().cStr()] = l.getValue().cStr();
              if (auto it = labels.find("accelerator_type"); it != labels.end()) {
                labels.emplace(kAcceleratorLabel, it->second);
              }
              std::string launch = labels.count(kLaunchIdLabel) ? labels[kLaunchIdLabel] : "";
              auto record = launches_.find(launch);
              bool ours = !launch.empty() && record != launches_.end();
              if (!n.getAlive()) {
                if (ours && (record->second.node_id.empty() || record->second.node_id == id)) {
                  std::string cause = n.getDeathCause().cStr();
                  bool drained = cause.rfind(kDrainedCause, 0) == 0;  // not a failed launch
                  bool early = !drained && (record->second.registered_ms == 0 ||
                                            now - record->second.registered_ms <
                                                options_.early_death_ms);
                  std::string why = "node " + id.substr(0, 8) + " died: " + cause;
                  if (early) {
                    Fail(launch, why, now);
                  } else {
                    (void)provider_.Terminate(launch);
                    snapshot_.stopped.push_back({launch, id, record->second.type, why, now, WallNow()});
                    KeepLatest(snapshot_.stopped);
                    launches_.erase(record);
                  }
                }
                idle_since_.erase(id);
                continue;
              }
              if (ours && record->second.node_id.empty()) {
                record->second.node_id = id;
                record->second.registered_ms = now;
                failures_in_a_row_.erase(record->second.type);
                backoff_until_.erase(record->second.type);
                AIRT_LOG(INFO) << "autoscaler: node " << id.substr(0, 8) << " ("
                               << record->second.type << ", launch " << launch
                               << ") registered after " << now - record->second.launched_ms
                               << " ms";
              }
              NodeNow node;
              node.id = id;
              node.type = ours ? record->second.type : "";
              node.head_node = !ours;
              node.total = ToResources(info.getTotal());
              node.available = ToResources(n.getAvailable());
              node.labels = labels;
              node.primary_objects = n.getNumPrimaryObjects();
              node.node_address =
                  std::string(info.getAddress().cStr()) + ":" + std::to_string(info.getNodePort());
              bool idle = n.getNumLeases() == 0 && n.getQueued().size() == 0 &&
                          busy.count(id) == 0 && SameResources(node.total, node.available);
              if (idle) {
                node.idle_ms = now - idle_since_.try_emplace(id, now).first->second;
                node.idle_ms = std::max<int64_t>(node.idle_ms, 1);
              } else {
                idle_since_.erase(id);
              }
              seen.insert(id);
              nodes.push_back(std::move(node));
            }
            std::vector<std::string> timed_out;
            for (auto& [launch, record] : launches_) {
              if (!record.node_id.empty()) continue;
              if (now - record.launched_ms > options_.launch_timeout_ms) {
                timed_out.push_back(launch);
                continue;
              }
              const NodeTypeConfig& type = config_.node_types.at(record.type);
              NodeNow node;
              node.id = launch;
              node.type = record.type;
              node.total = Resources(type.resources.begin(), type.resources.end());
              node.available = node.total;
              node.labels = type.labels;
              if (auto it = node.labels.find("accelerator_type"); it != node.labels.end()) {
                node.labels.emplace(kAcceleratorLabel, it->second);
              }
              node.launching = true;
              nodes.push_back(std::move(node));
            }
            for (const std::string& launch : timed_out) {
              Fail(launch,
                   "the node did not register within " +
                       std::to_string(options_.launch_timeout_ms) + " ms of its launch",
                   now);
            }
            Plan plan = Decide(config_, nodes, demand_);
            Act(nodes, plan, now);
            snapshot_.rounds++;
            snapshot_.infeasible = plan.infeasible;
            snapshot_.held_by_limits = plan.held_by_limits;
            snapshot_.pending.clear();
            for (const ShapeDemand& shape : demand_.shapes) {
              snapshot_.pending.push_back(ShapeLine(shape));
            }
            for (const GroupDemand& group : demand_.groups) {
              std::string line = "placement group " + group.id.substr(0, 8) + " " +
                                 StrategyText(group.strategy) + ":";
              for (const Resources& bundle : group.bundles) line += " " + ShapeText(bundle);
              snapshot_.pending.push_back(line);
            }
            for (const ShapeDemand& shape : demand_.requested) {
              snapshot_.pending.push_back(ShapeLine(shape));
            }
            snapshot_.launches.clear();
            for (const auto& [launch, record] : launches_) snapshot_.launches.push_back(record);
            snapshot_.backoff.clear();
            for (const auto& [type, until] : backoff_until_) {
              if (until > now) {
                snapshot_.backoff.push_back(type + ": next launch in " +
                                            std::to_string(until - now) + " ms");
              }
            }
            snapshot_.evacuating.clear();
            for (const auto& [id, address] : evacuating_) {
              snapshot_.evacuating.push_back("node " + id.substr(0, 8) + " at " + address +
                                             ": moving its primary objects before it stops");
            }
            return Publish();
          });
        });
      });
}

void Autoscaler::Act(const std::vector<NodeNow>& nodes, const Plan& plan, int64_t now) {
  static std::mt19937_64 random(std::random_device{}());
  for (const Launch& launch : plan.launches) {
    for (uint32_t i = 0; i < launch.count; ++i) {
      auto backoff = backoff_until_.find(launch.type);
      if (backoff != backoff_until_.end() && backoff->second > now) break;
      char suffix[16];
      std::snprintf(suffix, sizeof(suffix), "%06llx",
                    static_cast<unsigned long long>(random() & 0xffffff));
      std::string id = launch.type + "-" + std::to_string(++next_launch_) + "-" + suffix;
      launches_[id] = {id, launch.type, launch.reason, now, "", 0};
      snapshot_.launched_total++;
      AIRT_LOG(INFO) << "autoscaler: launching " << launch.type << " as " << id << ": "
                     << launch.reason;
      Status started = provider_.Launch(config_.node_types.at(launch.type), id);
      if (!started.ok()) {
        Fail(id, started.message(), now);
        break;
      }
    }
  }
  // Where no evacuated object may go: the nodes stopping now, being evacuated, or stopped within
  // the last minute (the cluster view may show them alive a while).
  for (auto it = stopped_at_.begin(); it != stopped_at_.end();) {
    it = now - it->second > 60'000 ? stopped_at_.erase(it) : std::next(it);
  }
  std::vector<std::string> leaving;
  for (const auto& [address, at] : stopped_at_) leaving.push_back(address);
  for (const auto& [id, address] : evacuating_) leaving.push_back(address);
  for (const Stop& stop : plan.stops) {
    for (const NodeNow& n : nodes) {
      if (n.id == stop.id && !n.node_address.empty()) leaving.push_back(n.node_address);
    }
  }
  for (const Stop& stop : plan.stops) {
    if (evacuating_.count(stop.id) > 0) continue;  // stopped once its objects are moved
    auto spared = spared_until_.find(stop.id);
    if (spared != spared_until_.end() && spared->second > now) continue;
    auto node = std::find_if(nodes.begin(), nodes.end(),
                             [&](const NodeNow& n) { return n.id == stop.id; });
    if (node != nodes.end() && node->primary_objects > 0) {
      EvacuateThenStop(*node, stop, leaving, now);
      continue;
    }
    StopNode(stop, node != nodes.end() ? node->node_address : "", now);
  }
}

void Autoscaler::StopNode(const Stop& stop, const std::string& address, int64_t now) {
  for (auto it = launches_.begin(); it != launches_.end(); ++it) {
    if (it->second.node_id != stop.id) continue;
    AIRT_LOG(INFO) << "autoscaler: stopping node " << stop.id.substr(0, 8) << " (" << stop.type
                   << "): " << stop.reason;
    Status stopped = provider_.Terminate(it->first);
    if (!stopped.ok()) {
      AIRT_LOG(WARNING) << "autoscaler: stopping " << it->first << ": " << stopped.message();
    }
    snapshot_.stopped.push_back({it->first, stop.id, stop.type, stop.reason, now, WallNow()});
    KeepLatest(snapshot_.stopped);
    snapshot_.stopped_total++;
    idle_since_.erase(stop.id);
    spared_until_.erase(stop.id);
    if (!address.empty()) stopped_at_[address] = now;
    launches_.erase(it);
    return;
  }
}


void Autoscaler::Spare(const std::string& node_id, const std::string& why, int64_t now) {
  spared_until_[node_id] = now + options_.evacuation_retry_ms;
  std::string line = WallNow() + " node " + node_id.substr(0, 8) + ": " + why;
  AIRT_LOG(WARNING) << "autoscaler: sparing idle " << line;
  snapshot_.spared.push_back(std::move(line));
  KeepLatest(snapshot_.spared);
}

void Autoscaler::Fail(const std::string& launch_id, std::string error, int64_t now) {
  auto it = launches_.find(launch_id);
  if (it == launches_.end()) return;
  std::string type = it->second.type;
  (void)provider_.Terminate(launch_id);
  uint32_t failures = ++failures_in_a_row_[type];
  int64_t delay = options_.min_backoff_ms;
  for (uint32_t i = 1; i < failures && delay < options_.max_backoff_ms; ++i) delay *= 2;
  delay = std::min(delay, options_.max_backoff_ms);
  backoff_until_[type] = now + delay;
  AIRT_LOG(WARNING) << "autoscaler: launch " << launch_id << " (" << type << ") failed: " << error
                    << "; next launch of " << type << " in " << delay << " ms";
  snapshot_.failed.push_back({launch_id, type, std::move(error), now, WallNow()});
  KeepLatest(snapshot_.failed);
  snapshot_.failed_total++;
  launches_.erase(it);
}

void Autoscaler::TerminateAll() {
  for (const auto& [launch, record] : launches_) {
    Status stopped = provider_.Terminate(launch);
    if (!stopped.ok()) AIRT_LOG(WARNING) << "autoscaler: stopping " << launch << ": "
                                         << stopped.message();
  }
  launches_.clear();
}

std::string Autoscaler::StatusText() const {
  std::string text = "Autoscaler: cluster " + config_.cluster_name + ", provider " +
                     config_.provider.type + ", max_workers " +
                     std::to_string(config_.max_workers) + "\n";
  auto section = [&](const char* title, const std::vector<std::string>& lines) {
    text += std::string(" ") + title + ":" + (lines.empty() ? " none\n" : "\n");
    for (const std::string& line : lines) text += "  " + line + "\n";
  };
  section("Pending demand", snapshot_.pending);
  std::vector<std::string> launching, running;
  for (const LaunchRecord& record : snapshot_.launches) {
    if (record.node_id.empty()) {
      launching.push_back(record.launch_id + " (" + record.type + "): " + record.reason);
    } else {
      running.push_back(record.launch_id + " (" + record.type + ") node " +
                        record.node_id.substr(0, 8) + ": launched " + record.reason);
    }
  }
  section("Launching", launching);
  section("Running (launched by the autoscaler)", running);
  std::vector<std::string> stopped, failed;
  for (const StopRecord& stop : snapshot_.stopped) {
    stopped.push_back(stop.when + " node " + stop.node_id.substr(0, 8) + " (" + stop.type +
                      "): " + stop.reason);
  }
  for (const FailedLaunch& fail : snapshot_.failed) {
    failed.push_back(fail.when + " " + fail.launch_id + " (" + fail.type + "): " + fail.error);
  }
  section("Evacuating (primary objects moving off idle nodes)", snapshot_.evacuating);
  section("Stopped (latest)", stopped);
  section("Spared (idle, primary objects not moved; latest)", snapshot_.spared);
  section("Failed launches (latest)", failed);
  section("Infeasible (no node type holds it)", snapshot_.infeasible);
  section("Held by max_workers", snapshot_.held_by_limits);
  return text;
}

kj::Promise<void> Autoscaler::Publish() {
  std::string text = StatusText();
  if (text == published_) return kj::READY_NOW;
  published_ = text;
  auto put = head_.kvPutRequest();
  put.setNamespace("autoscaler");
  put.setKey("status");
  put.setValue(capnp::Data::Reader(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  put.setOverwrite(true);
  return put.send().ignoreResult();
}

}  // namespace airt::autoscaler

namespace airt::autoscaler {
void Autoscaler::LogErrors::taskFailed(kj::Exception&& exception) {
  AIRT_LOG(WARNING) << "autoscaler: " << exception.getDescription().cStr();
}
}  // namespace airt::autoscaler
