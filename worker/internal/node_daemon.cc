#include "worker/internal/node_daemon.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include <capnp/ez-rpc.h>
#include <kj/async-io.h>
#include <sys/signalfd.h>
#include <sys/un.h>

#include "common/ids.h"
#include "common/logging.h"
#include "common/rpc_status.h"
#include "objectstore/object_store.h"
#include "objectstore/transfer.h"
#include "worker/internal/child_processes.h"
#include "worker/internal/cluster_view_subscriber.h"
#include "worker/internal/gpu_health.h"
#include "worker/internal/gpu_monitor.h"
#include "worker/internal/head_session.h"
#include "worker/internal/host.h"
#include "worker/internal/job_cleanup.h"
#include "worker/internal/lease_manager.h"
#include "worker/internal/log_streamer.h"
#include "worker/internal/memory_monitor.h"
#include "worker/internal/node_drain.h"
#include "worker/internal/node_service.h"
#include "worker/internal/object_evacuator.h"
#include "worker/internal/worker_pool.h"
#include "worker/scheduling/scheduling.h"

namespace airt::worker {
namespace {

namespace fs = std::filesystem;

constexpr size_t kNodeDirIdChars = 12;
constexpr auto kMaxUnregisterWait = 2 * kj::SECONDS;
// How long a drained node's primary objects have to move before it leaves.
constexpr auto kEvacuationDeadline = 60 * kj::SECONDS;

struct NodeDirs {
  std::string root, store_socket, spill, logs;
};

Result<NodeDirs> MakeNodeDirs(const std::string& temp_dir, const NodeId& id) {
  NodeDirs dirs;
  dirs.root = (fs::path(temp_dir) / ("node-" + id.Hex().substr(0, kNodeDirIdChars))).string();
  dirs.store_socket = dirs.root + "/store.sock";
  dirs.spill = dirs.root + "/spill";
  dirs.logs = dirs.root + "/logs";
  if (dirs.store_socket.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return InvalidArgument("--temp-dir '" + temp_dir + "' is too long: the store socket " +
                           dirs.store_socket + " exceeds " +
                           std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes");
  }
  for (const std::string& dir : {dirs.root, dirs.logs}) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return ErrnoStatus("cannot create the node folder " + dir, ec.value());
  }
  return dirs;
}

std::string Describe(const NodeRegistration& node) {
  std::ostringstream out;
  out << "node " << node.id.Hex() << " at " << node.address << " (service port " << node.node_port
      << ", transfer port " << node.transfer_port << ", store " << node.store_socket << "): {";
  for (size_t i = 0; i < node.total.size(); ++i) {
    double amount = node.total[i].amount;
    out << (i ? ", " : "") << node.total[i].name << ": ";
    if (amount == static_cast<double>(static_cast<int64_t>(amount))) {
      out << static_cast<int64_t>(amount);
    } else {
      out << amount;
    }
  }
  out << "}";
  if (!node.gpu_ids.empty()) {
    out << " GPU ids";
    for (uint32_t id : node.gpu_ids) out << " " << id;
  }
  for (const auto& [key, value] : node.labels) out << " " << key << "=" << value;
  return out.str();
}

// Resolves when one of `signals` (blocked in every thread) arrives; reads it through a signalfd.
class StopSignal {
 public:
  static Result<StopSignal> Open(const sigset_t& signals, kj::LowLevelAsyncIoProvider& io) {
    int fd = ::signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) return ErrnoStatus("signalfd", errno);
    using Flags = kj::LowLevelAsyncIoProvider;
    return StopSignal(io.wrapInputFd(
        fd, Flags::TAKE_OWNERSHIP | Flags::ALREADY_CLOEXEC | Flags::ALREADY_NONBLOCK));
  }
  kj::Promise<int> Next() {
    return stream_->tryRead(&info_, sizeof info_, sizeof info_).then([this](size_t n) {
      return n == sizeof info_ ? static_cast<int>(info_.ssi_signo) : 0;
    });
  }

