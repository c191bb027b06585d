#include "common/flags.h"

#include <charconv>

namespace airt {

Result<uint64_t> ParseByteSize(std::string_view text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string_view suffix(end, static_cast<size_t>(text.data() + text.size() - end));
  if (ec != std::errc() || end == text.data()) {
    return InvalidArgument("'" + std::string(text) + "' is not a size");
  }
  int shift = 0;
  if (suffix == "" || suffix == "B")
    shift = 0;
  else if (suffix == "K" || suffix == "KiB")
    shift = 10;
  else if (suffix == "M" || suffix == "MiB")
    shift = 20;
  else if (suffix == "G" || suffix == "GiB")
    shift = 30;
  else if (suffix == "T" || suffix == "TiB")
    shift = 40;
  else
    return InvalidArgument("'" + std::string(text) + "' has an unknown size suffix");
  if (shift > 0 && value > (~uint64_t{0} >> shift)) {
    return InvalidArgument("'" + std::string(text) + "' is too large");
  }
  return value << shift;
}

void FlagSet::AddString(std::string name, std::string* value, std::string help) {
  flags_.push_back(
      {std::move(name), std::move(help), *value, false, nullptr, [value](std::string_view v) {
         *value = std::string(v);
         return Status::Ok();
       }});
}

void FlagSet::AddUint64(std::string name, uint64_t* value, std::string help) {
  std::string n = name;
  flags_.push_back({std::move(name), std::move(help), std::to_string(*value), false, nullptr,
                    [value, n](std::string_view v) {
                      uint64_t x;
                      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
                      if (ec != std::errc() || end != v.data() + v.size()) {
                        return InvalidArgument("--" + n + ": '" + std::string(v) +
                                               "' is not a non-negative integer");
                      }
                      *value = x;
                      return Status::Ok();
                    }});
}

void FlagSet::AddBytes(std::string name, uint64_t* value, std::string help) {
  std::string n = name;
  flags_.push_back({std::move(name), std::move(help), std::to_string(*value), false, nullptr,
                    [value, n](std::string_view v) {
                      Result<uint64_t> x = ParseByteSize(v);
                      if (!x.ok()) return x.status().WithContext("--" + n);
                      *value = *x;
                      return Status::Ok();
                    }});
}

void FlagSet::AddBool(std::string name, bool* value, std::string help) {
  std::string n = name;
  flags_.push_back({std::move(name), std::move(help), *value ? "true" : "false", true, value,
                    [value, n](std::string_view v) {
                      if (v == "true" || v == "1")
                        *value = true;
                      else if (v == "false" || v == "0")
                        *value = false;
                      else
                        return InvalidArgument("--" + n + ": '" + std::string(v) +
                                               "' is not true or false");
                      return Status::Ok();
                    }});
}

Status FlagSet::Parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg(argv[i]);
    if (arg == "--help" || arg == "-h") return Cancelled("help requested");
    if (arg.substr(0, 2) != "--")
      return InvalidArgument("unexpected argument '" + std::string(arg) + "'");
    arg.remove_prefix(2);
    std::string_view name = arg, value;
    bool has_value = false;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    Flag* flag = nullptr;
    bool negated = false;
    for (Flag& f : flags_) {
      if (f.name == name) flag = &f;
      if (f.is_bool && "no-" + f.name == name) flag = &f, negated = true;
    }
    if (flag == nullptr) return InvalidArgument("unknown flag --" + std::string(name));
    if (flag->is_bool && !has_value) {
      *flag->bool_value = !negated;
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) return InvalidArgument("--" + std::string(name) + " needs a value");
      value = argv[++i];
    }
    AIRT_RETURN_IF_ERROR(flag->set(value));
  }
  return Status::Ok();
}

std::string FlagSet::Usage() const {
  std::string out = "usage: " + program_ + " [flags]\n";
  for (const Flag& f : flags_) {
    out += "  --" + f.name + (f.is_bool ? "" : "=VALUE") + "  " + f.help +
           " (default: " + (f.default_text.empty() ? "\"\"" : f.default_text) + ")\n";
  }
  return out;
}

}  // namespace airt
