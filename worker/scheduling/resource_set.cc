// Amount, ResourceSet and ResourceShape: exact amounts, validation, parsing and printing.
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling {
namespace {

constexpr size_t kMaxNameLength = 256;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// CPU, GPU, memory first, then the other names in order: the order of every printed set.
template <typename Map, typename Fn>
void ForEachInOrder(const Map& map, Fn fn) {
  for (std::string_view first : {kCpu, kGpu, kMemory}) {
    auto it = map.find(std::string(first));
    if (it != map.end()) fn(it->first, it->second);
  }
  for (const auto& [name, value] : map) {
    if (name != kCpu && name != kGpu && name != kMemory) fn(name, value);
  }
}

std::string DoubleToString(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

// The raw input in ToString's form, for error messages about input that is not a valid set.
std::string FormatDoubles(const std::map<std::string, double>& amounts) {
  std::string out = "{";
  ForEachInOrder(amounts, [&](const std::string& name, double value) {
    if (out.size() > 1) out += ", ";
    out += name + ": " + DoubleToString(value);
  });
  return out + "}";
}

// Empty when `name` may name a resource; else why not.
std::string CheckName(std::string_view name) {
  if (name.empty()) return "a resource name is empty";
  if (name.size() > kMaxNameLength) {
    return "resource name '" + std::string(name.substr(0, 32)) + "...' is longer than " +
           std::to_string(kMaxNameLength) + " characters";
  }
  if (name == kAcceleratorType) {
    return "accelerator_type is a node label, not an amount: name it as the shape's "
           "accelerator_type";
  }
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || u == 0x7f || c == ',' || c == '{' || c == '}') {
      return "resource name '" + std::string(name) +
             "' holds a space, a control character or one of ',{}'";
    }
  }
  return "";
}

// The GPU rule of requests and totals: 0 < GPU < 1, or whole.
bool GpuAmountOk(Amount gpu) { return gpu <= Amount::Whole(1) || gpu.IsWhole(); }

// Converts one validated-name amount; `why` says what is wrong when it returns nullopt.
std::optional<Amount> ToAmount(std::string_view name, double d, std::string* why) {
  std::string shown = std::string(name) + " is " + DoubleToString(d);
  if (std::isnan(d) || std::isinf(d)) {
    *why = shown + ", amounts must be finite numbers";
    return std::nullopt;
  }
  if (d < 0) {
    *why = shown + ", amounts must not be negative";
    return std::nullopt;
  }
  if (d > static_cast<double>(Amount::kMaxWhole)) {
    *why = shown + ", above the largest amount " + std::to_string(Amount::kMaxWhole);
    return std::nullopt;
  }
  if (name == kMemory && d != std::floor(d)) {
    *why = shown + ", memory is a whole number of bytes";
    return std::nullopt;
  }
  // Whole and fraction apart, so whole numbers up to 2^53 convert exactly.
  double whole = std::floor(d);
  int64_t units = static_cast<int64_t>(whole) * Amount::kUnitsPerWhole +
                  std::llround((d - whole) * Amount::kUnitsPerWhole);
  Amount amount = Amount::Units(units);
  if (d > 0 && amount.IsZero()) {
    *why = shown + ", below the smallest amount 0.0001";
    return std::nullopt;
  }
  if (name == kGpu && !GpuAmountOk(amount)) {
    *why = shown + ", a GPU amount above 1 must be a whole number (0.5 and 2 are fine)";
    return std::nullopt;
  }
  return amount;
}

// Splits "{a: 1, b: 2}" into name/value pairs. `what` is "resources" or "resource shape".
Status SplitEntries(std::string_view text, std::string_view what,
                    std::vector<std::pair<std::string, std::string>>* entries) {
  auto fail = [&](const std::string& why) {
    return InvalidArgument("cannot parse " + std::string(what) + " '" + std::string(text) +
                           "': " + why);
  };
  std::string_view body = Trim(text);
  bool open = !body.empty() && body.front() == '{';
  bool close = !body.empty() && body.back() == '}';
  if (open != close || (open && body.size() < 2)) return fail("unbalanced braces");
  if (open) body = Trim(body.substr(1, body.size() - 2));
  if (body.empty()) return Status::Ok();
  while (true) {
    size_t comma = body.find(',');
    std::string_view entry = Trim(body.substr(0, comma));
    // Names may hold ':' (as Ray's "node:10.0.0.1"), amounts not; accelerator_type's value may.
    size_t colon = entry.rfind(':');
    if (entry.starts_with(kAcceleratorType) &&
        Trim(entry.substr(kAcceleratorType.size())).starts_with(':')) {
      colon = entry.find(':', kAcceleratorType.size());
    }
    if (colon == std::string_view::npos) {
      return fail("entry '" + std::string(entry) + "' is not 'name: amount'");
    }
    std::string name(Trim(entry.substr(0, colon)));
    std::string value(Trim(entry.substr(colon + 1)));
    for (const auto& e : *entries) {
      if (e.first == name) return fail(name + " is named twice");
    }
    entries->emplace_back(std::move(name), std::move(value));
    if (comma == std::string_view::npos) break;
    body.remove_prefix(comma + 1);
  }
  return Status::Ok();
}

Status NotANumber(std::string_view text, std::string_view what, const std::string& name,
                  const std::string& value) {
  return InvalidArgument("cannot parse " + std::string(what) + " '" + std::string(text) +
                         "': the amount of " + name + " is not a number: '" + value + "'");
}

Result<std::map<std::string, double>> ParseAmounts(
    std::string_view text, std::string_view what,
    const std::vector<std::pair<std::string, std::string>>& entries) {
  std::map<std::string, double> amounts;
  for (const auto& [name, value] : entries) {
    std::string bad_name = CheckName(name);
    if (!bad_name.empty()) {
      return InvalidArgument("cannot parse " + std::string(what) + " '" + std::string(text) +
                             "': " + bad_name);
    }
    double d = 0;
    const char* end = value.data() + value.size();
    auto [ptr, ec] = std::from_chars(value.data(), end, d);
    if (value.empty() || ec != std::errc() || ptr != end) {
      return NotANumber(text, what, name, value);
    }
    amounts[name] = d;
  }
  return amounts;
}

}  // namespace

