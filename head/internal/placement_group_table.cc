#include "head/internal/placement_group_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <tuple>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "common/strategy_wire.h"
#include "common/logging.h"
#include "common/rpc_status.h"
#include "common/bundle_resources.h"
#include "head/internal/placement_group_policy.h"
#include "head/internal/wire.h"

namespace airt::head::internal {
namespace {

constexpr std::string_view kGroupPrefix = "pg:";
constexpr size_t kMaxBundles = 4096;
constexpr size_t kMaxBundleResources = 256;

capnp::Data::Reader AsData(const uint8_t* data, size_t size) {
  return capnp::Data::Reader(data, size);
}

std::string EncodeRow(const PlacementGroupRecord& group) {
  capnp::MallocMessageBuilder message;
  FillPlacementGroupInfo(group, message.initRoot<proto::PlacementGroupInfo>());
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

Result<PlacementGroupRecord> DecodeRow(std::string_view bytes) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return Internal("corrupt placement group row: " + std::to_string(bytes.size()) + " bytes");
  }
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  std::optional<Result<PlacementGroupRecord>> row;
  Status thrown = CatchKj([&] {
    capnp::FlatArrayMessageReader reader(words);
    auto info = reader.getRoot<proto::PlacementGroupInfo>();
    Result<PlacementGroupRecord> group = ParsePlacementGroupSpec(info);
    if (group.ok()) {
      auto id = info.getGroupId();
      Result<PlacementGroupId> parsed = PlacementGroupId::FromBinary(
          std::string_view(reinterpret_cast<const char*>(id.begin()), id.size()));
      if (!parsed.ok()) {
        group = parsed.status();
      } else {
        group->id = *parsed;
        group->create_ms = info.getCreateMs();
        switch (info.getState()) {
          case proto::PlacementGroupState::REMOVED: group->state = GroupState::kRemoved; break;
          case proto::PlacementGroupState::CREATED: group->state = GroupState::kCreated; break;
          case proto::PlacementGroupState::RESCHEDULING:
            group->state = GroupState::kRescheduling;
            break;
          default: group->state = GroupState::kPending; break;
        }
        if (group->state == GroupState::kCreated || group->state == GroupState::kRescheduling) {
          auto nodes = info.getBundleNodes();
          for (auto node : nodes) {
            Result<NodeId> n = NodeId::FromBinary(
                std::string_view(reinterpret_cast<const char*>(node.begin()), node.size()));
            if (!n.ok()) {
              group = n.status();
              break;
            }
            group->bundle_nodes.push_back(*n);
          }
          if (group.ok() && group->bundle_nodes.size() != group->bundles.size()) {
            group = Internal("bundleNodes: " + std::to_string(group->bundle_nodes.size()) +
                             " nodes for " + std::to_string(group->bundles.size()) + " bundles");
          }
        }
      }
    }
    row.emplace(std::move(group));
  });
  if (!thrown.ok()) return Internal("corrupt placement group row: " + thrown.message());
  if (!row->ok()) return Internal("corrupt placement group row: " + row->status().message());
  return std::move(*row);
}

}  // namespace

const char* StrategyName(PlacementStrategy strategy) {
  switch (strategy) {
    case PlacementStrategy::kPack: return "PACK";
    case PlacementStrategy::kSpread: return "SPREAD";
    case PlacementStrategy::kStrictPack: return "STRICT_PACK";
    case PlacementStrategy::kStrictSpread: return "STRICT_SPREAD";
  }
  return "?";
}

const char* GroupStateName(GroupState state) {
  switch (state) {
    case GroupState::kPending: return "PENDING";
    case GroupState::kCreated: return "CREATED";
    case GroupState::kRemoved: return "REMOVED";
    case GroupState::kRescheduling: return "RESCHEDULING";
  }
  return "?";
}

