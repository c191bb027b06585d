#include "common/scheduling_strategy.h"

#include <algorithm>

namespace airt::sched {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// "in(a,b)" -> {a, b}; nullopt-like empty result with ok=false when malformed.
Result<std::vector<std::string>> ParseIn(std::string_view key, std::string_view text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("label_selector[" + std::string(key) + "]: " + why);
  };
  if (text.size() < 4 || text.substr(0, 3) != "in(" || text.back() != ')') {
    return bad("'" + std::string(text) + "' is not in(value, ...)");
  }
  std::vector<std::string> values;
  std::string_view rest = text.substr(3, text.size() - 4);
  while (true) {
    size_t comma = rest.find(',');
    std::string_view value = Trim(rest.substr(0, comma));
    if (value.empty()) return bad("in(...) holds an empty value");
    values.emplace_back(value);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return values;
}

const char* OperatorName(LabelOperator op) {
  switch (op) {
    case LabelOperator::kIn: return "in";
    case LabelOperator::kNotIn: return "not in";
    case LabelOperator::kExists: return "exists";
    case LabelOperator::kDoesNotExist: return "does not exist";
  }
  return "?";
}

}  // namespace

bool LabelsMatch(const LabelSelector& selector, const LabelLookup& lookup) {
  for (const LabelExpression& e : selector) {
    const std::string* value = lookup(e.key);
    bool listed =
        value != nullptr && std::find(e.values.begin(), e.values.end(), *value) != e.values.end();
    bool holds = false;
    switch (e.op) {
      case LabelOperator::kIn: holds = listed; break;
      case LabelOperator::kNotIn: holds = !listed; break;
      case LabelOperator::kExists: holds = value != nullptr; break;
      case LabelOperator::kDoesNotExist: holds = value == nullptr; break;
    }
    if (!holds) return false;
  }
  return true;
}

LabelLookup NodeLabelLookup(const std::map<std::string, std::string, std::less<>>& labels,
                            const std::string& node_hex) {
  return [&labels, &node_hex](std::string_view key) -> const std::string* {
    if (auto it = labels.find(key); it != labels.end()) return &it->second;
    if (key == kNodeIdLabel) return &node_hex;
    if (key == kAcceleratorTypeShortKey) {
      if (auto it = labels.find(kAcceleratorTypeLabelKey); it != labels.end()) return &it->second;
    }
    return nullptr;
  };
}

Result<LabelSelector> ParseLabelSelector(const std::map<std::string, std::string>& selector) {
  LabelSelector out;
  for (const auto& [key, raw] : selector) {
    if (Trim(key).empty()) return InvalidArgument("label_selector: a key is empty");
    std::string_view text = Trim(raw);
    LabelExpression e;
    e.key = std::string(Trim(key));
    bool negated = !text.empty() && text.front() == '!';
    if (negated) text.remove_prefix(1);
    text = Trim(text);
    if (text.empty()) {
      return InvalidArgument("label_selector[" + e.key + "]: the value is empty");
    }
    if (text.size() >= 3 && text.substr(0, 3) == "in(") {
      AIRT_ASSIGN_OR_RETURN(e.values, ParseIn(e.key, text));
    } else {
      if (text.find_first_of("(),") != std::string_view::npos) {
        return InvalidArgument("label_selector[" + e.key + "]: '" + raw +
                               "' is not a value, !value, in(a, b) or !in(a, b)");
      }
      e.values.emplace_back(text);
    }
    e.op = negated ? LabelOperator::kNotIn : LabelOperator::kIn;
    out.push_back(std::move(e));
  }
  return out;
}

Status ValidateLabelSelector(const LabelSelector& selector, std::string_view what) {
  for (const LabelExpression& e : selector) {
    if (e.key.empty()) return InvalidArgument(std::string(what) + ": a label key is empty");
    bool wants_values = e.op == LabelOperator::kIn || e.op == LabelOperator::kNotIn;
    if (wants_values && e.values.empty()) {
      return InvalidArgument(std::string(what) + ": label " + e.key + " " + OperatorName(e.op) +
                             " needs at least one value");
    }
    if (!wants_values && !e.values.empty()) {
      return InvalidArgument(std::string(what) + ": label " + e.key + " " + OperatorName(e.op) +
                             " takes no values");
    }
  }
  return Status::Ok();
}

std::string ToString(const LabelSelector& selector) {
  std::string out;
  for (const LabelExpression& e : selector) {
    if (!out.empty()) out += ", ";
    out += e.key + " " + OperatorName(e.op);
    if (e.op == LabelOperator::kIn || e.op == LabelOperator::kNotIn) {
      out += " (";
      for (size_t i = 0; i < e.values.size(); ++i) out += (i ? ", " : "") + e.values[i];
      out += ")";
    }
  }
  return out;
}

std::string ToString(const SchedulingStrategy& strategy) {
  std::string out;
  switch (strategy.kind) {
    case StrategyKind::kDefault: out = "DEFAULT"; break;
    case StrategyKind::kSpread: out = "SPREAD"; break;
    case StrategyKind::kNodeAffinity:
      out = "NodeAffinity(" + strategy.node.Hex() + (strategy.soft ? ", soft)" : ", hard)");
      break;
    case StrategyKind::kNodeLabel:
      out = "NodeLabel(hard: {" + ToString(strategy.hard_labels) + "}, soft: {" +
            ToString(strategy.soft_labels) + "})";
      break;
  }
  if (!strategy.label_selector.empty()) {
    out += " label_selector {" + ToString(strategy.label_selector) + "}";
  }
  return out;
}

}  // namespace airt::sched