// ---- Amount ----------------------------------------------------------------------------------

Amount operator+(Amount a, Amount b) {
  int64_t sum;
  if (__builtin_add_overflow(a.units_, b.units_, &sum)) {
    sum = b.units_ > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return Amount(sum);
}

Amount operator-(Amount a, Amount b) {
  int64_t diff;
  if (__builtin_sub_overflow(a.units_, b.units_, &diff)) {
    diff = b.units_ < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return Amount(diff);
}

std::string Amount::ToString() const {
  // Magnitude in unsigned arithmetic, so even INT64_MIN prints.
  uint64_t magnitude = units_ < 0 ? 0 - static_cast<uint64_t>(units_) : units_;
  std::string out = (units_ < 0 ? "-" : "") + std::to_string(magnitude / kUnitsPerWhole);
  uint64_t frac = magnitude % kUnitsPerWhole;
  if (frac == 0) return out;
  std::string digits = std::to_string(frac + kUnitsPerWhole).substr(1);  // 4 digits, zero-padded
  while (digits.back() == '0') digits.pop_back();
  return out + "." + digits;
}

// ---- ResourceSet -----------------------------------------------------------------------------

Result<ResourceSet> ResourceSet::FromDoubles(const std::map<std::string, double>& amounts) {
  ResourceSet set;
  for (const auto& [name, value] : amounts) {
    std::string why = CheckName(name);
    std::optional<Amount> amount;
    if (why.empty()) amount = ToAmount(name, value, &why);
    if (!why.empty())
      return InvalidArgument("invalid resources " + FormatDoubles(amounts) + ": " + why);
    set.SetUnchecked(name, *amount);
  }
  return set;
}

Result<ResourceSet> ResourceSet::Parse(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> entries;
  AIRT_RETURN_IF_ERROR(SplitEntries(text, "resources", &entries));
  AIRT_ASSIGN_OR_RETURN(auto amounts, ParseAmounts(text, "resources", entries));
  return FromDoubles(amounts);
}

Amount ResourceSet::Get(std::string_view name) const {
  auto it = amounts_.find(name);
  return it == amounts_.end() ? Amount() : it->second;
}

bool ResourceSet::FitsIn(const ResourceSet& capacity) const {
  for (const auto& [name, amount] : amounts_) {
    if (amount > capacity.Get(name)) return false;
  }
  return true;
}

void ResourceSet::Add(const ResourceSet& other) {
  for (const auto& [name, amount] : other.amounts_) SetUnchecked(name, Get(name) + amount);
}

Status ResourceSet::Subtract(const ResourceSet& other) {
  for (const auto& [name, amount] : other.amounts_) {
    Amount have = Get(name);
    if (amount > have) {
      return ResourceExhausted("cannot take " + other.ToString() + " from " + ToString() + ": " +
                               name + " is short by " + (amount - have).ToString());
    }
  }
  for (const auto& [name, amount] : other.amounts_) SetUnchecked(name, Get(name) - amount);
  return Status::Ok();
}

std::string ResourceSet::ToString() const {
  std::string out = "{";
  ForEachInOrder(amounts_, [&](const std::string& name, Amount amount) {
    if (out.size() > 1) out += ", ";
    out += name + ": " + amount.ToString();
  });
  return out + "}";
}

void ResourceSet::SetUnchecked(std::string_view name, Amount amount) {
  if (amount.IsZero()) {
    auto it = amounts_.find(name);
    if (it != amounts_.end()) amounts_.erase(it);
    return;
  }
  auto it = amounts_.find(name);
  if (it == amounts_.end()) {
    amounts_.emplace(std::string(name), amount);
  } else {
    it->second = amount;
  }
}

// ---- ResourceShape ---------------------------------------------------------------------------

Result<ResourceShape> ResourceShape::Make(ResourceSet amounts, std::string accelerator_type) {
  ResourceShape shape;
  shape.amounts_ = std::move(amounts);
  shape.accelerator_type_ = std::move(accelerator_type);
  auto fail = [&](const std::string& why) {
    return InvalidArgument("invalid resource shape " + shape.ToString() + ": " + why);
  };
  // A set built by arithmetic skipped FromDoubles' checks; the ones a request needs come again.
  for (const auto& [name, amount] : shape.amounts_.amounts()) {
    std::string why = CheckName(name);
    if (!why.empty()) return fail(why);
    if (amount < Amount() || amount > Amount::Whole(Amount::kMaxWhole)) {
      return fail(name + " is " + amount.ToString() + ", out of range");
    }
  }
  Amount gpu = shape.amounts_.Get(kGpu);
  if (!GpuAmountOk(gpu)) {
    return fail("GPU is " + gpu.ToString() +
                ", a GPU amount above 1 must be a whole number (0.5 and 2 are fine)");
  }
  for (char c : shape.accelerator_type_) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' &&
        c != ':') {
      return fail("accelerator_type may hold only letters, digits and '-_.:'");
    }
  }
  if (shape.accelerator_type_.size() > 64) return fail("accelerator_type is over 64 characters");
  return shape;
}

