// Submitting tasks and moving objects from a driver, shaped like Ray's C++ API:
//
//   airt::Init();                                   // joins, or starts a local cluster
//   auto sum = airt::Task(Add).Remote(2, 3);        // an ObjectRef<int>
//   auto twice = airt::Task(Add).Remote(sum, sum);  // refs as arguments: resolved first
//   int five = *airt::Get(sum);
//   airt::Shutdown();
//
// Functions must be registered with AIRT_REMOTE in code both the driver and the workers load.
// Errors of a task surface at Get as exceptions (airt/exceptions.h). Thread-safe after Init.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "airt/exceptions.h"
#include "airt/generator.h"
#include "airt/internal/function_registry.h"
#include "airt/internal/serialization.h"
#include "airt/placement_group.h"
#include "airt/runtime_env.h"
#include "airt/scheduling_strategies.h"

namespace airt {

// Whether an actor outlives the job that created it (Ray's ActorLifetime).
enum class ActorLifetime { NON_DETACHED, DETACHED };

// Ray's RayConfig, with every one of its fields, and a few of ray.init()'s.
struct Config {
  // The head, host:port. Empty: AIRT_ADDRESS; when that is unset too, Init starts a local cluster.
  std::string address;
  // Ray's local mode, for debugging: no cluster is started or joined; tasks and actors run on
  // threads of this process (each task on a thread of its own, each actor on its own threads),
  // objects live in its memory. address, code_search_path and the local cluster's fields are
  // ignored; the functions must be linked into (or loaded by) this process.
  bool local_mode = false;
  std::string node_address = "127.0.0.1";  // this machine's node

  // Folders (or library files) whose AIRT_REMOTE functions this job's workers load, besides
  // their node's code search path; empty: the folder of the running executable, as Ray's C++
  // driver does. The paths must exist on the nodes' machines (one machine: as they are).
  std::vector<std::string> code_search_path = {};

  // For the local cluster only (ignored when joining a cluster), as ray.init() takes them:
  std::optional<int> num_cpus = {};              // the node's CPUs; unset: this machine's
  std::optional<int> num_gpus = {};              // the node's GPUs; unset: those the node detects
  std::map<std::string, double> resources = {};  // the node's custom resources, e.g. {"TPU": 2}
  std::optional<uint64_t> object_store_memory = {};  // the node's store, bytes; unset: default

  // Flags for the local cluster's head and node, spelled as `ray start` takes them:
  // "--num-cpus=2", "--num-gpus=1", "--resources={\"x\": 1}" (single quotes around the JSON are
  // dropped, as a shell would), "--object-store-memory=BYTES"; "--flag value" as two entries works
  // too. They override the fields above. Another flag, or a bad value, makes Init throw Exception
  // naming it. Ignored (but checked) when joining a cluster, as Ray's head_args.
  std::vector<std::string> head_args = {};

