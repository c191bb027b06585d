#include "head/internal/demand.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "common/rpc_status.h"
#include "common/scheduling_strategy.h"
#include "head/internal/placement_group_policy.h"
#include "head/internal/wire.h"

namespace airt::head::internal {
namespace {

std::vector<Resource> Sorted(std::vector<Resource> resources) {
  std::sort(resources.begin(), resources.end(),
            [](const Resource& a, const Resource& b) { return a.name < b.name; });
  return resources;
}

void Fill(const std::vector<Resource>& in, capnp::List<proto::Resource>::Builder out) {
  for (size_t i = 0; i < in.size(); ++i) {
    out[i].setName(in[i].name);
    out[i].setAmount(in[i].amount);
  }
}

}  // namespace

void AddShape(std::vector<ShapeCount>& shapes, std::vector<Resource> resources,
              std::string accelerator_type, uint32_t count) {
  resources = Sorted(std::move(resources));
  for (ShapeCount& shape : shapes) {
    if (shape.resources == resources && shape.accelerator_type == accelerator_type) {
      shape.count += count;
      return;
    }
  }
  shapes.push_back({std::move(resources), std::move(accelerator_type), count});
}

DemandRecord CollectDemand(const std::vector<NodeView>& nodes,
                           const std::vector<ActorRecord>& waiting_actors,
                           const std::vector<const PlacementGroupRecord*>& groups,
                           const ResourceRequest& requested) {
  DemandRecord demand;
  for (const NodeView& node : nodes) {
    if (!node.alive) continue;
    for (const ShapeCount& shape : node.load.queued) {
      AddShape(demand.queued, shape.resources, shape.accelerator_type, shape.count);
    }
  }
  for (const ActorRecord& actor : waiting_actors) {
    if (actor.state == ActorState::kDead || actor.state == ActorState::kAlive) continue;
    AddShape(demand.pending_actors, actor.resources, actor.accelerator_type, 1);
  }
  for (const PlacementGroupRecord* group : groups) {
    if (group->state != GroupState::kPending) continue;
    PendingGroupDemand pending{group->id, group->strategy, {}};
    for (const std::vector<Resource>& bundle : group->bundles) {
      pending.bundles.push_back(Sorted(bundle));
    }
    demand.pending_groups.push_back(std::move(pending));
  }
  demand.requested = requested;
  return demand;
}

Result<ResourceRequest> ParseResourceRequest(proto::Head::RequestResourcesParams::Reader params) {
  ResourceRequest request;
  auto bundles = params.getBundles();
  if (bundles.size() > kMaxListEntries) {
    return InvalidArgument("bundles has " + std::to_string(bundles.size()) +
                           " entries, more than the " + std::to_string(kMaxListEntries) +
                           " allowed");
  }
  for (size_t i = 0; i < bundles.size(); ++i) {
    AIRT_ASSIGN_OR_RETURN(std::vector<Resource> bundle,
                          ParseResources(bundles[i].getResources(),
                                         "bundles[" + std::to_string(i) + "].resources"));
    request.bundles.push_back(std::move(bundle));
  }
  auto selectors = params.getLabelSelectors();
  if (selectors.size() > bundles.size()) {
    return InvalidArgument("labelSelectors has " + std::to_string(selectors.size()) +
                           " entries, more than the " + std::to_string(bundles.size()) +
                           " bundles");
  }
  for (size_t i = 0; i < selectors.size(); ++i) {
    std::vector<Label> labels;
    std::set<std::string> keys;
    for (auto label : selectors[i].getLabels()) {
      std::string at = "labelSelectors[" + std::to_string(i) + "]";
      AIRT_ASSIGN_OR_RETURN(std::string key,
                            ParseText(label.getKey(), at + ".key", kMaxNameBytes, false));
      AIRT_ASSIGN_OR_RETURN(std::string value, ParseText(label.getValue(), at + ".value",
                                                         kMaxLabelValueBytes, true));
      if (!keys.insert(key).second) return InvalidArgument(at + " lists '" + key + "' twice");
      labels.push_back({std::move(key), std::move(value)});
    }
    std::map<std::string, std::string> dict;
    for (const Label& l : labels) dict[l.key] = l.value;
    Result<sched::LabelSelector> parsed = sched::ParseLabelSelector(dict);
    if (!parsed.ok()) {
      return parsed.status().WithContext("labelSelectors[" + std::to_string(i) + "]");
    }
    request.selectors.push_back(std::move(labels));
  }
  return request;
}

std::vector<NodeInfo> ParseNodeTypes(std::string_view text) {
  std::vector<NodeInfo> types;
  auto split = [](std::string_view s, char sep) {
    std::vector<std::string_view> parts;
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(sep, start);
      if (end == std::string_view::npos) end = s.size();
      if (end > start) parts.push_back(s.substr(start, end - start));
      start = end + 1;
    }
    return parts;
  };
  for (std::string_view line : split(text, '\n')) {
    std::vector<std::string_view> fields;
    size_t start = 0;
    for (size_t tab = line.find('\t'); tab != std::string_view::npos; tab = line.find('\t', start)) {
      fields.push_back(line.substr(start, tab - start));
      start = tab + 1;
    }
    fields.push_back(line.substr(start));
    if (fields.size() < 2) continue;
    NodeInfo type;
    type.address = std::string(fields[0]);  // the type's name, for messages
    bool ok = true;
    for (std::string_view pair : split(fields[1], ',')) {
      size_t eq = pair.find('=');
      if (eq == std::string_view::npos) {
        ok = false;
        break;
      }
      try {
        type.total.push_back({std::string(pair.substr(0, eq)),
                              std::stod(std::string(pair.substr(eq + 1)))});
      } catch (const std::exception&) {
        ok = false;
        break;
      }
    }
    if (fields.size() > 2) {
      for (std::string_view pair : split(fields[2], ',')) {
        size_t eq = pair.find('=');
        if (eq == std::string_view::npos) continue;
        type.labels.push_back({std::string(pair.substr(0, eq)), std::string(pair.substr(eq + 1))});
      }
    }
    if (ok) types.push_back(std::move(type));
  }
  return types;
}

