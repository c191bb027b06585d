// airt._airt's side of scheduling strategies: the tuple airt._private.options makes of a
// .options(scheduling_strategy=..., label_selector=...) into the C++ API's strategy
// (airt/scheduling_strategies.h), which the schedulers decide.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "airt/api.h"

namespace py = pybind11;

namespace {

std::vector<airt::LabelMatchExpression> Expressions(const py::list& list) {
  std::vector<airt::LabelMatchExpression> out;
  for (const py::handle& item : list) {
    auto [key, op, values] = item.cast<std::tuple<std::string, int, std::vector<std::string>>>();
    if (op < 0 || op > static_cast<int>(airt::LabelOperator::kDoesNotExist)) {
      throw py::value_error("unknown label operator " + std::to_string(op));
    }
    out.push_back({key, static_cast<airt::LabelOperator>(op), values});
  }
  return out;
}

}  // namespace

// `strategy`: None (DEFAULT), ("SPREAD",), ("NODE_AFFINITY", node hex, soft, spill on
// unavailable, fail on unavailable), or ("NODE_LABEL", hard, soft) with each a list of
// (key, LabelOperator value, values).
void ApplyStrategy(const py::object& strategy, const std::map<std::string, std::string>& selector,
                   airt::SchedulingStrategy* out, airt::LabelSelector* label_selector) {
  *label_selector = selector;
  if (strategy.is_none()) return;
  auto parts = strategy.cast<py::tuple>();
  auto kind = parts[0].cast<std::string>();
  if (kind == "SPREAD") {
    *out = airt::SpreadSchedulingStrategy{};
  } else if (kind == "NODE_AFFINITY") {
    *out = airt::NodeAffinitySchedulingStrategy{parts[1].cast<std::string>(), parts[2].cast<bool>(),
                                                parts[3].cast<bool>(), parts[4].cast<bool>()};
  } else if (kind == "NODE_LABEL") {
    *out = airt::NodeLabelSchedulingStrategy{Expressions(parts[1].cast<py::list>()),
                                             Expressions(parts[2].cast<py::list>())};
  } else if (kind != "DEFAULT") {
    throw py::value_error("unknown scheduling strategy kind " + kind);
  }
}