  // Where this job's named actors live and are looked up (Ray's ray_namespace); "": an anonymous
  // namespace of the job's own.
  std::string ray_namespace;
  // The lifetime of this job's named actors that do not choose (SetDetached): DETACHED makes them
  // outlive the job. Unnamed actors stay NON_DETACHED (nothing could find them after the job).
  ActorLifetime default_actor_lifetime = ActorLifetime::NON_DETACHED;
  // The job's runtime environment: every task and actor of the job runs in it, under what the
  // task's or actor's own SetRuntimeEnv adds (env_vars merged name by name). Init throws
  // UnimplementedError for a field airt's C++ workers cannot honour (airt/runtime_env.h).
  std::optional<RuntimeEnv> runtime_env = {};
  // Ray's Redis password: accepted and not used (airt's head has no Redis, and no authentication
  // yet).
  std::optional<std::string> redis_password_ = {};
};

// Connects this process to the cluster as a driver (one job): the head at config.address, else
// at AIRT_ADDRESS. With neither, starts a local cluster first, as ray.init() does: an airt-head
// and an airt-node on 127.0.0.1 with free ports and a temp folder of their own (airt-head and
// airt-node are found in $AIRT_BIN_DIR, beside the program or airt's libraries, or on PATH); it
// is stopped by Shutdown or at exit, and dies with this process if it is killed. Throws
// UnavailableError when the head or the node cannot be reached or the local cluster cannot start
// (the message names what was looked for or the daemon's log), Exception for a bad Config.
void Init(const Config& config = {});
// As Init(config), with flags read from the command line: --airt_address=HOST:PORT (or Ray's
// --ray_address=...) overrides config.address, --airt_code_search_path=DIR[:DIR...] (or
// --ray_code_search_path=...) config.code_search_path; Ray's --ray_job_namespace=NS,
// --ray_redis_password=P, --ray_head_args="--num-cpus=2 ..." (appended to head_args) and
// --ray_default_actor_lifetime=detached|non_detached (anything else throws Exception) set theirs.
// Other arguments are left alone.
void Init(Config config, int argc, char** argv);
bool IsInitialized();
// Finishes the job and disconnects, then stops the local cluster Init started, if any. Refs
// obtained before must not be used after.
void Shutdown();

namespace internal {
// Counts a reference to the object `id` until the returned holder goes (nothing before Init).
std::shared_ptr<void> HoldObject(const std::string& id);
// What Get gives for an ObjectRef<T>: the value, or nothing for a void task's.
template <typename T>
using GotValue = std::conditional_t<std::is_void_v<T>, void, std::shared_ptr<T>>;
}  // namespace internal

namespace internal {
// The owner a ref written into a value names (docs/ownership.md): the host:port of its
// proto::Owner and its worker id (binary).
struct RefOwner {
  std::string address;
  std::string worker;
};
// The owner of `id` for a ref being written into a value. The object stays while the value's
// refs are collected for a task's argument (ContainedRefs), else until a process borrows it (a
// return's, a put's). Throws UnavailableError when this process cannot serve as an owner.
RefOwner OwnerOfRef(const std::string& id);
// A ref read from a value: holds `id`, borrowed from `owner` unless this process owns it (the
// first hold registers with the owner), until the returned holder goes.
std::shared_ptr<void> HoldBorrowed(const std::string& id, const RefOwner& owner);
// While one lives, the refs the calling thread writes into values are collected here (an
// argument's refs: its task holds them until it is done).
class ContainedRefs {
 public:
  ContainedRefs();
  ~ContainedRefs();
  ContainedRefs(const ContainedRefs&) = delete;
  ContainedRefs& operator=(const ContainedRefs&) = delete;
  void Add(const std::string& id) { ids_.push_back(id); }
  std::vector<std::string> Take() { return std::move(ids_); }

 private:
  std::vector<std::string> ids_;
  ContainedRefs* outer_;
};
struct BorrowedTag {};
}  // namespace internal

// A reference to an object: a task's return or a Put of this process (which owns it), or a ref
// read from a value (an argument, a return), borrowed from its owner. Copies share one
// reference; when the last copy goes (and no unfinished task takes the object as an argument,
// and no other process borrows it), the object is freed everywhere, as in Ray. A ref inside a
// value (a std::vector<ObjectRef<T>> parameter, a struct's field, a return) travels as its id and
// its owner's address, never as the object's bytes (docs/ownership.md).
template <typename T>
class ObjectRef {
 public:
  ObjectRef() = default;
  explicit ObjectRef(std::string id) : id_(std::move(id)), hold_(internal::HoldObject(id_)) {}
  // A ref read from a value (msgpack), holding what internal::HoldBorrowed gave.
  ObjectRef(internal::BorrowedTag, std::string id, std::shared_ptr<void> hold)
      : id_(std::move(id)), hold_(std::move(hold)) {}
  const std::string& ID() const { return id_; }  // 28 bytes

  // airt::Get(*this[, timeout_ms]) (Ray's ObjectRef::Get): the value, or, for an ObjectRef<void>,
  // nothing once the task has finished; its errors are thrown.
  internal::GotValue<T> Get() const;
  internal::GotValue<T> Get(int64_t timeout_ms) const;