Result<PlacementGroupRecord> ParsePlacementGroupSpec(proto::PlacementGroupInfo::Reader info) {
  PlacementGroupRecord group;
  AIRT_ASSIGN_OR_RETURN(group.name, ParseText(info.getName(), "info.name", kMaxNameBytes, true));
  AIRT_ASSIGN_OR_RETURN(group.ns,
                        ParseText(info.getNamespace(), "info.namespace", kMaxNameBytes, true));
  AIRT_ASSIGN_OR_RETURN(group.job, ParseJobId(info.getJobId(), "info.jobId"));
  auto strategy = static_cast<uint16_t>(info.getStrategy());
  if (strategy > static_cast<uint16_t>(PlacementStrategy::kStrictSpread)) {
    return InvalidArgument("info.strategy: unknown value " + std::to_string(strategy));
  }
  group.strategy = static_cast<PlacementStrategy>(strategy);
  auto bundles = info.getBundles();
  if (bundles.size() == 0 || bundles.size() > kMaxBundles) {
    return InvalidArgument("info.bundles: " + std::to_string(bundles.size()) +
                           " bundles; a placement group has 1 to " + std::to_string(kMaxBundles));
  }
  for (size_t i = 0; i < bundles.size(); ++i) {
    std::string field = "info.bundles[" + std::to_string(i) + "]";
    auto list = bundles[i].getResources();
    if (list.size() > kMaxBundleResources) {
      return InvalidArgument(field + ": more than " + std::to_string(kMaxBundleResources) +
                             " resources");
    }
    AIRT_ASSIGN_OR_RETURN(std::vector<Resource> resources, ParseResources(list, field));
    std::erase_if(resources, [](const Resource& r) { return r.amount <= 0; });
    if (resources.empty()) {
      return InvalidArgument(field + " is empty: a bundle asks for a positive amount of some "
                             "resource (as Ray requires)");
    }
    for (const Resource& r : resources) {
      if (r.name.find("_group_") != std::string::npos) {
        return InvalidArgument(field + ": '" + r.name + "' is a bundle's own resource name");
      }
    }
    group.bundles.push_back(std::move(resources));
  }
  auto selectors = info.getBundleLabelSelector();
  if (selectors.size() > bundles.size()) {
    return InvalidArgument("info.bundleLabelSelector: " + std::to_string(selectors.size()) +
                           " selectors for " + std::to_string(bundles.size()) + " bundles");
  }
  for (size_t i = 0; i < selectors.size(); ++i) {
    AIRT_ASSIGN_OR_RETURN(sched::LabelSelector selector,
                          ReadLabelSelector(selectors[i].getExpressions(),
                                            "info.bundleLabelSelector[" + std::to_string(i) + "]"));
    group.bundle_label_selector.push_back(std::move(selector));
  }
  group.detached = info.getDetached();
  return group;
}

void FillPlacementGroupInfo(const PlacementGroupRecord& group,
                            proto::PlacementGroupInfo::Builder out) {
  out.setGroupId(AsData(group.id.data(), PlacementGroupId::kSize));
  out.setName(group.name);
  out.setNamespace(group.ns);
  out.setJobId(AsData(group.job.data(), JobId::kSize));
  out.setStrategy(static_cast<proto::PlacementStrategy>(group.strategy));
  auto selectors = out.initBundleLabelSelector(group.bundle_label_selector.size());
  for (size_t i = 0; i < group.bundle_label_selector.size(); ++i) {
    const sched::LabelSelector& selector = group.bundle_label_selector[i];
    WriteLabelSelector(selector, selectors[i].initExpressions(selector.size()));
  }
  auto bundles = out.initBundles(group.bundles.size());
  for (size_t i = 0; i < group.bundles.size(); ++i) {
    auto list = bundles[i].initResources(group.bundles[i].size());
    for (size_t j = 0; j < group.bundles[i].size(); ++j) {
      list[j].setName(group.bundles[i][j].name);
      list[j].setAmount(group.bundles[i][j].amount);
    }
  }
  out.setState(static_cast<proto::PlacementGroupState>(group.state));
  auto nodes = out.initBundleNodes(group.bundle_nodes.size());
  for (size_t i = 0; i < group.bundle_nodes.size(); ++i) {
    nodes.set(i, AsData(group.bundle_nodes[i].data(), NodeId::kSize));
  }
  out.setDetached(group.detached);
  out.setPendingReason(group.pending_reason);
  out.setInfeasible(group.infeasible);
  out.setCreateMs(group.create_ms);
}