 private:
  explicit StopSignal(kj::Own<kj::AsyncInputStream> stream) : stream_(kj::mv(stream)) {}
  kj::Own<kj::AsyncInputStream> stream_;
  signalfd_siginfo info_{};
};

// The node's totals, labels and GPU ids as the scheduling library keeps them.
Result<worker::scheduling::NodeResources> MakeNodeResources(const NodeConfig& config) {
  std::map<std::string, double> totals;
  for (const ResourceAmount& r : config.total) totals[r.name] = r.amount;
  Result<worker::scheduling::ResourceSet> set =
      worker::scheduling::ResourceSet::FromDoubles(totals);
  if (!set.ok()) return set.status().WithContext("the node's resources");
  worker::scheduling::Labels labels(config.labels.begin(), config.labels.end());
  Result<worker::scheduling::NodeResources> resources =
      worker::scheduling::NodeResources::Create(std::move(*set), config.gpu_ids, std::move(labels));
  if (!resources.ok()) return resources.status().WithContext("the node's resources");
  return resources;
}

// Workers connect to the node's service: a wildcard bind address is reached on loopback.
std::string AddressForWorkers(const std::string& bind_address) {
  if (bind_address == "0.0.0.0" || bind_address == "*") return "127.0.0.1";
  if (bind_address == "::" || bind_address == "[::]") return "::1";
  return bind_address;
}

// The node's GPU health checks: the fault spec's when given, else the plugin's when it loads;
// null (no checks) for a node without GPUs or with declared GPUs and no plugin. Sets
// `context_bytes` to the CUDA context's own memory, measured here (0 when unknown).
Result<std::unique_ptr<GpuHealthSource>> MakeGpuHealthSource(const NodeConfig& config,
                                                             uint64_t* context_bytes) {
  *context_bytes = 0;
  if (config.gpu_ids.empty()) return std::unique_ptr<GpuHealthSource>();
  if (!config.gpu_fault_spec.empty()) {
    AIRT_ASSIGN_OR_RETURN(std::vector<GpuFault> faults,
                          ParseGpuFaultSpec(config.gpu_fault_spec, config.gpu_ids));
    AIRT_LOG(WARNING) << "GPU health checks inject faults (--gpu-fault-spec '"
                      << config.gpu_fault_spec << "'): no real check runs";
    return std::unique_ptr<GpuHealthSource>(std::make_unique<FaultSpecGpuHealth>(
        std::move(faults), config.gpu_ids, config.gpu_min_bandwidth_fraction));
  }
  std::string path = ChooseGpuPlugin(config.gpu_plugin);
  Result<GpuPlugin> loaded = path.empty() ? Unavailable("no GPU plugin") : GpuPlugin::Load(path);
  if (!loaded.ok() || loaded->DeviceCount() < static_cast<int>(config.gpu_ids.size())) {
    AIRT_LOG(WARNING) << "no GPU health checks: the node's " << config.gpu_ids.size()
                      << " GPU(s) are declared, not all seen by a GPU plugin"
                      << (loaded.ok() ? "" : " (" + loaded.status().ToString() + ")");
    return std::unique_ptr<GpuHealthSource>();
  }
  auto plugin = std::make_shared<GpuPlugin>(std::move(*loaded));
  PluginGpuHealthOptions options;
  std::string type;
  for (const auto& [key, value] : config.labels) {
    if (key == kAcceleratorTypeLabel) type = value;
  }
  for (uint64_t memory : config.gpu_memory) {
    options.expected_gbps.push_back(ExpectedBandwidthGbps(type, memory));
  }
  options.min_bandwidth_fraction = config.gpu_min_bandwidth_fraction;
  // The context this process makes on device 0 is what each worker's context costs too.
  if (plugin->Probe(0, AIRT_GPU_PROBE_MIN_BYTES).ok()) {
    Result<std::vector<GpuProcessMemory>> used = plugin->ProcessMemory(0);
    if (used.ok()) {
      for (const GpuProcessMemory& p : *used) {
        if (p.pid == static_cast<int32_t>(::getpid())) *context_bytes = p.bytes;
      }
    }
  }
  return std::unique_ptr<GpuHealthSource>(
      std::make_unique<PluginGpuHealth>(std::move(plugin), std::move(options)));
}

uint64_t WallMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// A preemption notice (SIGUSR1, e.g. Slurm's sbatch --signal=B:USR1@S): the node asks the head
// to drain it (so that the head shows it draining and places nothing more there; the head then
// calls this node's Node.drain), and drains by itself when the head cannot be reached.
kj::Promise<void> DrainOnPreemptionNotice(HeadConnector& connector, kj::Timer& timer,
                                          const NodeId& id, NodeDrain& drain,
                                          std::string reason, kj::Duration grace,
                                          kj::Duration call_timeout) {
  AIRT_LOG(WARNING) << reason << ": draining within " << grace / kj::MILLISECONDS << " ms";
  auto request = connector.Connect().drainNodeRequest();
  request.setNodeId(capnp::Data::Reader(id.data(), NodeId::kSize));
  request.setReason(reason);
  request.setTimeoutMs(static_cast<uint64_t>(grace / kj::MILLISECONDS));
  return timer.timeoutAfter(call_timeout, request.send().ignoreResult())
      .catch_([&drain, grace, reason](kj::Exception&& e) {
        AIRT_LOG(WARNING) << "the head did not take the preemption notice ("
                          << FromKjException(e).ToString() << "); draining without it";
        Status started = drain.Start(reason, grace);
        if (!started.ok()) AIRT_LOG(WARNING) << started.ToString();
      });
}

}  // namespace