Result<ResourceShape> ResourceShape::FromDoubles(const std::map<std::string, double>& amounts,
                                                 std::string accelerator_type) {
  AIRT_ASSIGN_OR_RETURN(ResourceSet set, ResourceSet::FromDoubles(amounts));
  return Make(std::move(set), std::move(accelerator_type));
}

Result<ResourceShape> ResourceShape::Parse(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> entries;
  AIRT_RETURN_IF_ERROR(SplitEntries(text, "resource shape", &entries));
  std::string accelerator_type;
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->first == kAcceleratorType) {
      accelerator_type = it->second;
      if (accelerator_type.empty()) {
        return InvalidArgument("cannot parse resource shape '" + std::string(text) +
                               "': accelerator_type is empty");
      }
      entries.erase(it);
      break;
    }
  }
  AIRT_ASSIGN_OR_RETURN(auto amounts, ParseAmounts(text, "resource shape", entries));
  return FromDoubles(amounts, std::move(accelerator_type));
}

std::string ResourceShape::ToString() const {
  std::string out = amounts_.ToString();
  if (accelerator_type_.empty()) return out;
  out.pop_back();  // the closing brace
  if (out.size() > 1) out += ", ";
  return out + std::string(kAcceleratorType) + ": " + accelerator_type_ + "}";
}

}  // namespace airt::worker::scheduling