 private:
  std::string id_;
  std::shared_ptr<void> hold_;
};

namespace internal {

struct Argument {
  std::string value;  // msgpack bytes, when not a reference
  std::string ref;    // an object id, when a reference
  // Refs nested in a vector (a std::vector<ObjectRef<T>> for a std::vector<T> parameter): the
  // task receives the vector of their values.
  std::vector<std::string> ref_list;
  bool is_list = false;
  std::vector<std::string> contained;  // refs written inside `value`: held until the task ends
};

template <typename T>
struct RefVector : std::false_type {};
template <typename U>
struct RefVector<std::vector<ObjectRef<U>>> : std::true_type {
  using Value = U;
};
struct TaskSettings {
  std::map<std::string, double> resources = {{"CPU", 1}};
  std::string accelerator_type;  // "": any node; else only nodes with this label
  std::string name;
  int max_retries = 3;
  int num_returns = 1;
  bool python = false;  // a Python function (the airt package's): runs on a Python worker
  // SetRuntimeEnv's env_vars: set while the task runs. Unset: none of its own.
  std::optional<std::map<std::string, std::string>> env_vars;
  // A generator's task (airt/generator.h): its items stream back while it runs.
  bool streaming = false;
  // Streaming: at most this many items ahead of the consumer (Ray's
  // _generator_backpressure_num_objects); <= 0: no limit, Ray's default.
  int generator_backpressure = -1;
  // SetPlacementGroup: the group's hex id ("": none), bundle (-1: any of its bundles), and
  // whether the task's own tasks and actors run in the group too.
  std::string placement_group_id;
  int bundle_index = -1;
  bool capture_child_tasks = false;
  SchedulingStrategy strategy;  // SetSchedulingStrategy
  bool strategy_set = false;    // SetSchedulingStrategy was called: no captured group applies
  LabelSelector label_selector;  // SetLabelSelector
};

// The env_vars of `env`, checked: UnimplementedError names a field airt's C++ workers cannot
// honour (working_dir, pip, conda, ...); RuntimeEnvError when env_vars is not an object of
// strings.
std::map<std::string, std::string> RuntimeEnvVars(const RuntimeEnv& env);

// The cluster's nodes as the head sees them (the Python client's ray.nodes() and resources).
struct NodeInfo {
  std::string node_id;  // hex
  std::string address;  // host:port of its Node service
  bool alive = false;
  bool local = false;  // this process's node
  std::map<std::string, double> total, available;
};
std::vector<NodeInfo> ClusterNodes();
// Placement groups as the head lists them (api/placement_group.cc).
struct PlacementGroupEntry {
  std::string id;  // hex
  std::string name, ns, job_id;
  int strategy = 0;  // PlacementStrategy's value
  std::vector<std::map<std::string, double>> bundles;
  int state = 0;                        // PlacementGroupState's value
  std::vector<std::string> bundle_nodes;  // hex node ids, by bundle, once CREATED
  bool detached = false;
  std::string pending_reason;  // PENDING: why
  bool infeasible = false;     // PENDING and bigger than every alive node
};
std::vector<PlacementGroupEntry> ListPlacementGroups();
// WaitPlacementGroupReady in milliseconds (< 0: no limit).
bool WaitPlacementGroupMs(const std::string& id, int64_t timeout_ms);
// What work in bundle `index` (-1: any) of group `group_hex` asks for instead of `resources`
// (the bundle's formatted names, common/bundle_resources.h); `resources` when group_hex is "".
std::map<std::string, double> InPlacementGroup(const std::map<std::string, double>& resources,
                                               const std::string& group_hex, int index);
// This process's job id (hex).
std::string JobIdHex();
// This process's worker id (hex; a driver has one too) and the head it joined (host:port).
std::string WorkerIdHex();
std::string HeadAddress();

// The head's internal KV (the Python client keeps its function table there).
bool KvPut(const std::string& ns, const std::string& key, const std::string& value, bool overwrite);
std::optional<std::string> KvGet(const std::string& ns, const std::string& key);
bool KvDelete(const std::string& ns, const std::string& key);  // true: it was there
// Deletes every key of `ns` starting with `prefix` (not empty); how many there were.
uint32_t KvDeletePrefix(const std::string& ns, const std::string& prefix);

std::vector<std::string> SubmitTask(const std::string& function, std::vector<Argument> args,
                                    const TaskSettings& settings);
// Calls a generator method of the actor `actor_id` (airt/generator.h): the id of its completion,
// which NextGeneratorItem takes.
std::vector<std::string> SubmitStreamingActorTask(const std::string& actor_id,
                                                  const std::string& method,
                                                  std::vector<Argument> args, int backpressure);
// The name the function at `address` was registered under; throws Exception naming `what`
// ("function", "actor factory") when it was not registered.
std::string RegisteredName(const void* address, const char* what);
std::string PutBytes(std::string bytes);
// The local node's object store now: capacity_bytes, used_bytes (allocated in its arena),
// num_objects, num_spilled, spilled_bytes (airt.data's back-pressure and its tests read it).
// Throws UnimplementedError in local mode.
std::vector<std::pair<std::string, uint64_t>> LocalStoreStats();
// Where each object of `ids` lies, as this process (its owner) knows: the host:port of the Node
// service whose store holds it (NodeInfo::address), or "" when it is held inline, not made yet,
// or owned elsewhere; all "" in local mode. Never blocks.
std::vector<std::string> ObjectNodeAddresses(const std::vector<std::string>& ids);
// Puts an object of `size` bytes that `write` writes in place (into the node's store when large).
std::string PutWith(uint64_t size, const std::function<void(uint8_t* out)>& write);
// Copies into an object being written (non-temporal stores for large copies).
void CopyOut(uint8_t* dst, const char* src, size_t n);

// msgpack sinks: one counts the bytes of a value, the other writes them where PutWith says.
struct CountingSink {
  uint64_t size = 0;
  void write(const char*, size_t n) {
    size += n;
  }  // NOLINT(readability-make-member-function-const)
};
struct BufferSink {
  uint8_t* out;
  void write(const char* data, size_t n) {  // NOLINT(readability-make-member-function-const)
    CopyOut(out, data, n);
    out += n;
  }
};
// Throws the exception matching a task's error, TimeoutError, or UnavailableError.
std::vector<std::string> GetBytes(const std::vector<std::string>& ids, int64_t timeout_ms);
// An object's bytes where they lie (the node's store, or the process's memory for small values),
// kept there and pinned while `hold` lives. Holds still alive at Shutdown are released then: the
// bytes must not be read after it.
struct PinnedBytes {
  std::string_view bytes;
  std::shared_ptr<void> hold;
};
std::vector<PinnedBytes> GetPinned(const std::vector<std::string>& ids, int64_t timeout_ms);
// The task the calling thread runs, as binary ids ("" outside a task, or for a task of no actor).
std::string CurrentTaskId();
std::string CurrentActorId();
// As GetBytes, but hands each object's bytes to `use` where they lie (the node's store, pinned
// for the call): a value is deserialized with no copy in between.
void GetEach(const std::vector<std::string>& ids, int64_t timeout_ms,
             const std::function<void(size_t i, std::string_view bytes)>& use);
// Which of `ids` are ready after waiting for `num_ready` of them, at most timeout_ms.
std::vector<bool> WaitReady(const std::vector<std::string>& ids, int num_ready, int64_t timeout_ms);

template <typename P, typename A>
Argument MakeArgument(A&& arg) {
  using Given = std::remove_cvref_t<A>;
  if constexpr (RefVector<Given>::value && !std::is_same_v<std::remove_cvref_t<P>, Given>) {
    static_assert(
        std::is_same_v<std::remove_cvref_t<P>, std::vector<typename RefVector<Given>::Value>>,
        "a std::vector<ObjectRef<T>> is passed for a std::vector<T> parameter");
    Argument list;
    list.is_list = true;
    for (const auto& ref : arg) list.ref_list.push_back(ref.ID());
    return list;
  } else if constexpr (requires { typename Given::ObjectRefTag; } ||
                       std::is_same_v<Given, ObjectRef<std::remove_cvref_t<P>>>) {
    return Argument{"", arg.ID(), {}, false, {}};
  } else {
    ContainedRefs contained;  // refs inside the value are borrowed by the task, not resolved
    std::string value = Serialize<std::remove_cvref_t<P>>(std::forward<A>(arg));
    return Argument{std::move(value), "", {}, false, contained.Take()};
  }
}


// What every task and actor builder takes: where it may run (resources, a placement group).
// `Self` is the builder, for chaining; `Settings` what it fills.
template <typename Self, typename Settings>
class SchedulingOptions {
 public:
  Self& SetResource(const std::string& name, double amount) {
    settings_.resources[name] = amount;
    return self();
  }
  Self& SetResources(const std::map<std::string, double>& resources) {
    for (const auto& [name, amount] : resources) settings_.resources[name] = amount;
    return self();
  }
  // Runs only on nodes labelled ray.io/accelerator-type=`type` ("H100", "A10"; "": any node), as
  // Ray's accelerator_type option.
  Self& SetAcceleratorType(std::string type) {
    settings_.accelerator_type = std::move(type);
    return self();
  }
  // Runs it in bundle `bundle_index` of `group` (-1: any bundle), on that bundle's reserved
  // resources: its own resource request is taken from the bundle's, as Ray does. With
  // `capture_child_tasks` (Ray's placement_group_capture_child_tasks), the tasks and actors it
  // submits without a group or a strategy of their own run in the group too (any bundle), and so
  // do theirs.
  Self& SetPlacementGroup(const PlacementGroup& group, int bundle_index = -1,
                          bool capture_child_tasks = false) {
    settings_.placement_group_id = group.ID();
    settings_.bundle_index = bundle_index;
    settings_.capture_child_tasks = capture_child_tasks;
    return self();
  }
  // How the schedulers choose its node (airt/scheduling_strategies.h). A bad node id or label
  // expression throws InvalidArgumentError when the work is submitted. Work given a strategy is
  // not captured into the placement group of the task submitting it (even DefaultSchedulingStrategy,
  // as Ray's "DEFAULT").
  Self& SetSchedulingStrategy(SchedulingStrategy strategy) {
    settings_.strategy = std::move(strategy);
    settings_.strategy_set = true;
    return self();
  }
  // Only nodes whose labels match every entry (Ray 2.60's label_selector), with any strategy.
  Self& SetLabelSelector(LabelSelector selector) {
    settings_.label_selector = std::move(selector);
    return self();
  }