void LeaveCluster(const LeavingNode& node, kj::WaitScope& wait) {
  AIRT_LOG(INFO) << "leaving the cluster: " << node.why;
  if (node.evacuate && node.target.evacuator != nullptr) {
    EvacuationOutcome moved = node.target.evacuator->Evacuate(kEvacuationDeadline).wait(wait);
    AIRT_LOG(INFO) << "evacuated " << moved.moved << " primary objects (" << moved.unreferenced
                   << " unreferenced, " << moved.failed.size() << " could not move)";
    for (const EvacuationFailure& failed : moved.failed) {
      AIRT_LOG(WARNING) << "not moved before leaving: " << failed.reason;
    }
  }
  node.target.leases = nullptr;  // new calls fail with kUnavailable from here on
  node.target.logs = nullptr;
  node.target.store = nullptr;
  node.target.gpus = nullptr;
  node.target.drain = nullptr;
  node.target.evacuator = nullptr;
  node.pool.StopAll().wait(wait);
  if (node.tell_head) node.session.Unregister(node.unregister_timeout).wait(wait);
}

int RunNode(const NodeConfig& given, const sigset_t& stop_signals) {
  NodeRegistration node;
  node.id = NodeId::FromRandom();
  // Besides Ray's "node:<address>", a resource naming this node alone (several nodes may share
  // an address): a node-affinity request asks for a sliver of it.
  NodeConfig config = given;
  config.total.push_back({kNodeResourcePrefix + node.id.Hex(), 1});
  node.address = config.node_address;
  node.total = config.total;
  node.labels = config.labels;
  node.gpu_ids = config.gpu_ids;
  node.pid = static_cast<int32_t>(::getpid());

  Result<NodeDirs> dirs = MakeNodeDirs(config.temp_dir, node.id);
  if (!dirs.ok()) {
    AIRT_LOG(ERROR) << dirs.status().ToString();
    return 1;
  }
  node.temp_dir = dirs->root;
  node.store_socket = dirs->store_socket;

  objectstore::StoreOptions store_options;
  store_options.socket_path = dirs->store_socket;
  store_options.capacity_bytes = config.object_store_memory;
  store_options.spill_dir = dirs->spill;
  if (config.object_store_fallback_limit > 0) {
    store_options.fallback_dir = dirs->root + "/fallback";
    store_options.fallback_limit_bytes = config.object_store_fallback_limit;
  }
  auto transfer_counters = std::make_shared<objectstore::TransferCounters>();
  store_options.transfer_counters = transfer_counters;  // its Stats show what the service sent
  auto store = objectstore::StoreServer::Start(store_options);
  if (!store.ok()) {
    AIRT_LOG(ERROR) << "cannot start the object store: " << store.status().ToString();
    return 1;
  }
  auto transfer = objectstore::TransferServer::Start(
      {dirs->store_socket, config.node_address, config.transfer_port}, transfer_counters);
  if (!transfer.ok()) {
    AIRT_LOG(ERROR) << "cannot start the transfer service: " << transfer.status().ToString();
    return 1;
  }
  node.transfer_port = (*transfer)->port();

  Result<worker::scheduling::NodeResources> resources = MakeNodeResources(config);
  if (!resources.ok()) {
    AIRT_LOG(ERROR) << resources.status().ToString();
    return 1;
  }

  int exit_code = 0;
  Status served = CatchKj([&] {
    // The node's own Cap'n Proto service (the Node interface); its port is the node's address for
    // the head and for workers, and this server keeps the thread's EzRpc event loop alive. It
    // forwards to the lease manager once that exists (it needs the port).
    auto target = std::make_shared<NodeServiceTarget>();
    capnp::EzRpcServer service(kj::heap<NodeService>(target), config.node_address, config.port);
    kj::WaitScope& wait = service.getWaitScope();
    Status bound =
        CatchKj([&] { node.node_port = static_cast<uint16_t>(service.getPort().wait(wait)); });
    if (!bound.ok()) {
      AIRT_LOG(ERROR) << "cannot serve on " << config.node_address << ":" << config.port << ": "
                      << bound.ToString();
      exit_code = 1;
      return;
    }
    Result<StopSignal> stop = StopSignal::Open(stop_signals, service.getLowLevelIoProvider());
    if (!stop.ok()) {
      AIRT_LOG(ERROR) << stop.status().ToString();
      exit_code = 1;
      return;
    }
    AIRT_LOG(INFO) << Describe(node) << "; head " << config.head_address;
    kj::Timer& timer = service.getIoProvider().getTimer();

    Result<std::unique_ptr<ChildReaper>> reaper =
        ChildReaper::Open(service.getLowLevelIoProvider(), timer);
    if (!reaper.ok()) {
      AIRT_LOG(ERROR) << reaper.status().ToString();
      exit_code = 1;
      return;
    }
    ForkExecLauncher launcher;
    WorkerPoolOptions pool_options;
    pool_options.cpp_worker_binary =
        config.worker_binary.empty() ? DefaultWorkerBinary() : config.worker_binary;
    pool_options.head_address = config.head_address;
    pool_options.node_address = AddressForWorkers(config.node_address);
    pool_options.node_port = node.node_port;
    pool_options.store_socket = dirs->store_socket;
    pool_options.transfer_address = config.node_address + ":" + std::to_string(node.transfer_port);
    pool_options.code_search_path = config.worker_code_search_path;
    pool_options.log_dir = dirs->logs;
    pool_options.register_timeout = config.worker_register_timeout_ms * kj::MILLISECONDS;
    pool_options.idle_timeout = config.idle_worker_timeout_ms * kj::MILLISECONDS;
    pool_options.stop_grace = config.worker_stop_grace_ms * kj::MILLISECONDS;
    pool_options.python_executable = config.python_executable;
    AIRT_LOG(INFO) << "workers: " << pool_options.cpp_worker_binary
                   << (config.python_executable.empty()
                           ? std::string(" (no Python workers)")
                           : "; Python: " + config.python_executable + " -m airt._private.worker");
    WorkerPool pool(pool_options, launcher, **reaper, timer);
    LeaseManagerOptions lease_options;
    lease_options.local_node = node.id;
    lease_options.infeasible_grace = config.infeasible_grace_ms * kj::MILLISECONDS;
    for (size_t i = 0; i < config.gpu_ids.size(); ++i) {
      lease_options.gpu_visible_names[config.gpu_ids[i]] = config.gpu_visible_names[i];
      lease_options.gpu_memory[config.gpu_ids[i]] = config.gpu_memory[i];
    }
    LeaseManager leases(std::move(lease_options), std::move(*resources), pool, timer);
    target->leases = &leases;
    KJ_DEFER(target->leases = nullptr);

    // GPU health: checked now, before the node registers, then periodically.
    uint64_t context_bytes = 0;
    Result<std::unique_ptr<GpuHealthSource>> health = MakeGpuHealthSource(config, &context_bytes);
    if (!health.ok()) {
      AIRT_LOG(ERROR) << health.status().ToString();
      exit_code = 1;
      return;
    }
    std::unique_ptr<GpuMonitor> gpu_monitor;
    if (*health != nullptr) {
      GpuMonitorOptions monitor_options;
      monitor_options.gpu_ids = config.gpu_ids;
      monitor_options.gpu_uuids = config.gpu_uuids;
      monitor_options.gpu_memory = config.gpu_memory;
      monitor_options.interval = config.gpu_health_interval_ms * kj::MILLISECONDS;
      monitor_options.memory_interval = config.gpu_memory_check_ms * kj::MILLISECONDS;
      monitor_options.context_bytes = context_bytes;
      monitor_options.margin_bytes = config.gpu_memory_margin;
      gpu_monitor = std::make_unique<GpuMonitor>(std::move(monitor_options), **health, leases,
                                                 timer, WallMs);
      gpu_monitor->Start();
      target->gpus = gpu_monitor.get();
    }
    KJ_DEFER(target->gpus = nullptr);

    // The host's memory: above the threshold a leased worker is stopped (Ray's memory monitor).
    std::unique_ptr<MemoryReader> memory_reader;
    if (config.memory_usage_file.empty()) {
      memory_reader = std::make_unique<HostMemoryReader>();
    } else {
      memory_reader = std::make_unique<FileMemoryReader>(config.memory_usage_file);
    }
    MemoryMonitorOptions memory_options;
    memory_options.interval = config.memory_monitor_interval_ms * kj::MILLISECONDS;
    memory_options.threshold = config.memory_usage_threshold;
    memory_options.node = node.id.Hex().substr(0, 8) + " (" + config.node_address + ":" +
                          std::to_string(node.node_port) + ")";
    MemoryMonitor memory_monitor(
        std::move(memory_options), *memory_reader, timer, [&leases] { return leases.Leased(); },
        [&leases](const WorkerId& worker, const std::string& reason) {
          return leases.StopWorker(worker, reason, /*out_of_memory=*/true);
        });
    if (config.memory_monitor_interval_ms > 0) memory_monitor.Start();

    // Workers' output to their jobs' drivers.
    LogStreamer logs({node.id.Hex().substr(0, 8)}, timer, [&pool] {
      std::vector<LoggingWorker> workers;
      for (const WorkerSnapshot& w : pool.Snapshot().workers) {
        workers.push_back(LoggingWorker{w.job, w.pid, w.log_path});
      }
      return workers;
    });
    target->logs = &logs;
    KJ_DEFER(target->logs = nullptr);

    EzRpcHeadConnector connector(config.head_address);
    HeadSessionOptions options;
    options.call_timeout = config.head_call_timeout_ms * kj::MILLISECONDS;
    options.max_retry_delay = config.head_retry_max_ms * kj::MILLISECONDS;
    options.min_retry_delay = std::min(options.min_retry_delay, options.max_retry_delay);
    options.reconnect_timeout = config.head_reconnect_timeout_s * kj::SECONDS;
    // Finished jobs: their workers stopped, then their objects deleted through the node's own
    // client of its store (a short blocking call on this thread; the store serves on its own).
    objectstore::StoreClient::Options store_client_options;
    store_client_options.prefault = false;
    auto store_client = objectstore::StoreClient::Connect(dirs->store_socket, store_client_options);
    if (!store_client.ok()) {
      AIRT_LOG(ERROR) << "cannot connect to the node's own store: "
                      << store_client.status().ToString();
      exit_code = 1;
      return;
    }
    JobCleanup cleanup(
        leases, [&store_client](const JobId& job) { return (*store_client)->DeleteJob(job); });
    target->store = store_client->get();  // freeObjects

    // Moving this node's primary copies elsewhere before it leaves (Node.evacuateObjects; the
    // drain's exit step calls target->evacuator->Evacuate too), over a head connection of its own.
    EzRpcHeadConnector evacuation_head(config.head_address);
    ObjectEvacuator evacuator(
        {pool_options.node_address + ":" + std::to_string(node.node_port),  // as owners know it
         pool_options.transfer_address},
        **store_client, evacuation_head, timer);
    target->evacuator = &evacuator;
    KJ_DEFER(target->evacuator = nullptr);
    StoreAwareReport report(leases, **store_client);

    std::string hex = node.id.Hex();
    HeadSession session(connector, timer, node, report, options, [hex] {
      std::printf("node ready %s\n", hex.c_str());
      std::fflush(stdout);
    });
    session.SetOnFinishedJobs([&cleanup](std::vector<JobId> jobs) { cleanup.OnFinished(jobs); });
    leases.SetOnQueued([&session] { session.ReportSoon(); });
    KJ_DEFER(leases.SetOnQueued(nullptr));  // before `session` goes
    session.Start();

    EzRpcHeadConnector view_connector(config.head_address);
    ClusterViewSubscriber view_subscriber(
        view_connector, timer,
        {config.cluster_view_interval_ms * kj::MILLISECONDS, options.call_timeout},
        [&leases](RemoteNodes nodes) { leases.UpdateView(std::move(nodes)); });
    view_subscriber.Start();

    NodeDrain drain(leases, timer, WallMs);
    target->drain = &drain;
    KJ_DEFER(target->drain = nullptr);
    EzRpcHeadConnector drain_connector(config.head_address);

    // Until the stop signal, the head session giving up (the head refused this node, or stayed
    // unreachable past the reconnect window: then the node stops as on a signal and exits 1), or
    // the drain being done; a preemption notice (SIGUSR1) starts a drain and the wait goes on.
    std::string gave_up, left_because;
    bool left_drained = false;
    auto given_up = session.WhenGivenUp().fork();
    auto drained = drain.WhenDone().fork();
    while (left_because.empty()) {
      int sig = stop->Next()
                    .exclusiveJoin(given_up.addBranch().then([&gave_up](std::string why) {
                      gave_up = std::move(why);
                      return 0;
                    }))
                    .exclusiveJoin(drained.addBranch().then([] { return -1; }))
                    .wait(wait);
      if (sig == SIGUSR1) {
        DrainOnPreemptionNotice(drain_connector, timer, node.id, drain, config.preemption_reason,
                                config.preemption_grace_ms * kj::MILLISECONDS,
                                options.call_timeout)
            .wait(wait);
      } else if (!gave_up.empty()) {
        std::fprintf(stderr, "airt-node: %s\n", gave_up.c_str());
        exit_code = 1;
        left_because = gave_up;
      } else if (sig == -1) {
        left_drained = true;
        left_because = "drained (" + drain.Snapshot().reason + ")";
      } else {
        left_because = "stopping on signal " + std::to_string(sig);
      }
    }
    LeaveCluster({*target, pool, session, gave_up.empty(),
                  std::min(options.call_timeout, kMaxUnregisterWait), left_because,
                  /*evacuate=*/left_drained},
                 wait);
  });
  if (!served.ok()) {
    AIRT_LOG(ERROR) << "node event loop failed: " << served.ToString();
    exit_code = 1;
  }
  transfer->reset();  // before the store it reads from
  store->reset();
  std::error_code ec;
  fs::remove_all(dirs->spill, ec);
  return exit_code;
}

}  // namespace airt::worker
