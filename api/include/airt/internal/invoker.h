// Invokers for free functions: deserialize each argument to its parameter's type, call, serialize
// the return. Part of airt/remote.h.
#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "airt/generator.h"
#include "airt/internal/function_registry.h"
#include "airt/internal/serialization.h"

namespace airt::internal {

// AIRT_FUNC: `f` converted to the pointer type of its overload taking exactly Args.
template <typename... Args, typename R>
constexpr auto PickOverload(R (*f)(Args...)) -> R (*)(Args...) {
  return f;
}

InvokeOutcome BadArguments(const std::string& function, std::string why);
// The function threw: `what` is the message (TaskError's what()), `data` the exception for the
// caller (TaskError::data(); without it, `what` again: a C++ exception travels as its what()).
InvokeOutcome UserException(std::string what);
InvokeOutcome UserException(std::string what, std::string data);

template <typename T>
using ParameterValue = std::remove_cvref_t<T>;

// Deserializes argument I into values[I]; false (with `outcome` set) when it does not convert.
template <size_t I, typename T>
bool DeserializeArgument(const std::string& function, size_t count, std::string_view bytes,
                         std::optional<T>& value, InvokeOutcome& outcome) {
  try {
    value.emplace(Deserialize<T>(bytes));
    return true;
  } catch (const std::exception& e) {
    outcome = BadArguments(function, "argument " + std::to_string(I) + " (0-based, of " +
                                         std::to_string(count) + "): " + e.what());
    return false;
  }
}

// Deserializes `args` to Args... and calls `call` with them; a non-void R is serialized into the
// returns, except an actor factory's R = T*, which becomes the outcome's instance.
template <typename R, typename... Args, typename Call, size_t... I>
InvokeOutcome InvokeWith(const std::string& function, Call&& call,
                         std::span<const std::string_view> args, std::index_sequence<I...>) {
  constexpr size_t kCount = sizeof...(Args);
  if (args.size() != kCount) {
    return BadArguments(function, "takes " + std::to_string(kCount) + " argument" +
                                      (kCount == 1 ? "" : "s") + ", got " +
                                      std::to_string(args.size()));
  }
  std::tuple<std::optional<ParameterValue<Args>>...> values;
  InvokeOutcome outcome;
  // Stops at the first argument that does not convert.
  bool converted =
      (DeserializeArgument<I>(function, kCount, args[I], std::get<I>(values), outcome) && ...);
  if (!converted) return outcome;
  try {
    if constexpr (std::is_void_v<R>) {
      call(std::forward<Args>(*std::get<I>(values))...);
    } else if constexpr (IsGenerator<R>::value) {
      R generator = call(std::forward<Args>(*std::get<I>(values))...);
      if (!StreamItems(generator)) {
        return UserException("'" + function + "' returns a generator: call it as a streaming " +
                             "call (Task(f).Remote and handle.Task(&Class::Method).Remote give " +
                             "an ObjectRefGenerator)");
      }
    } else if constexpr (std::is_pointer_v<R>) {
      using Actor = std::remove_pointer_t<R>;
      std::shared_ptr<Actor> instance(call(std::forward<Args>(*std::get<I>(values))...));
      if (!instance) return UserException("'" + function + "' returned a null actor");
      outcome.instance = std::move(instance);
    } else {
      outcome.returns.push_back(Serialize(call(std::forward<Args>(*std::get<I>(values))...)));
    }
  } catch (const std::exception& e) {
    return UserException(e.what());
  } catch (...) {
    return UserException("an exception not derived from std::exception");
  }
  return outcome;
}

template <typename R, typename... Args>
Invoker MakeInvoker(std::string function, R (*fn)(Args...)) {
  static_assert((!std::is_pointer_v<ParameterValue<Args>> && ...),
                "remote functions cannot take pointers: take values or references");
  static_assert(!std::is_pointer_v<std::remove_cvref_t<R>> || std::is_class_v<std::remove_pointer_t<R>>,
                "remote functions cannot return pointers, except actor factories (T* Create(...))");
  return [function = std::move(function), fn](std::span<const std::string_view> args) {
    return InvokeWith<R, Args...>(function, fn, args, std::index_sequence_for<Args...>{});
  };
}

template <typename T, typename R, typename... Args, typename M>
MethodInvoker MakeMethodInvokerFor(std::string function, M method) {
  static_assert((!std::is_pointer_v<ParameterValue<Args>> && ...),
                "actor methods cannot take pointers: take values or references");
  static_assert(!std::is_pointer_v<std::remove_cvref_t<R>>, "actor methods cannot return pointers");
  return [function = std::move(function), method](void* instance,
                                                  std::span<const std::string_view> args) {
    if (instance == nullptr) {
      return UserException("'" + function +
                           "' is an actor method: call it on an actor handle, not as a task");
    }
    T* self = static_cast<T*>(instance);
    auto call = [self, method](auto&&... a) -> R {
      return (self->*method)(std::forward<decltype(a)>(a)...);
    };
    return InvokeWith<R, Args...>(function, call, args, std::index_sequence_for<Args...>{});
  };
}

template <typename T, typename R, typename... Args>
MethodInvoker MakeMethodInvoker(std::string function, R (T::*method)(Args...)) {
  return MakeMethodInvokerFor<T, R, Args...>(std::move(function), method);
}

template <typename T, typename R, typename... Args>
MethodInvoker MakeMethodInvoker(std::string function, R (T::*method)(Args...) const) {
  return MakeMethodInvokerFor<T, R, Args...>(std::move(function), method);
}

// One entry of an AIRT_REMOTE list: a free function or actor factory, or an actor method.
template <typename F>
bool RegisterRemote(FunctionRegistry& registry, const std::string& name, F fn) {
  if constexpr (std::is_member_function_pointer_v<F>) {
    registry.RememberMethod(MethodKey(fn), name);
    return registry.RegisterMethod(name, MakeMethodInvoker(name, fn));
  } else {
    registry.RememberAddress(reinterpret_cast<const void*>(fn), name);
    return registry.Register(name, MakeInvoker(name, fn));
  }
}

// AIRT_REMOTE: registers each of `fns` under its name in the `list` text. Problems (a clash, a
// list it cannot read) are recorded in the registry, to be logged by whoever loaded the code.
template <typename... Fns>
bool RegisterRemoteFunctions(FunctionRegistry& registry, const char* list, Fns... fns) {
  std::vector<std::string> names = ParseRemoteNames(list);
  if (names.size() != sizeof...(Fns)) {
    registry.RecordProblem(std::string("AIRT_REMOTE(") + list +
                           "): cannot read the function names; list plain or qualified names and "
                           "AIRT_FUNC(f, Args...) picks");
    return false;
  }
  size_t i = 0;
  bool all = true;
  ((all = RegisterRemote(registry, names[i++], fns) && all), ...);
  return all;
}

}  // namespace airt::internal
