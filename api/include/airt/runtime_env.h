// A task's, an actor's or a job's runtime environment, shaped like Ray's ray::RuntimeEnv: named
// fields ("env_vars", "working_dir", ...) each holding a JSON value.
//
//   airt::RuntimeEnv env;
//   env.Set("env_vars", std::map<std::string, std::string>{{"MODE", "fast"}});
//   airt::Task(F).SetRuntimeEnv(env).Remote();   // F runs with MODE=fast in its environment
//
// What airt's C++ workers honour is "env_vars" (a JSON object of strings): set in the worker's
// environment while a task runs (restored after it), for an actor's whole life, and inherited by
// the tasks and actors they submit. Any other field makes SetRuntimeEnv (or Init, for
// Config::runtime_env) throw UnimplementedError naming it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace airt {

namespace internal {
// Throws RuntimeEnvError (airt/exceptions.h; Ray's RayRuntimeEnvException) with `what`.
[[noreturn]] void ThrowRuntimeEnvError(const std::string& what);
}  // namespace internal

class RuntimeEnv {
 public:
  // Sets the field `name` to `value`, any type nlohmann::json converts from (strings, numbers,
  // std::vector, std::map<std::string, ...>, ...). Throws RuntimeEnvError when it does not.
  template <typename T>
  void Set(const std::string& name, const T& value) {
    try {
      fields_[name] = nlohmann::json(value);
    } catch (const std::exception& e) {
      internal::ThrowRuntimeEnvError("RuntimeEnv: cannot set the field '" + name + "': " +
                                     e.what());
    }
  }
  // The field `name` as a T. Throws RuntimeEnvError when it is not there or is not a T.
  template <typename T>
  T Get(const std::string& name) const {
    if (!Contains(name)) {
      internal::ThrowRuntimeEnvError("RuntimeEnv: the field '" + name + "' is not set");
    }
    try {
      return fields_.at(name).get<T>();
    } catch (const std::exception& e) {
      internal::ThrowRuntimeEnvError("RuntimeEnv: cannot read the field '" + name + "': " +
                                     e.what());
    }
  }
  // Sets the field `name` from JSON text. Throws RuntimeEnvError when it does not parse.
  void SetJsonStr(const std::string& name, const std::string& json_str) {
    try {
      fields_[name] = nlohmann::json::parse(json_str);
    } catch (const std::exception& e) {
      internal::ThrowRuntimeEnvError("RuntimeEnv: the field '" + name + "' is not JSON (" +
                                     e.what() + "): " + json_str);
    }
  }
  // The field `name` as JSON text. Throws RuntimeEnvError when it is not there.
  std::string GetJsonStr(const std::string& name) const {
    if (!Contains(name)) {
      internal::ThrowRuntimeEnvError("RuntimeEnv: the field '" + name + "' is not set");
    }
    return fields_.at(name).dump();
  }
  bool Contains(const std::string& name) const {
    return fields_.is_object() && fields_.contains(name);
  }
  // Whether a field was there to remove.
  bool Remove(const std::string& name) { return fields_.is_object() && fields_.erase(name) > 0; }
  bool Empty() const { return fields_.empty(); }

  // All the fields as one JSON object's text, and back (Deserialize throws RuntimeEnvError for
  // text that is not a JSON object).
  std::string Serialize() const { return fields_.is_null() ? "{}" : fields_.dump(); }
  static RuntimeEnv Deserialize(const std::string& serialized) {
    RuntimeEnv env;
    try {
      env.fields_ = nlohmann::json::parse(serialized);
    } catch (const std::exception& e) {
      internal::ThrowRuntimeEnvError(std::string("RuntimeEnv: not JSON (") + e.what() +
                                     "): " + serialized);
    }
    if (!env.fields_.is_object()) {
      internal::ThrowRuntimeEnvError("RuntimeEnv: not a JSON object: " + serialized);
    }
    return env;
  }

  const nlohmann::json& fields() const { return fields_; }

 private:
  nlohmann::json fields_ = nlohmann::json::object();
};

}  // namespace airt
