// airt._airt: the Python binding of the driver API (api/include/airt/), so that Python drives
// the same core worker as C++ programs. Values cross as bytes: the package above pickles Python
// values and msgpack-encodes the arguments of C++ functions. Every call that can wait releases
// the GIL. airt's exceptions become the airt package's (airt.exceptions, Ray's names).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "airt/api.h"
#include "api/internal/worker_options.h"
#include "common/error_kind.h"
#include "api/internal/worker_process.h"
#include "common/ids.h"
#include "common/logging.h"
#include "python/_airt_gil.h"

namespace py = pybind11;
using airt::python::GilRelease;

[[noreturn]] void airt::python::GilRelease::Park() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

namespace {

std::vector<std::string> Ids(const std::vector<py::bytes>& refs) {
  std::vector<std::string> out;
  out.reserve(refs.size());
  for (const py::bytes& r : refs) out.push_back(std::string(r));
  return out;
}

// Serialized values (bytes, or (bytes, [contained ref ids]) pairs) and object refs ((ref,) tuples)
// as the API's arguments.
std::vector<airt::internal::Argument> Arguments(const py::list& args) {
  std::vector<airt::internal::Argument> arguments;
  for (const py::handle& a : args) {
    airt::internal::Argument argument;
    if (py::isinstance<py::tuple>(a) && a.cast<py::tuple>().size() == 2) {
      // (value, [ids of the refs pickled inside it]): the task holds those until it is done.
      py::tuple pair = a.cast<py::tuple>();
      argument.value = std::string(pair[0].cast<py::bytes>());
      for (const py::handle& id : pair[1]) argument.contained.push_back(id.cast<std::string>());
    } else if (py::isinstance<py::tuple>(a)) {
      argument.ref = std::string(a.cast<py::tuple>()[0].cast<py::bytes>());
    } else {
      argument.value = std::string(a.cast<py::bytes>());
    }
    arguments.push_back(std::move(argument));
  }
  return arguments;
}

// The first bytes of an object put by put_buffers.
constexpr std::string_view kFrameMagic = "AIRTPK5\n";

py::list AsBytes(const std::vector<std::string>& ids) {
  py::list out;
  for (const std::string& id : ids) out.append(py::bytes(id));
  return out;
}

// An object's bytes in place (the store's mapping), readable through the buffer protocol without
// a copy; the object stays pinned while this (or a view of it, such as a numpy array) lives.
struct PinnedBuffer {
  airt::internal::PinnedBytes pinned;
};

// Values below this are copied into bytes: a view's bookkeeping costs more than the copy.
constexpr size_t kViewThreshold = 64 << 10;

// Calls `interrupt(task_id)` (a Python callable, or None for no hook) with the GIL taken; its
// errors are logged, never raised into the worker's loop.
airt::internal::Interrupt InterruptHook(py::object interrupt) {
  if (interrupt.is_none()) return nullptr;
  std::shared_ptr<py::object> hook(new py::object(std::move(interrupt)), [](py::object* f) {
    py::gil_scoped_acquire locked;
    delete f;
  });
  return [hook](const airt::TaskId& task) {
    py::gil_scoped_acquire locked;
    try {
      (*hook)(py::bytes(task.Binary()));
    } catch (const py::error_already_set& e) {
      AIRT_LOG(ERROR) << "interrupting task " << task.Hex() << ": " << e.what();
    }
  };
}

// Sets the Python error for `e`: the airt package's exception of its kind, message and data
// (airt.exceptions.from_core), or `base` with its message when the package cannot be imported.
void RaiseAsPython(const airt::Exception& e, PyObject* base) {
  try {
    py::object from_core = py::module_::import("airt.exceptions").attr("from_core");
    py::object raised = from_core(static_cast<int>(e.kind()), e.what(), py::bytes(e.data()));
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(raised.ptr())), raised.ptr());
  } catch (const py::error_already_set&) {
    PyErr_SetString(base, e.what());
  }
}

int64_t TimeoutMs(std::optional<double> seconds) {
  if (!seconds) return -1;
  return *seconds <= 0 ? 0 : static_cast<int64_t>(*seconds * 1000.0);
}

}  // namespace

