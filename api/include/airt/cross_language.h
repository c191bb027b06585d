// Calling Python from C++, as Ray's C++ API does (ray::PyFunction, ray::PyActorClass):
//
//   # mymod.py, in a folder on the job's code search path
//   def add(a, b): return a + b
//   class Counter:
//       def __init__(self, start): self.n = start
//       def add(self, k): self.n += k; return self.n
//
//   airt::Config config;
//   config.code_search_path = {"/path/to/folder/of/mymod"};
//   airt::Init(config);
//   airt::ObjectRef<int> three = airt::Task(airt::PyFunction<int>{"mymod", "add"}).Remote(1, 2);
//   airt::PyActorHandle counter = airt::Actor(airt::PyActorClass{"mymod", "Counter"}).Remote(10);
//   airt::ObjectRef<int> fifteen = counter.Task(airt::PyActorMethod<int>{"add"}).Remote(5);
//
// The calls run on Python workers: the node needs a Python (airt-node --python-executable, or
// $AIRT_PYTHON) that imports the airt package. A Python worker puts the folders of its job's code
// search path (Config::code_search_path; by default the driver's own folder) first on sys.path,
// imports the module and calls the attribute ("pkg.mod" and "Outer.fn" work). Arguments and
// returns are msgpack, as for C++ functions: numbers, bool, std::string, std::vector, std::map,
// std::optional arrive as int, float, bool, str, list, dict, None; the return converts to R the
// same way (a str to std::string, a list to std::vector, a dict to std::map). An ObjectRef
// argument passes its value. A Python exception, a module that does not import, a missing
// attribute or a return that does not encode fail the call: Get throws TaskError whose what()
// carries the Python traceback; a return that does not convert to R throws SerializationError.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "airt/actor.h"
#include "airt/driver.h"

namespace airt {

// A Python function returning R, by module and name.
template <typename R>
struct PyFunction {
  std::string module_name;
  std::string function_name;
};

// A Python class whose instances are actors, by module and name.
struct PyActorClass {
  std::string module_name;
  std::string class_name;
};

// A method of a Python actor returning R, by name.
template <typename R>
struct PyActorMethod {
  std::string function_name;
};

namespace internal {

// The function names a Python worker resolves (python/airt/_private/pymodule.py):
// "pymodule:<module>:<attribute>" for functions and classes, "pymodule.method:<name>" for
// methods. Throws Exception for an empty part or one holding ':'.
inline void CheckPyNamePart(const std::string& part, const char* what) {
  if (part.empty() || part.find(':') != std::string::npos) {
    throw Exception(std::string("a Python ") + what +
                    " name must be non-empty, without ':'; got '" + part + "'");
  }
}
inline std::string PyModuleFunctionName(const std::string& module_name,
                                        const std::string& attribute) {
  CheckPyNamePart(module_name, "module");
  CheckPyNamePart(attribute, "function or class");
  return "pymodule:" + module_name + ":" + attribute;
}
inline std::string PyModuleMethodName(const std::string& method) {
  CheckPyNamePart(method, "method");
  return "pymodule.method:" + method;
}

template <typename T>
struct IsObjectRef : std::false_type {};
template <typename U>
struct IsObjectRef<ObjectRef<U>> : std::true_type {};

// An argument of a Python call: an ObjectRef (or a vector of them) passes its value, anything
// else is msgpack-encoded as it is (C strings as strings).
template <typename A>
Argument PyArgument(A&& arg) {
  using Given = std::remove_cvref_t<A>;
  Argument out;
  if constexpr (RefVector<Given>::value) {
    out.is_list = true;
    for (const auto& ref : arg) out.ref_list.push_back(ref.ID());
  } else if constexpr (IsObjectRef<Given>::value) {
    out.ref = arg.ID();
  } else if constexpr (std::is_convertible_v<const Given&, const char*>) {
    out.value = Serialize(std::string(arg));
  } else {
    out.value = Serialize(arg);
  }
  return out;
}

}  // namespace internal

// Builds and submits a call of a Python function (airt::Task(PyFunction<R>{...})).
template <typename R>
class PyTaskCaller : public internal::TaskOptions<PyTaskCaller<R>> {
 public:
  explicit PyTaskCaller(const PyFunction<R>& function)
      : name_(internal::PyModuleFunctionName(function.module_name, function.function_name)) {
    this->settings_.python = true;
  }

  template <typename... A>
  ObjectRef<R> Remote(A&&... args) {
    std::vector<internal::Argument> arguments = {internal::PyArgument(std::forward<A>(args))...};
    return ObjectRef<R>(internal::SubmitTask(name_, std::move(arguments), this->settings_).at(0));
  }

 private:
  std::string name_;
};

template <typename R>
PyTaskCaller<R> Task(const PyFunction<R>& function) {
  return PyTaskCaller<R>(function);
}

// Builds and submits one call of a Python actor's method.
template <typename R>
class PyActorTaskCaller {
 public:
  PyActorTaskCaller(std::string actor_id, std::string method)
      : actor_id_(std::move(actor_id)), method_(std::move(method)) {}

  template <typename... A>
  ObjectRef<R> Remote(A&&... args) {
    std::vector<internal::Argument> arguments = {internal::PyArgument(std::forward<A>(args))...};
    return ObjectRef<R>(internal::SubmitActorTask(actor_id_, method_, std::move(arguments)).at(0));
  }

 private:
  std::string actor_id_;
  std::string method_;
};

// A reference to a Python actor (Ray: ActorHandleXlang). Copies call the same actor.
class PyActorHandle {
 public:
  PyActorHandle() = default;
  explicit PyActorHandle(std::string id) : id_(std::move(id)) {}
  const std::string& ID() const { return id_; }  // 16 bytes

  template <typename R>
  PyActorTaskCaller<R> Task(const PyActorMethod<R>& method) const {
    return PyActorTaskCaller<R>(id_, internal::PyModuleMethodName(method.function_name));
  }

  // As ActorHandle::Kill.
  void Kill(bool no_restart = true) { internal::KillActor(id_, no_restart); }

 private:
  std::string id_;
};

// Builds and submits a Python actor's creation (airt::Actor(PyActorClass{...})).
class PyActorCreator : public internal::ActorOptions<PyActorCreator> {
 public:
  explicit PyActorCreator(const PyActorClass& cls)
      : name_(internal::PyModuleFunctionName(cls.module_name, cls.class_name)) {
    settings_.python = true;
  }

  // Throws Exception when the name is taken in its namespace.
  template <typename... A>
  PyActorHandle Remote(A&&... args) {
    std::vector<internal::Argument> arguments = {internal::PyArgument(std::forward<A>(args))...};
    return PyActorHandle(internal::CreateActor(name_, std::move(arguments), settings_));
  }

 private:
  std::string name_;
};

inline PyActorCreator Actor(const PyActorClass& cls) { return PyActorCreator(cls); }

}  // namespace airt
