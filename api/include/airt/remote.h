// Remote functions: the C++ functions a worker can run, registered by name, as Ray's RAY_REMOTE.
//
//   int Add(int a, int b) { return a + b; }
//   std::string Add(std::string a, std::string b) { return a + b; }
//   struct Point { double x, y; MSGPACK_DEFINE(x, y); };
//   Point Scale(Point p, double k) { return {p.x * k, p.y * k}; }
//   AIRT_REMOTE(AIRT_FUNC(Add, int, int), Scale);
//
// AIRT_REMOTE registers each listed function, when its library is loaded (static initialization),
// under the name written in the list ("Add", "Scale", "ns::F"; AIRT_FUNC(f, Args...) is named
// "f"). Write it once per function, at namespace scope of one .cc file, and build that file into a
// shared library on the workers' code search path (or into the driver). AIRT_FUNC(f, Args...)
// picks the overload of `f` taking exactly Args.
//
// Arguments and return values travel as msgpack: numbers, bool, std::string, std::vector,
// std::map, std::optional, std::tuple, ..., and structs with MSGPACK_DEFINE. Parameters may be
// taken by value or by (const) reference, never as pointers. A void function returns nothing. An
// argument that does not convert to its parameter's type fails the task with a "bad arguments"
// error naming the function and the argument index; an exception thrown by the function fails it
// with its what().
#pragma once

#include "airt/internal/function_registry.h"  // IWYU pragma: export
#include "airt/internal/invoker.h"            // IWYU pragma: export
#include "airt/internal/serialization.h"      // IWYU pragma: export

// Registers free functions (plain names, qualified names or AIRT_FUNC picks), comma-separated.
#define AIRT_REMOTE(...)                                                                      \
  [[maybe_unused]] static const bool AIRT_API_CONCAT(airt_remote_, __COUNTER__) =             \
      ::airt::internal::RegisterRemoteFunctions(::airt::internal::FunctionRegistry::Global(), \
                                                #__VA_ARGS__, __VA_ARGS__)

// The overload of `f` whose parameter types are exactly the listed ones, as a function pointer.
#define AIRT_FUNC(f, ...) ::airt::internal::PickOverload<__VA_ARGS__>(f)

#define AIRT_API_CONCAT_INNER(a, b) a##b
#define AIRT_API_CONCAT(a, b) AIRT_API_CONCAT_INNER(a, b)