 protected:
  Self& self() { return static_cast<Self&>(*this); }
  Settings settings_;
};

// The options every task builder takes (a C++ function's TaskCaller, a Python function's
// PyTaskCaller), as Ray's C++ TaskCaller has them.
template <typename Self>
class TaskOptions : public SchedulingOptions<Self, TaskSettings> {
 public:
  Self& SetName(std::string name) {
    this->settings_.name = std::move(name);
    return this->self();
  }
  Self& SetMaxRetries(int max_retries) {
    this->settings_.max_retries = max_retries;
    return this->self();
  }
  // Runs the task in `env`'s environment (env_vars set while it runs), over the job's. Throws
  // UnimplementedError for a field airt cannot honour (RuntimeEnvVars).
  Self& SetRuntimeEnv(const RuntimeEnv& env) {
    this->settings_.env_vars = RuntimeEnvVars(env);
    return this->self();
  }
  // A generator task (airt::Generator<T>) makes at most `items` items ahead of what its
  // consumer took; <= 0 (the default): no limit.
  Self& SetGeneratorBackpressure(int items) {
    this->settings_.generator_backpressure = items;
    return this->self();
  }
};

}  // namespace internal

// Builds and submits a call of a registered function.
template <typename R, typename... P>
class TaskCaller : public internal::TaskOptions<TaskCaller<R, P...>> {
 public:
  explicit TaskCaller(R (*fn)(P...)) : fn_(fn) {}