std::string NodeTypeHolding(const std::vector<NodeInfo>& types,
                            const std::vector<Resource>& resources,
                            const std::string& accelerator_type) {
  for (const NodeInfo& type : types) {
    bool holds = true;
    for (const Resource& want : resources) {
      if (want.amount <= 0) continue;
      double have = 0;
      for (const Resource& r : type.total) have += r.name == want.name ? r.amount : 0;
      holds &= have + 1e-9 >= want.amount;
    }
    if (!accelerator_type.empty()) {
      bool labelled = false;
      for (const Label& l : type.labels) {
        labelled |= (l.key == "accelerator_type" || l.key == "ray.io/accelerator-type") &&
                    l.value == accelerator_type;
      }
      holds &= labelled;
    }
    if (holds) return type.address;
  }
  return "";
}

bool NodeTypesHoldGroup(const std::vector<NodeInfo>& types, PlacementStrategy strategy,
                        const std::vector<std::vector<Resource>>& bundles,
                        const std::vector<sched::LabelSelector>& selectors) {
  if (types.empty() || bundles.empty()) return false;
  std::vector<BundleNode> nodes;
  for (const NodeInfo& type : types) {
    for (size_t i = 0; i < bundles.size(); ++i) {
      BundleNode node{NodeId::FromRandom(), ToBundleUnits(type.total), {}, {}};
      node.free = node.total;
      for (const Label& l : type.labels) node.labels[l.key] = l.value;
      nodes.push_back(std::move(node));
    }
  }
  return std::holds_alternative<BundlesOn>(DecideBundles(strategy, bundles, nodes, selectors));
}

void FillDemand(const DemandRecord& demand, uint64_t version, proto::Demand::Builder out) {
  out.setVersion(version);
  FillShapeCounts(demand.queued, out.initQueued(demand.queued.size()));
  FillShapeCounts(demand.pending_actors, out.initPendingActors(demand.pending_actors.size()));
  auto groups = out.initPendingGroups(demand.pending_groups.size());
  for (size_t i = 0; i < demand.pending_groups.size(); ++i) {
    const PendingGroupDemand& group = demand.pending_groups[i];
    groups[i].setGroupId(capnp::Data::Reader(group.id.data(), PlacementGroupId::kSize));
    groups[i].setStrategy(static_cast<proto::PlacementStrategy>(group.strategy));
    auto bundles = groups[i].initBundles(group.bundles.size());
    for (size_t b = 0; b < group.bundles.size(); ++b) {
      Fill(group.bundles[b], bundles[b].initResources(group.bundles[b].size()));
    }
  }
  const ResourceRequest& requested = demand.requested;
  auto bundles = out.initRequested(requested.bundles.size());
  for (size_t b = 0; b < requested.bundles.size(); ++b) {
    Fill(requested.bundles[b], bundles[b].initResources(requested.bundles[b].size()));
  }
  auto selectors = out.initRequestedSelectors(requested.selectors.size());
  for (size_t s = 0; s < requested.selectors.size(); ++s) {
    auto labels = selectors[s].initLabels(requested.selectors[s].size());
    for (size_t l = 0; l < requested.selectors[s].size(); ++l) {
      labels[l].setKey(requested.selectors[s][l].key);
      labels[l].setValue(requested.selectors[s][l].value);
    }
  }
}

std::string EncodeResourceRequestRow(const ResourceRequest& request) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<proto::Head::RequestResourcesParams>();
  auto bundles = out.initBundles(request.bundles.size());
  for (size_t b = 0; b < request.bundles.size(); ++b) {
    Fill(request.bundles[b], bundles[b].initResources(request.bundles[b].size()));
  }
  auto selectors = out.initLabelSelectors(request.selectors.size());
  for (size_t s = 0; s < request.selectors.size(); ++s) {
    auto labels = selectors[s].initLabels(request.selectors[s].size());
    for (size_t l = 0; l < request.selectors[s].size(); ++l) {
      labels[l].setKey(request.selectors[s][l].key);
      labels[l].setValue(request.selectors[s][l].value);
    }
  }
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

Result<ResourceRequest> DecodeResourceRequestRow(std::string_view bytes) {
  auto corrupt = [](const std::string& why) {
    return Internal("corrupt request_resources row in the metadata store: " + why);
  };
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return corrupt(std::to_string(bytes.size()) + " bytes is not a whole message");
  }
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  std::optional<Result<ResourceRequest>> request;
  Status thrown = CatchKj([&] {
    capnp::FlatArrayMessageReader reader(words);
    request.emplace(ParseResourceRequest(reader.getRoot<proto::Head::RequestResourcesParams>()));
  });
  if (!thrown.ok()) return corrupt(thrown.message());
  if (!request->ok()) return corrupt(request->status().message());
  return std::move(*request);
}

}  // namespace airt::head::internal