Result<std::vector<std::pair<PlacementGroupId, std::vector<uint32_t>>>> ParseHeldBundles(
    capnp::List<proto::HeldBundles>::Reader held) {
  std::vector<std::pair<PlacementGroupId, std::vector<uint32_t>>> out;
  std::set<PlacementGroupId> seen;
  for (size_t i = 0; i < held.size(); ++i) {
    std::string field = "heldBundles[" + std::to_string(i) + "]";
    auto bytes = held[i].getGroupId();
    Result<PlacementGroupId> id = PlacementGroupId::FromBinary(
        std::string_view(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
    if (!id.ok()) return InvalidArgument(field + ".groupId: " + id.status().message());
    if (!seen.insert(*id).second) return InvalidArgument(field + ": group listed twice");
    auto indices = held[i].getIndices();
    if (indices.size() > kMaxBundles) return InvalidArgument(field + ".indices: too many");
    std::vector<uint32_t> list;
    for (uint32_t index : indices) {
      if (index >= kMaxBundles) {
        return InvalidArgument(field + ".indices: " + std::to_string(index) + " is out of range");
      }
      list.push_back(index);
    }
    out.emplace_back(*id, std::move(list));
  }
  return out;
}

std::string PlacementGroupTable::RowKey(const PlacementGroupId& id) {
  return std::string(kGroupPrefix) + id.Hex();
}

Status PlacementGroupTable::Load() {
  AIRT_ASSIGN_OR_RETURN(std::vector<Row> rows, store_.Scan(kGroupPrefix));
  std::vector<PlacementGroupRecord> loaded;
  for (const Row& row : rows) {
    Result<PlacementGroupRecord> group = DecodeRow(row.value);
    if (group.ok() && row.key != RowKey(group->id)) {
      group = Internal("the row's group id " + group->id.Hex() + " does not match its key");
    }
    if (!group.ok()) {
      AIRT_LOG(ERROR) << "skipping metadata row '" << row.key << "': " << group.status().message();
      continue;
    }
    loaded.push_back(std::move(*group));
  }
  std::sort(loaded.begin(), loaded.end(), [](const auto& a, const auto& b) {
    return std::tie(a.create_ms, a.id) < std::tie(b.create_ms, b.id);
  });
  for (PlacementGroupRecord& group : loaded) {
    uint64_t seq = next_seq_++;
    seq_of_[group.id] = seq;
    Apply(seq, std::move(group));
  }
  return Status::Ok();
}

void PlacementGroupTable::Apply(uint64_t seq, PlacementGroupRecord group) {
  auto holds = [](const PlacementGroupRecord& g) {
    return g.state == GroupState::kCreated || g.state == GroupState::kRescheduling;
  };
  auto was = by_seq_.find(seq);
  bool held_before = was != by_seq_.end() && holds(was->second);
  if (held_before || holds(group)) {
    if (!held_before || !holds(group) || was->second.bundle_nodes != group.bundle_nodes) {
      if (held_before) Account(was->second, -1);
      if (holds(group)) Account(group, 1);
    }
  }
  if (group.state == GroupState::kRemoved) {
    live_.erase(seq);
  } else {
    live_.insert(seq);
  }
  by_seq_[seq] = std::move(group);
}

void PlacementGroupTable::Account(const PlacementGroupRecord& group, int sign) {
  std::string hex = group.id.Hex();
  for (size_t i = 0; i < group.bundle_nodes.size() && i < group.bundles.size(); ++i) {
    const NodeId& node = group.bundle_nodes[i];
    if (node.IsNil()) continue;
    std::map<std::string, double> amounts;
    for (const Resource& r : group.bundles[i]) amounts[r.name] += r.amount;
    std::map<std::string, double>& names = bundle_resources_[node];
    for (const auto& [name, amount] :
         CommittedBundleResources(hex, static_cast<int64_t>(i), amounts)) {
      auto it = names.emplace(name, 0.0).first;
      it->second += sign * amount;
      // Every name holds the group's hex: taking the group away leaves only rounding.
      if (sign < 0 && std::abs(it->second) < 1e-9) names.erase(it);
    }
    if (names.empty()) bundle_resources_.erase(node);
    auto& units = reserved_units_[node];
    for (const auto& [name, n] : ToBundleUnits(group.bundles[i])) {
      auto it = units.emplace(name, 0).first;
      it->second += sign * n;
      if (it->second == 0) units.erase(it);
    }
    if (units.empty()) reserved_units_.erase(node);
  }
}

Result<Staged<PlacementGroupId>> PlacementGroupTable::Create(PlacementGroupRecord group) {
  if (!group.name.empty()) {
    for (const auto& [seq, other] : by_seq_) {
      if (other.state != GroupState::kRemoved && other.ns == group.ns &&
          other.name == group.name) {
        return AlreadyExists("placement group '" + group.name + "' exists in namespace '" +
                             group.ns + "' (" + other.id.Hex() + ")");
      }
    }
  }
  group.id = PlacementGroupId::FromRandom();
  group.state = GroupState::kPending;
  group.bundle_nodes.clear();
  Staged<PlacementGroupId> staged{group.id, {}};
  staged.change.what = "creating placement group " + group.id.Hex();
  staged.change.rows.Put(RowKey(group.id), EncodeRow(group));
  staged.change.on_written.push_back([this, group = std::move(group)]() mutable {
    uint64_t seq = next_seq_++;
    seq_of_[group.id] = seq;
    Apply(seq, std::move(group));
  });
  return staged;
}

Result<Change> PlacementGroupTable::MarkPlaced(const PlacementGroupId& id,
                                               const std::map<uint32_t, NodeId>& placed) {
  auto it = seq_of_.find(id);
  if (it == seq_of_.end()) return NotFound("no placement group " + id.Hex());
  PlacementGroupRecord group = by_seq_.at(it->second);
  if (group.state != GroupState::kPending && group.state != GroupState::kRescheduling) {
    return FailedPrecondition("placement group " + id.Hex() + " is " +
                              GroupStateName(group.state) + ", not PENDING or RESCHEDULING");
  }
  group.bundle_nodes.resize(group.bundles.size(), NodeId::Nil());
  for (const auto& [index, node] : placed) {
    if (index >= group.bundle_nodes.size() || !group.bundle_nodes[index].IsNil()) {
      return FailedPrecondition("placement group " + id.Hex() + ": bundle " +
                                std::to_string(index) + " is not waiting for a node");
    }
    group.bundle_nodes[index] = node;
  }
  bool all = std::none_of(group.bundle_nodes.begin(), group.bundle_nodes.end(),
                          [](const NodeId& n) { return n.IsNil(); });
  group.state = all ? GroupState::kCreated : GroupState::kRescheduling;
  if (all) {
    group.pending_reason.clear();
    group.infeasible = false;
  }
  Change change;
  change.what = "recording placement group " + id.Hex() + " " + GroupStateName(group.state);
  change.rows.Put(RowKey(id), EncodeRow(group));
  change.on_written.push_back([this, seq = it->second, group = std::move(group)]() mutable {
    Apply(seq, std::move(group));
  });
  return change;
}

Result<Change> PlacementGroupTable::MarkLost(
    const PlacementGroupId& id, const std::function<bool(size_t, const NodeId&)>& lost_here,
    const std::string& why) {
  auto it = seq_of_.find(id);
  if (it == seq_of_.end()) return NotFound("no placement group " + id.Hex());
  PlacementGroupRecord group = by_seq_.at(it->second);
  Change change;
  if (group.state != GroupState::kCreated && group.state != GroupState::kRescheduling) {
    return change;
  }
  bool lost = false;
  for (size_t i = 0; i < group.bundle_nodes.size(); ++i) {
    NodeId& node = group.bundle_nodes[i];
    if (!node.IsNil() && lost_here(i, node)) {
      node = NodeId::Nil();
      lost = true;
    }
  }
  if (!lost) return change;
  group.state = GroupState::kRescheduling;
  group.pending_reason = why;
  change.what = "recording placement group " + id.Hex() + " RESCHEDULING";
  change.rows.Put(RowKey(id), EncodeRow(group));
  change.on_written.push_back([this, seq = it->second, group = std::move(group)]() mutable {
    Apply(seq, std::move(group));
  });
  return change;
}

Result<Change> PlacementGroupTable::MarkRemoved(const PlacementGroupId& id) {
  auto it = seq_of_.find(id);
  if (it == seq_of_.end()) return NotFound("no placement group " + id.Hex());
  PlacementGroupRecord group = by_seq_.at(it->second);
  Change change;
  if (group.state == GroupState::kRemoved) return change;
  group.state = GroupState::kRemoved;
  group.pending_reason.clear();
  group.infeasible = false;
  change.what = "removing placement group " + id.Hex();
  change.rows.Put(RowKey(id), EncodeRow(group));
  change.on_written.push_back([this, seq = it->second, group = std::move(group)]() mutable {
    Apply(seq, std::move(group));
  });
  return change;
}

void PlacementGroupTable::SetPending(const PlacementGroupId& id, std::string reason,
                                     bool infeasible) {
  auto it = seq_of_.find(id);
  if (it == seq_of_.end()) return;
  PlacementGroupRecord& group = by_seq_.at(it->second);
  group.pending_reason = std::move(reason);
  group.infeasible = infeasible;
}

std::optional<PlacementGroupRecord> PlacementGroupTable::Find(const PlacementGroupId& id) const {
  const PlacementGroupRecord* group = Get(id);
  if (group == nullptr) return std::nullopt;
  return *group;
}

const PlacementGroupRecord* PlacementGroupTable::Get(const PlacementGroupId& id) const {
  auto it = seq_of_.find(id);
  if (it == seq_of_.end()) return nullptr;
  return &by_seq_.at(it->second);
}

std::vector<const PlacementGroupRecord*> PlacementGroupTable::Live() const {
  std::vector<const PlacementGroupRecord*> out;
  out.reserve(live_.size());
  for (uint64_t seq : live_) out.push_back(&by_seq_.at(seq));
  return out;
}

std::vector<PlacementGroupRecord> PlacementGroupTable::List() const {
  std::vector<PlacementGroupRecord> out;
  for (const auto& [seq, group] : by_seq_) out.push_back(group);
  return out;
}

std::vector<PlacementGroupId> PlacementGroupTable::Pending() const {
  std::vector<PlacementGroupId> out;
  for (uint64_t seq : live_) {
    const PlacementGroupRecord& group = by_seq_.at(seq);
    if (group.state == GroupState::kPending || group.state == GroupState::kRescheduling) {
      out.push_back(group.id);
    }
  }
  return out;
}

}  // namespace airt::head::internal
