// SchedulingStrategy (common/scheduling_strategy.h) to and from its wire form, cluster.capnp's
// SchedulingStrategy and LabelExpression lists. Reading validates (the receiving edge's check).
#pragma once

#include <string_view>

#include "common/proto/cluster.capnp.h"
#include "common/scheduling_strategy.h"
#include "common/status.h"

namespace airt {

void WriteStrategy(const sched::SchedulingStrategy& strategy, proto::SchedulingStrategy::Builder out);
// kInvalidArgument naming `field` for an unknown kind or operator, a node id that is not 28
// bytes for nodeAffinity, or an expression ValidateLabelSelector refuses.
Result<sched::SchedulingStrategy> ReadStrategy(proto::SchedulingStrategy::Reader in,
                                        std::string_view field);

void WriteLabelSelector(const sched::LabelSelector& selector,
                        capnp::List<proto::LabelExpression>::Builder out);
Result<sched::LabelSelector> ReadLabelSelector(capnp::List<proto::LabelExpression>::Reader in,
                                        std::string_view field);

}  // namespace airt
