#include "common/strategy_wire.h"

#include <string>

namespace airt {

using namespace sched;  // NOLINT(google-build-using-namespace): this file is its wire form

namespace {

constexpr size_t kMaxExpressions = 64;
constexpr size_t kMaxValues = 256;
constexpr size_t kMaxTextBytes = 1024;

Result<std::string> ReadText(capnp::Text::Reader text, const std::string& field) {
  std::string_view view(text.cStr(), text.size());
  if (view.size() > kMaxTextBytes || view.find('\0') != std::string_view::npos) {
    return InvalidArgument(field + ": at most " + std::to_string(kMaxTextBytes) +
                           " bytes without NUL");
  }
  return std::string(view);
}

}  // namespace

void WriteLabelSelector(const LabelSelector& selector,
                        capnp::List<proto::LabelExpression>::Builder out) {
  for (size_t i = 0; i < selector.size(); ++i) {
    const LabelExpression& e = selector[i];
    auto b = out[static_cast<uint>(i)];
    b.setKey(e.key);
    b.setOp(static_cast<proto::LabelOperator>(e.op));
    auto values = b.initValues(static_cast<uint>(e.values.size()));
    for (size_t j = 0; j < e.values.size(); ++j) values.set(static_cast<uint>(j), e.values[j]);
  }
}

Result<LabelSelector> ReadLabelSelector(capnp::List<proto::LabelExpression>::Reader in,
                                        std::string_view field) {
  std::string name(field);
  if (in.size() > kMaxExpressions) {
    return InvalidArgument(name + ": more than " + std::to_string(kMaxExpressions) +
                           " expressions");
  }
  LabelSelector out;
  for (size_t i = 0; i < in.size(); ++i) {
    auto e = in[static_cast<uint>(i)];
    std::string at = name + "[" + std::to_string(i) + "]";
    LabelExpression expression;
    AIRT_ASSIGN_OR_RETURN(expression.key, ReadText(e.getKey(), at + ".key"));
    auto op = static_cast<uint16_t>(e.getOp());
    if (op > static_cast<uint16_t>(LabelOperator::kDoesNotExist)) {
      return InvalidArgument(at + ".op: unknown operator " + std::to_string(op));
    }
    expression.op = static_cast<LabelOperator>(op);
    if (e.getValues().size() > kMaxValues) {
      return InvalidArgument(at + ".values: more than " + std::to_string(kMaxValues));
    }
    for (auto v : e.getValues()) {
      AIRT_ASSIGN_OR_RETURN(std::string value, ReadText(v, at + ".values"));
      expression.values.push_back(std::move(value));
    }
    out.push_back(std::move(expression));
  }
  AIRT_RETURN_IF_ERROR(ValidateLabelSelector(out, field));
  return out;
}

void WriteStrategy(const SchedulingStrategy& strategy, proto::SchedulingStrategy::Builder out) {
  out.setKind(static_cast<proto::StrategyKind>(strategy.kind));
  if (strategy.kind == StrategyKind::kNodeAffinity) {
    std::string node = strategy.node.Binary();
    out.setNodeId(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(node.data()),
                                      node.size()));
  }
  out.setSoft(strategy.soft);
  out.setSpillOnUnavailable(strategy.spill_on_unavailable);
  out.setFailOnUnavailable(strategy.fail_on_unavailable);
  WriteLabelSelector(strategy.hard_labels,
                     out.initHardLabels(static_cast<uint>(strategy.hard_labels.size())));
  WriteLabelSelector(strategy.soft_labels,
                     out.initSoftLabels(static_cast<uint>(strategy.soft_labels.size())));
  WriteLabelSelector(strategy.label_selector,
                     out.initLabelSelector(static_cast<uint>(strategy.label_selector.size())));
}

Result<SchedulingStrategy> ReadStrategy(proto::SchedulingStrategy::Reader in,
                                        std::string_view field) {
  std::string name(field);
  SchedulingStrategy out;
  auto kind = static_cast<uint16_t>(in.getKind());
  if (kind > static_cast<uint16_t>(StrategyKind::kNodeLabel)) {
    return InvalidArgument(name + ".kind: unknown kind " + std::to_string(kind));
  }
  out.kind = static_cast<StrategyKind>(kind);
  if (out.kind == StrategyKind::kNodeAffinity) {
    auto id = in.getNodeId();
    Result<NodeId> node = NodeId::FromBinary(
        std::string_view(reinterpret_cast<const char*>(id.begin()), id.size()));
    if (!node.ok()) return InvalidArgument(name + ".nodeId: " + node.status().message());
    out.node = *node;
  }
  out.soft = in.getSoft();
  out.spill_on_unavailable = in.getSpillOnUnavailable();
  out.fail_on_unavailable = in.getFailOnUnavailable();
  AIRT_ASSIGN_OR_RETURN(out.hard_labels, ReadLabelSelector(in.getHardLabels(), name + ".hardLabels"));
  AIRT_ASSIGN_OR_RETURN(out.soft_labels, ReadLabelSelector(in.getSoftLabels(), name + ".softLabels"));
  AIRT_ASSIGN_OR_RETURN(out.label_selector,
                        ReadLabelSelector(in.getLabelSelector(), name + ".labelSelector"));
  return out;
}

}  // namespace airt