  // Each argument is a value of the parameter's type or an ObjectRef to one. An ObjectRef<R>, or
  // for a generator (R = Generator<T>) an ObjectRefGenerator<T> whose items stream in.
  template <typename... A>
  auto Remote(A&&... args) {
    static_assert(sizeof...(A) == sizeof...(P), "Remote takes one argument per parameter");
    std::string name = internal::RegisteredName(reinterpret_cast<const void*>(fn_), "function");
    std::vector<internal::Argument> arguments = {
        internal::MakeArgument<P>(std::forward<A>(args))...};
    if constexpr (internal::IsGenerator<R>::value) {
      internal::TaskSettings settings = this->settings_;
      settings.streaming = true;
      return ObjectRefGenerator<typename R::value_type>(
          internal::SubmitTask(name, std::move(arguments), settings).at(0));
    } else {
      return ObjectRef<R>(internal::SubmitTask(name, std::move(arguments), this->settings_).at(0));
    }
  }

 private:
  R (*fn_)(P...);
};

template <typename R, typename... P>
TaskCaller<R, P...> Task(R (*fn)(P...)) {
  return TaskCaller<R, P...>(fn);
}

// Stores `value`; a large one is serialized straight into the node's store (one copy).
template <typename T>
ObjectRef<T> Put(const T& value) {
  internal::CountingSink counter;
  msgpack::pack(counter, value);
  return ObjectRef<T>(internal::PutWith(counter.size, [&](uint8_t* out) {
    internal::BufferSink sink{out};
    msgpack::pack(sink, value);
  }));
}

// The value of `ref` (waiting for it), as Ray's C++ API returns it.
template <typename T>
std::shared_ptr<T> Get(const ObjectRef<T>& ref, int64_t timeout_ms = -1) {
  std::shared_ptr<T> out;
  internal::GetEach({ref.ID()}, timeout_ms, [&](size_t, std::string_view bytes) {
    out = std::make_shared<T>(internal::Deserialize<T>(bytes));
  });
  return out;
}

template <typename T>
std::vector<std::shared_ptr<T>> Get(const std::vector<ObjectRef<T>>& refs,
                                    int64_t timeout_ms = -1) {
  std::vector<std::string> ids;
  for (const auto& r : refs) ids.push_back(r.ID());
  std::vector<std::shared_ptr<T>> out(ids.size());
  internal::GetEach(ids, timeout_ms, [&](size_t i, std::string_view bytes) {
    out[i] = std::make_shared<T>(internal::Deserialize<T>(bytes));
  });
  return out;
}

// A void task's ref: returns once the task has finished (throws its error, or TimeoutError).
inline void Get(const ObjectRef<void>& ref, int64_t timeout_ms = -1) {
  internal::GetEach({ref.ID()}, timeout_ms, [](size_t, std::string_view) {});
}
inline void Get(const std::vector<ObjectRef<void>>& refs, int64_t timeout_ms = -1) {
  std::vector<std::string> ids;
  for (const auto& r : refs) ids.push_back(r.ID());
  internal::GetEach(ids, timeout_ms, [](size_t, std::string_view) {});
}

template <typename T>
internal::GotValue<T> ObjectRef<T>::Get() const {
  return airt::Get(*this, -1);
}
template <typename T>
internal::GotValue<T> ObjectRef<T>::Get(int64_t timeout_ms) const {
  return airt::Get(*this, timeout_ms);
}

// The namespace this job's named actors live in: Config::ray_namespace, or the anonymous one
// Init made for the job (Ray's ray::GetNamespace). Throws UnavailableError before Init.
std::string GetNamespace();

template <typename T>
struct WaitResult {
  std::vector<ObjectRef<T>> ready;
  std::vector<ObjectRef<T>> unready;
};

// Waits until `num_objects` of `refs` are ready (an error counts as ready) or timeout_ms passes
// (< 0: no limit), as Ray's Wait: `ready` holds at most num_objects refs (the first ready ones,
// in the given order); every other ref is in `unready`.
template <typename T>
WaitResult<T> Wait(const std::vector<ObjectRef<T>>& refs, int num_objects, int64_t timeout_ms) {
  if (num_objects < 0 || static_cast<size_t>(num_objects) > refs.size()) {
    throw InvalidArgumentError("Wait: num_objects is " + std::to_string(num_objects) + " for " +
                    std::to_string(refs.size()) + " refs");
  }
  std::vector<std::string> ids;
  for (const auto& r : refs) ids.push_back(r.ID());
  std::vector<bool> ready = internal::WaitReady(ids, num_objects, timeout_ms);
  WaitResult<T> out;
  for (size_t i = 0; i < refs.size(); ++i) {
    bool take = ready[i] && out.ready.size() < static_cast<size_t>(num_objects);
    (take ? out.ready : out.unready).push_back(refs[i]);
  }
  return out;
}

}  // namespace airt

