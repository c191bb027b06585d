// libairt_api.so: the process-wide function registry and the non-template parts of the invokers.
#include "airt/internal/function_registry.h"

#include <cxxabi.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>

#include "airt/internal/invoker.h"
#include "airt/internal/serialization.h"

namespace airt::internal {

FunctionRegistry& FunctionRegistry::Global() {
  // Never destroyed: invokers may be looked up by threads still running at exit.
  static FunctionRegistry* registry = new FunctionRegistry();
  return *registry;
}

bool FunctionRegistry::Register(std::string name, Invoker invoker) {
  std::lock_guard<std::mutex> lock(mu_);
  if (invokers_.count(name) > 0) {
    problems_.push_back("remote function '" + name +
                        "' is registered twice (AIRT_REMOTE in two places, or two libraries "
                        "define it): the first registration is kept");
    return false;
  }
  invokers_.emplace(std::move(name), std::move(invoker));
  return true;
}

bool FunctionRegistry::RegisterMethod(std::string name, MethodInvoker invoker) {
  std::lock_guard<std::mutex> lock(mu_);
  if (methods_.count(name) > 0 || invokers_.count(name) > 0) {
    problems_.push_back("actor method '" + name +
                        "' is registered twice: the first registration is kept");
    return false;
  }
  methods_.emplace(std::move(name), std::move(invoker));
  return true;
}

void FunctionRegistry::RememberMethod(std::string key, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  names_by_method_key_.emplace(std::move(key), name);
}

std::string FunctionRegistry::NameOfMethod(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = names_by_method_key_.find(key);
  return it == names_by_method_key_.end() ? std::string() : it->second;
}

const MethodInvoker* FunctionRegistry::FindMethod(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = methods_.find(name);
  return it == methods_.end() ? nullptr : &it->second;
}

void FunctionRegistry::RememberAddress(const void* address, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  names_by_address_.emplace(address, name);
}

std::string FunctionRegistry::NameOf(const void* address) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = names_by_address_.find(address);
  return it == names_by_address_.end() ? std::string() : it->second;
}

void FunctionRegistry::RecordProblem(std::string problem) {
  std::lock_guard<std::mutex> lock(mu_);
  problems_.push_back(std::move(problem));
}

const Invoker* FunctionRegistry::Find(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = invokers_.find(name);
  return it == invokers_.end() ? nullptr : &it->second;
}

std::vector<std::string> FunctionRegistry::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  names.reserve(invokers_.size() + methods_.size());
  for (const auto& entry : invokers_) names.push_back(entry.first);
  for (const auto& entry : methods_) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> FunctionRegistry::TakeProblems() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  out.swap(problems_);
  return out;
}

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "ns :: f" -> "ns::f"; "&f" -> "f". Empty unless the result is an identifier, possibly qualified.
std::string CleanName(std::string_view entry) {
  std::string name;
  for (char c : Trim(entry)) {
    if (!std::isspace(static_cast<unsigned char>(c))) name.push_back(c);
  }
  if (!name.empty() && name.front() == '&') name.erase(0, 1);
  if (name.rfind("::", 0) == 0) name.erase(0, 2);
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':') return "";
  }
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return "";
  return name;
}

}  // namespace

std::vector<std::string> ParseRemoteNames(std::string_view list) {
  // Split at the commas outside parentheses.
  std::vector<std::string_view> entries;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    char c = i < list.size() ? list[i] : ',';
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth < 0) return {};
    if (c == ',' && depth == 0) {
      entries.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) return {};
  constexpr std::string_view kPick = "AIRT_FUNC";
  std::vector<std::string> names;
  for (std::string_view entry : entries) {
    entry = Trim(entry);
    if (entry.substr(0, kPick.size()) == kPick &&
        Trim(entry.substr(kPick.size())).starts_with("(")) {
      // AIRT_FUNC(f, Args...): the name is what comes before the first comma.
      std::string_view inside = Trim(entry.substr(kPick.size()));
      inside.remove_prefix(1);
      size_t end = inside.find_first_of(",)");
      entry = inside.substr(0, end);
    }
    std::string name = CleanName(entry);
    if (name.empty()) return {};
    names.push_back(std::move(name));
  }
  return names;
}

std::string TypeName(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  std::string name = status == 0 && demangled ? demangled.get() : type.name();
  // libstdc++ spells std::string out in full.
  constexpr std::string_view kLong =
      "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >";
  for (size_t at; (at = name.find(kLong)) != std::string::npos;) {
    name.replace(at, kLong.size(), "std::string");
  }
  return name;
}

const char* MsgpackKindName(const msgpack::object& object) {
  switch (object.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "boolean";
    case msgpack::type::POSITIVE_INTEGER: return "positive integer";
    case msgpack::type::NEGATIVE_INTEGER: return "negative integer";
    case msgpack::type::FLOAT32: return "float32";
    case msgpack::type::FLOAT64: return "float64";
    case msgpack::type::STR: return "str";
    case msgpack::type::BIN: return "bin";
    case msgpack::type::ARRAY: return "array";
    case msgpack::type::MAP: return "map";
    case msgpack::type::EXT: return "ext";
  }
  return "unknown";
}

void ThrowMalformed(std::string_view bytes, const char* why) {
  throw SerializationError("not a msgpack value (" + std::to_string(bytes.size()) +
                           " bytes): " + why);
}

void ThrowWrongType(const msgpack::object& found, const std::type_info& expected) {
  std::string what =
      std::string("expected ") + TypeName(expected) + ", got a msgpack " + MsgpackKindName(found);
  switch (found.type) {
    case msgpack::type::ARRAY:
    case msgpack::type::MAP:
      what += " of " +
              std::to_string(found.type == msgpack::type::ARRAY ? found.via.array.size
                                                                : found.via.map.size) +
              " (or one of its elements does not convert)";
      break;
    case msgpack::type::POSITIVE_INTEGER: what += " " + std::to_string(found.via.u64); break;
    case msgpack::type::NEGATIVE_INTEGER: what += " " + std::to_string(found.via.i64); break;
    default: break;
  }
  throw SerializationError(what);
}

InvokeOutcome BadArguments(const std::string& function, std::string why) {
  InvokeOutcome outcome;
  outcome.failure = ErrorKind::kBadArguments;
  outcome.error = "bad arguments for '" + function + "': " + std::move(why);
  return outcome;
}

RunningTask& ThisThreadsTask() {
  thread_local RunningTask running;
  return running;
}

InvokeOutcome UserException(std::string what) {
  std::string data = what;
  return UserException(std::move(what), std::move(data));
}

InvokeOutcome UserException(std::string what, std::string data) {
  InvokeOutcome outcome;
  outcome.failure = ErrorKind::kUserException;
  outcome.error = std::move(what);
  outcome.data = std::move(data);
  return outcome;
}

}  // namespace airt::internal