void BindPlacementGroups(py::module_& m);  // _airt_placement_groups.cc
void BindAutoscaler(py::module_& m);       // _airt_autoscaler.cc
void BindDrain(py::module_& m);            // _airt_drain.cc
void BindCollective(py::module_& m);       // _airt_collective.cc
void BindReferences(py::module_& m);       // _airt_refs.cc
void ApplyStrategy(const py::object& strategy, const std::map<std::string, std::string>& selector,
                   airt::SchedulingStrategy* out,
                   airt::LabelSelector* label_selector);  // _airt_strategies.cc

PYBIND11_MODULE(_airt, m) {
  m.doc() = "airt's driver API (the core worker), for the airt package";
  // From Python's exit on (its atexit handlers run before it finalizes), a thread coming back
  // from the core parks instead of retaking the GIL (_airt_gil.h).
  py::module_::import("atexit").attr("register")(
      py::cpp_function([] { airt::python::g_exiting = true; }));
  for (auto bind :
       {BindPlacementGroups, BindAutoscaler, BindDrain, BindCollective, BindReferences}) {
    bind(m);
  }

  // airt's errors: the base type here, and each C++ exception raised as the airt package's type
  // for its kind (airt.exceptions.from_core, the one map; all derive from Error).
  static py::exception<airt::Exception> error(m, "Error");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const airt::Exception& e) {
      RaiseAsPython(e, error.ptr());
    }
  });
  // The schema's kinds of failure, name -> number (airt.exceptions maps each to its type).
  m.def("error_kinds", [] {
    py::dict kinds;
    for (size_t i = 0; i < airt::NumErrorKinds(); ++i) {
      std::string_view name = airt::ErrorKindName(static_cast<airt::proto::ErrorKind>(i));
      kinds[py::str(name.data(), name.size())] = i;
    }
    return kinds;
  });

  m.def(
      "init",
      [](const std::string& address, const std::vector<std::string>& code_search_path,
         std::optional<int> num_cpus, std::optional<int> num_gpus,
         const std::map<std::string, double>& resources,
         std::optional<uint64_t> object_store_memory, const std::string& ns) {
        airt::Config config;
        config.ray_namespace = ns;
        config.object_store_memory = object_store_memory;
        config.address = address;
        config.code_search_path = code_search_path;
        config.num_cpus = num_cpus;
        config.num_gpus = num_gpus;
        config.resources = resources;
        GilRelease unlocked;
        airt::Init(config);
      },
      py::arg("address"), py::arg("code_search_path"), py::arg("num_cpus"), py::arg("num_gpus"),
      py::arg("resources"), py::arg("object_store_memory"), py::arg("namespace") = "");
  m.def("shutdown", [] {
    GilRelease unlocked;
    airt::Shutdown();
  });
  m.def("is_initialized", [] { return airt::IsInitialized(); });

  // Stores `data` as an object; its id.
  m.def("put", [](py::bytes data) {
    std::string bytes(data);
    std::string id;
    {
      GilRelease unlocked;
      id = airt::internal::PutBytes(std::move(bytes));
    }
    return py::bytes(id);
  });
  // Stores a pickle protocol 5 stream and its out-of-band buffers as one object, each buffer
  // copied once, straight into the node's store (framed as python/airt/object_ref.py reads it:
  // the magic, the count, then each part's length and bytes, buffers at 64-byte offsets).
  m.def("put_buffers", [](py::bytes meta, const py::list& buffers) {
    std::string head(meta);
    std::vector<py::buffer_info> parts;
    for (const py::handle& b : buffers) parts.push_back(py::buffer(b, true).request());
    auto align = [](uint64_t n) { return (n + 63) / 64 * 64; };
    uint64_t size = kFrameMagic.size() + 8 + 8 + head.size();
    for (const auto& p : parts) size = align(size + 8) + static_cast<uint64_t>(p.size * p.itemsize);
    std::string id;
    {
      GilRelease unlocked;  // the buffers stay referenced by the caller's list
      id = airt::internal::PutWith(size, [&](uint8_t* out) {
        uint64_t at = 0;
        auto put = [&](const void* data, uint64_t n) {
          airt::internal::CopyOut(out + at, static_cast<const char*>(data), n);
          at += n;
        };
        auto put_u64 = [&](uint64_t v) { put(&v, 8); };
        put(kFrameMagic.data(), kFrameMagic.size());
        put_u64(parts.size());
        put_u64(head.size());
        put(head.data(), head.size());
        for (const auto& p : parts) {
          uint64_t n = static_cast<uint64_t>(p.size * p.itemsize);
          std::memset(out + at, 0, align(at + 8) - 8 - at);
          at = align(at + 8) - 8;
          put_u64(n);
          put(p.ptr, n);
        }
        std::memset(out + at, 0, size - at);
      });
    }
    return py::bytes(id);
  });

  py::class_<PinnedBuffer>(m, "PinnedBuffer", py::buffer_protocol())
      .def_buffer([](PinnedBuffer& b) {
        return py::buffer_info(const_cast<char*>(b.pinned.bytes.data()), 1,
                               py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.pinned.bytes.size())}, {1},
                               /*readonly=*/true);
      })
      .def("__len__", [](const PinnedBuffer& b) { return b.pinned.bytes.size(); })
      .def("address", [](const PinnedBuffer& b) {
        return reinterpret_cast<uintptr_t>(b.pinned.bytes.data());
      });

  // Each object's value, waiting at most `timeout` seconds (None: no limit): bytes for small
  // ones; for large ones, or ones holding out-of-band buffers, a PinnedBuffer over the store.
  m.def(
      "get",
      [](const std::vector<py::bytes>& refs, std::optional<double> timeout) {
        std::vector<std::string> ids = Ids(refs);
        std::vector<airt::internal::PinnedBytes> values;
        {
          GilRelease unlocked;
          values = airt::internal::GetPinned(ids, TimeoutMs(timeout));
        }
        py::list out;
        for (airt::internal::PinnedBytes& v : values) {
          if (v.bytes.size() < kViewThreshold && !v.bytes.starts_with(kFrameMagic)) {
            out.append(py::bytes(v.bytes.data(), v.bytes.size()));
          } else {
            out.append(py::cast(PinnedBuffer{std::move(v)}));
          }
        }
        return out;
      },
      py::arg("refs"), py::arg("timeout"));
  // The task this thread runs: (task id, actor id), binary; empty bytes outside a task.
  m.def("current_task", [] {
    return py::make_tuple(py::bytes(airt::internal::CurrentTaskId()),
                          py::bytes(airt::internal::CurrentActorId()));
  });
  // Which refs are ready once `num_returns` are, or `timeout` seconds passed.
  m.def(
      "wait",
      [](const std::vector<py::bytes>& refs, int num_returns, std::optional<double> timeout) {
        std::vector<std::string> ids = Ids(refs);
        GilRelease unlocked;
        return airt::internal::WaitReady(ids, num_returns, TimeoutMs(timeout));
      },
      py::arg("refs"), py::arg("num_returns"), py::arg("timeout"));
  // Submits the function registered as `name` (a C++ AIRT_REMOTE one, or with `python` a
  // pickled Python one) with serialized arguments (bytes) or object refs ((ref,) tuples); the id
  // of its return.
  m.def(
      "submit",
      [](const std::string& name, const py::list& args,
         const std::map<std::string, double>& resources, int max_retries, bool python,
         int num_returns, const std::string& accelerator_type, const std::string& task_name,
         const py::object& strategy, const std::map<std::string, std::string>& label_selector) {
        std::vector<airt::internal::Argument> arguments = Arguments(args);
        airt::internal::TaskSettings settings;
        ApplyStrategy(strategy, label_selector, &settings.strategy, &settings.label_selector);
        settings.resources = resources;  // the package gives the whole shape ({} for num_cpus=0)
        settings.max_retries = max_retries;
        settings.python = python;
        settings.num_returns = num_returns;
        settings.accelerator_type = accelerator_type;
        settings.name = task_name;
        std::vector<std::string> ids;
        {
          GilRelease unlocked;
          ids = airt::internal::SubmitTask(name, std::move(arguments), settings);
        }
        return AsBytes(ids);
      },
      py::arg("name"), py::arg("args"), py::arg("resources"), py::arg("max_retries"),
      py::arg("python"), py::arg("num_returns") = 1, py::arg("accelerator_type") = "",
      py::arg("task_name") = "", py::arg("strategy") = py::none(),
      py::arg("label_selector") = std::map<std::string, std::string>());

  // Actors: created from a factory (a C++ one, or with `python` a pickled Python class), called
  // by method name, found by name, killed.
  m.def(
      "create_actor",
      [](const std::string& factory, const py::list& args,
         const std::map<std::string, double>& resources, const std::string& name,
         const std::string& ns, int max_restarts, int max_concurrency, bool python,
         const std::string& accelerator_type, bool detached, int max_task_retries,
         const py::object& strategy, const std::map<std::string, std::string>& label_selector) {
        airt::internal::ActorSettings settings;
        ApplyStrategy(strategy, label_selector, &settings.strategy, &settings.label_selector);
        settings.resources = resources;
        settings.accelerator_type = accelerator_type;
        settings.detached = detached;
        settings.max_task_retries = max_task_retries;
        settings.name = name;
        settings.ns = ns;
        settings.max_restarts = max_restarts;
        settings.max_concurrency = max_concurrency;
        settings.python = python;
        std::vector<airt::internal::Argument> arguments = Arguments(args);
        std::string id;
        {
          GilRelease unlocked;
          id = airt::internal::CreateActor(factory, std::move(arguments), settings);
        }
        return py::bytes(id);
      },
      py::arg("factory"), py::arg("args"), py::arg("resources"), py::arg("name"), py::arg("ns"),
      py::arg("max_restarts"), py::arg("max_concurrency"), py::arg("python"),
      py::arg("accelerator_type") = "", py::arg("detached") = false,
      py::arg("max_task_retries") = 0, py::arg("strategy") = py::none(),
      py::arg("label_selector") = std::map<std::string, std::string>());
  // A method call's return ids (num_returns of them).
  m.def(
      "submit_actor_task",
      [](py::bytes actor, const std::string& method, const py::list& args, int num_returns) {
        std::string actor_id(actor);
        std::vector<airt::internal::Argument> arguments = Arguments(args);
        std::vector<std::string> ids;
        {
          GilRelease unlocked;
          ids =
              airt::internal::SubmitActorTask(actor_id, method, std::move(arguments), num_returns);
        }
        return AsBytes(ids);
      },
      py::arg("actor"), py::arg("method"), py::arg("args"), py::arg("num_returns") = 1);
  m.def("get_actor", [](const std::string& name, const std::string& ns) -> py::object {
    std::string id;
    {
      GilRelease unlocked;
      id = airt::internal::LookupActor(name, ns);
    }
    if (id.empty()) return py::none();
    return py::bytes(id);
  });
  m.def("kill_actor", [](py::bytes actor, bool no_restart) {
    std::string actor_id(actor);
    GilRelease unlocked;
    airt::internal::KillActor(actor_id, no_restart);
  });

  // Cancels the task that makes `ref` (ray.cancel; airt/cancel.h says what happens when).
  m.def(
      "cancel",
      [](py::bytes ref, bool force, bool recursive) {
        // The core refuses force on an actor call: InvalidArgumentError, a ValueError as in Ray.
        std::string id(ref);
        GilRelease unlocked;
        airt::internal::CancelTask(id, force, recursive);
      },
      py::arg("ref"), py::arg("force"), py::arg("recursive"));

  // The cluster's nodes: dicts of NodeID, Alive, NodeManagerAddress, Resources, Available, Local.
  m.def("nodes", [] {
    std::vector<airt::internal::NodeInfo> nodes;
    {
      GilRelease unlocked;
      nodes = airt::internal::ClusterNodes();
    }
    py::list out;
    for (const auto& n : nodes) {
      py::dict d;
      d["NodeID"] = n.node_id;
      d["Alive"] = n.alive;
      d["NodeManagerAddress"] = n.address;
      d["Resources"] = n.total;
      d["Available"] = n.available;
      d["Local"] = n.local;
      out.append(d);
    }
    return out;
  });
  // The local node's store: a dict of capacity_bytes, used_bytes, num_objects, num_spilled,
  // spilled_bytes (airt.data's back-pressure budget and its tests).
  m.def("store_stats", [] {
    std::vector<std::pair<std::string, uint64_t>> stats;
    {
      GilRelease unlocked;
      stats = airt::internal::LocalStoreStats();
    }
    py::dict d;
    for (const auto& [name, value] : stats) d[py::str(name)] = value;
    return d;
  });
  m.def("job_id", [] { return airt::internal::JobIdHex(); });
  // The job's namespace: a driver's init(namespace=), which its workers read from the head.
  m.def("namespace", [] { return airt::GetNamespace(); });
  m.def("worker_id", [] { return airt::internal::WorkerIdHex(); });
  m.def("head_address", [] { return airt::internal::HeadAddress(); });
  // The running task's (name, resources it holds, actor restarts before it): an actor creation's
  // are the actor's own. Empty outside a task.
  m.def("current_task_info", [] {
    const airt::internal::RunningTask& running = airt::internal::ThisThreadsTask();
    return py::make_tuple(running.name, running.resources, running.actor_restarts);
  });

  // The head's KV: the function table of Python functions.
  m.def("kv_put",
        [](const std::string& ns, const std::string& key, py::bytes value, bool overwrite) {
          std::string v(value);
          GilRelease unlocked;
          return airt::internal::KvPut(ns, key, v, overwrite);
        });
  m.def("kv_get", [](const std::string& ns, const std::string& key) -> py::object {
    std::optional<std::string> value;
    {
      GilRelease unlocked;
      value = airt::internal::KvGet(ns, key);
    }
    if (!value) return py::none();
    return py::bytes(*value);
  });

  // Streaming generators (airt/generator.h): a generator call's id is its completion's; its
  // items come from generator_next, each id once, None at the end.
  m.def(
      "submit_streaming",
      [](const std::string& name, const py::list& args,
         const std::map<std::string, double>& resources, int max_retries, bool python,
         const std::string& accelerator_type, const std::string& task_name, int backpressure,
         const py::object& strategy, const std::map<std::string, std::string>& label_selector) {
        std::vector<airt::internal::Argument> arguments = Arguments(args);
        airt::internal::TaskSettings settings;
        ApplyStrategy(strategy, label_selector, &settings.strategy, &settings.label_selector);
        settings.resources = resources;
        settings.max_retries = max_retries;
        settings.python = python;
        settings.accelerator_type = accelerator_type;
        settings.name = task_name;
        settings.streaming = true;
        settings.generator_backpressure = backpressure;
        std::string id;
        {
          GilRelease unlocked;
          id = airt::internal::SubmitTask(name, std::move(arguments), settings).at(0);
        }
        return py::bytes(id);
      },
      py::arg("name"), py::arg("args"), py::arg("resources"), py::arg("max_retries"),
      py::arg("python"), py::arg("accelerator_type"), py::arg("task_name"),
      py::arg("backpressure"), py::arg("strategy") = py::none(),
      py::arg("label_selector") = std::map<std::string, std::string>());
  m.def(
      "submit_streaming_actor_task",
      [](py::bytes actor, const std::string& method, const py::list& args, int backpressure) {
        std::string actor_id(actor);
        std::vector<airt::internal::Argument> arguments = Arguments(args);
        std::string id;
        {
          GilRelease unlocked;
          id = airt::internal::SubmitStreamingActorTask(actor_id, method, std::move(arguments),
                                                        backpressure)
                   .at(0);
        }
        return py::bytes(id);
      },
      py::arg("actor"), py::arg("method"), py::arg("args"), py::arg("backpressure"));
  // The next item's id of the stream `completed`, waiting at most `timeout` seconds (None: no
  // limit); None once the generator ended and every item was taken.
  m.def(
      "generator_next",
      [](py::bytes completed, std::optional<double> timeout) -> py::object {
        std::string id(completed);
        std::string next;
        {
          GilRelease unlocked;
          next = airt::internal::NextGeneratorItem(id, TimeoutMs(timeout));
        }
        if (next.empty()) return py::none();
        return py::bytes(next);
      },
      py::arg("completed"), py::arg("timeout"));
  // In a worker: the item sink of the streaming task this thread runs, or None.
  struct Emitter {
    std::shared_ptr<airt::internal::GeneratorEmitter> emitter;
  };
  py::class_<Emitter>(m, "GeneratorEmitter").def("emit", [](Emitter& e, py::bytes item) {
    std::string bytes(item);
    GilRelease unlocked;
    e.emitter->Emit(std::move(bytes));
  });
  m.def("current_generator", []() -> py::object {
    std::shared_ptr<airt::internal::GeneratorEmitter> emitter =
        airt::internal::ThisThreadsGenerator();
    if (!emitter) return py::none();
    return py::cast(Emitter{std::move(emitter)});
  });

  // A Python worker's life (python -m airt._private.worker FLAGS): airt-worker's own loop, whose
  // tasks for functions no C++ library registers go to `call(function, args) -> (ok, bytes or
  // str)`. `interrupt(task_id)` (None: tasks cannot be interrupted) is called on the loop's thread
  // to stop a running task that is cancelled.
  m.def("run_worker", [](std::vector<std::string> argv, py::function call, py::object interrupt) {
    std::vector<char*> args;
    std::string program = "airt._private.worker";
    args.push_back(program.data());
    for (std::string& a : argv) args.push_back(a.data());
    auto options = airt::internal::ParseWorkerOptions(static_cast<int>(args.size()), args.data());
    if (!options.ok()) throw std::invalid_argument(options.status().ToString());
    if (!options->log_file.empty()) (void)airt::SetLogFile(options->log_file);
    // Copied and dropped by the worker's threads without the GIL: held through a pointer whose
    // deleter takes it.
    std::shared_ptr<py::function> callback(new py::function(std::move(call)), [](py::function* f) {
      py::gil_scoped_acquire locked;
      delete f;
    });
    // call(kind, function, actor, args) -> (ok, value): kind "task" or "method" answers the
    // pickled return (or a list, one per return), "create" the new actor instance; not ok:
    // (False, the remote traceback, the pickled exception, its kind's number).
    airt::internal::Fallback fallback = [callback](airt::internal::TaskKind kind,
                                                   const std::string& function, void* actor,
                                                   std::span<const std::string_view> in) {
      py::gil_scoped_acquire locked;
      py::function& call = *callback;
      airt::internal::InvokeOutcome outcome;
      const char* kind_name = kind == airt::internal::TaskKind::kNormal          ? "task"
                              : kind == airt::internal::TaskKind::kActorCreation ? "create"
                                                                                 : "method";
      try {
        py::list values;
        for (std::string_view a : in) values.append(py::bytes(a.data(), a.size()));
        py::object instance = actor ? *static_cast<py::object*>(actor) : py::none();
        py::tuple result = call(kind_name, function, instance, values);
        if (!result[0].cast<bool>()) {
          // (False, traceback[, the pickled exception, the schema's kind]):
          // airt._private.worker._call.
          bool full = result.size() >= 4;
          outcome = airt::internal::UserException(
              result[1].cast<std::string>(), full ? std::string(result[2].cast<py::bytes>()) : "");
          if (full) outcome.failure = static_cast<airt::ErrorKind>(result[3].cast<int>());
          return outcome;
        }
        if (kind == airt::internal::TaskKind::kActorCreation) {
          // The instance lives as long as the worker's actor; dropped with the GIL taken.
          outcome.instance = std::shared_ptr<void>(new py::object(result[1]), [](void* p) {
            py::gil_scoped_acquire again;
            delete static_cast<py::object*>(p);
          });
        } else if (py::isinstance<py::list>(result[1])) {  // num_returns != 1: one per return
          for (const py::handle& r : result[1].cast<py::list>()) {
            outcome.returns.push_back(std::string(r.cast<py::bytes>()));
          }
        } else {
          outcome.returns.push_back(std::string(result[1].cast<py::bytes>()));
        }
      } catch (const py::error_already_set& e) {
        outcome = airt::internal::UserException(e.what());
      }
      return outcome;
    };
    airt::internal::Interrupt interrupter = InterruptHook(std::move(interrupt));
    GilRelease unlocked;
    return airt::internal::RunWorker(*options, fallback, interrupter);
  });
}