// A ref inside a msgpack value: the array [id (bin, 28 bytes), owner address (str), owner worker
// id (bin, 28 bytes)], written and read through internal::OwnerOfRef and HoldBorrowed.
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  template <typename T>
  struct pack<airt::ObjectRef<T>> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& out, const airt::ObjectRef<T>& ref) const {
      airt::internal::RefOwner owner = airt::internal::OwnerOfRef(ref.ID());
      out.pack_array(3);
      out.pack_bin(static_cast<uint32_t>(ref.ID().size()));
      out.pack_bin_body(ref.ID().data(), static_cast<uint32_t>(ref.ID().size()));
      out.pack(owner.address);
      out.pack_bin(static_cast<uint32_t>(owner.worker.size()));
      out.pack_bin_body(owner.worker.data(), static_cast<uint32_t>(owner.worker.size()));
      return out;
    }
  };

  template <typename T>
  struct convert<airt::ObjectRef<T>> {
    const msgpack::object& operator()(const msgpack::object& in, airt::ObjectRef<T>& ref) const {
      if (in.type != msgpack::type::ARRAY || in.via.array.size != 3) throw msgpack::type_error();
      const msgpack::object* a = in.via.array.ptr;
      if (a[0].type != msgpack::type::BIN || a[0].via.bin.size != 28 ||
          a[1].type != msgpack::type::STR || a[2].type != msgpack::type::BIN) {
        throw msgpack::type_error();
      }
      std::string id(a[0].via.bin.ptr, a[0].via.bin.size);
      airt::internal::RefOwner owner{std::string(a[1].via.str.ptr, a[1].via.str.size),
                                     std::string(a[2].via.bin.ptr, a[2].via.bin.size)};
      std::shared_ptr<void> hold = airt::internal::HoldBorrowed(id, owner);
      ref = airt::ObjectRef<T>(airt::internal::BorrowedTag{}, std::move(id), std::move(hold));
      return in;
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack
