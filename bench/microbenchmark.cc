// microbenchmark: Ray's microbenchmark metrics (ray/_private/ray_perf.py, `ray microbenchmark`)
// measured on airt. Starts its own cluster (airt-head --port=0 and one airt-node with 2 CPUs whose
// workers load libairt_microbench_functions), connects as a driver, and prints one line per
// metric, under Ray's metric names:
//   <metric> <figure>                  ops/s (*_gigabytes: GB/s)
// then airt's own cross-node metrics, for which it starts a second airt-node ({"remote": 1}):
//   cross_node_pull_gigabytes          a task's 1 GiB return pulled to the driver's node
//   cross_node_get_gigabytes           the driver's whole Get of it (pull, copy out, deserialize)
//   raw_tcp_copy_gigabytes             the same bytes over loopback TCP, in the same run
//   cross_node_pull_vs_raw_tcp         the ratio of the first and the third
// bench/peer_microbenchmark.py runs the same operations, with the same sizes, on Ray and Dask
// (it prints "not measured" for the cross-node ones); bench/run_microbenchmarks runs both and
// prints the ratios. Sizes are scaled down from ray_perf.py (and the timing is one warm-up and
// one timed stretch per metric instead of a 10 s sleep and four) so that the whole run stays
// within a few minutes.
// Prints figures only; never fails on time. Exits 1 when the cluster cannot start or an operation
// fails, after stopping every process it started.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "airt/api.h"
#include "bench/bench_cluster.h"
#include "bench/bench_support.h"
#include "common/ids.h"
#include "common/process.h"
#include "common/status.h"
#include "objectstore/object_store.h"

// bench/microbench_functions.cc
int SmallValue();
class BenchActor {
 public:
  static BenchActor* Create();
  int SmallValue();
};
std::vector<uint8_t> FilledBytes(int64_t size);

namespace {

using airt::bench::Clock;
using airt::bench::Seconds;
using airt::objectstore::StoreClient;
using namespace std::chrono_literals;

// How long each metric runs, and the sizes of its operations. The same figures are in
// bench/peer_microbenchmark.py; change both together.
struct Plan {
  double warmup_s = 0.5;              // calls before timing (at least one)
  double measure_s = 2.0;             // timed calls (at least one)
  int batch = 1000;                   // tasks of one batch (Ray: 1000)
  int clients = 4;                    // driver threads of multi_client_tasks_async (Ray: 4 actors)
  int client_batch = 1000;            // tasks each of them submits (Ray: 10000)
  uint64_t put_bytes = 100ull << 23;  // one put of single_client_put_gigabytes (Ray: 800 MiB)
  int max_large_puts = 4;             // airt never frees a put yet: stay inside the store
  uint64_t pull_bytes = 1ull << 30;   // the object of cross_node_pull_gigabytes
  int pull_reps = 3;                  // timed pulls of it (after one untimed)

  // The driver's node's store: every large put, one pulled object, and room for the rest.
  uint64_t DriverStoreBytes() const {
    return put_bytes * static_cast<uint64_t>(max_large_puts) + pull_bytes + (512ull << 20);
  }
};

// Calls `op` for plan.warmup_s, then for plan.measure_s, each at least once (at most `max_calls`
// in all, the last of them timed), and returns multiplier * timed calls / timed seconds.
double Rate(const Plan& plan, double multiplier, const std::function<void()>& op,
            int max_calls = 1 << 30) {
  int calls = 0;
  for (auto start = Clock::now(); calls + 1 < max_calls;) {
    op();
    ++calls;
    if (Seconds(Clock::now() - start) >= plan.warmup_s) break;
  }
  int timed = 0;
  auto start = Clock::now();
  double elapsed = 0;
  while (calls < max_calls || timed == 0) {
    op();
    ++calls;
    ++timed;
    elapsed = Seconds(Clock::now() - start);
    if (elapsed >= plan.measure_s) break;
  }
  return multiplier * timed / elapsed;
}

void Print(const char* metric, double figure) {
  std::printf("%s %.2f\n", metric, figure);
  std::fflush(stdout);
}

// Prints why and returns main's exit code, so that the daemons and the scratch folder are still
// cleaned up by their destructors.
int Fail(const airt::Status& status, const std::string& what) {
  std::fprintf(stderr, "microbenchmark: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

void SubmitAndGet(int n) {
  std::vector<airt::ObjectRef<int>> refs;
  refs.reserve(n);
  for (int i = 0; i < n; ++i) refs.push_back(airt::Task(SmallValue).Remote());
  airt::Get(refs);
}

// Submits n tasks, then waits for them one Wait at a time, as ray_perf.py's `ray.wait(not_ready)`
// loop does: each Wait returns one ready ref, and the rest stay for the next Wait.
void WaitOneAtATime(int n) {
  std::vector<airt::ObjectRef<int>> not_ready;
  not_ready.reserve(n);
  for (int i = 0; i < n; ++i) not_ready.push_back(airt::Task(SmallValue).Remote());
  while (!not_ready.empty()) {
    airt::WaitResult<int> waited = airt::Wait(not_ready, 1, -1);
    not_ready = std::move(waited.unready);
  }
}

struct PullFigures {
  double pull_gbps;  // Get's start until the copy is sealed in the driver's node store
  double get_gbps;   // the whole Get: the pull, then the copy out of the store and msgpack
};

// A task pinned to the second node (only it offers {"remote": 1}) returns plan.pull_bytes, which
// stay in that node's store; the driver's Get pulls them through the nodes' transfer services
// into its own node's store (`local`), then copies them out and deserializes them. The pull is
// timed from Get's start until the copy is sealed in `local`, which a thread of this process
// polling `local`'s index each millisecond sees (so the pull reads up to about 1 ms slower, never
// faster); the whole Get is timed too. One untimed Get, then plan.pull_reps timed ones; before
// each, the pulled (secondary) copy is deleted from `local`, as eviction would, so each Get pulls
// anew.
airt::Result<PullFigures> MeasureCrossNodePull(const Plan& plan, StoreClient& local) {
  auto ref = airt::Task(FilledBytes)
                 .SetResource("remote", 1)
                 .Remote(static_cast<int64_t>(plan.pull_bytes));
  if (!airt::Wait(std::vector{ref}, 1, 600000).unready.empty()) {
    return airt::DeadlineExceeded("the task returning the object did not finish in 10 minutes");
  }
  if (ref.ID().size() != airt::ObjectId::kSize) return airt::Internal("a malformed object ref");
  auto id = airt::ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(ref.ID().data()));
  if (local.Contains(id)) {
    return airt::FailedPrecondition("object " + id.Hex() +
                                    " is in the driver's node store before any Get: the task "
                                    "did not run on the second node");
  }
  Clock::duration pull{}, get{};
  for (int rep = 0; rep <= plan.pull_reps; ++rep) {
    if (rep > 0) AIRT_RETURN_IF_ERROR(local.Delete(id).WithContext("dropping the pulled copy"));
    // Polls the shared index (no round trip) each millisecond until the pulled copy is sealed.
    std::atomic<bool> done = false;
    Clock::time_point sealed{};
    std::thread watcher([&] {
      while (!done.load() && !local.Contains(id)) std::this_thread::sleep_for(1ms);
      sealed = Clock::now();
    });
    auto start = Clock::now();
    uint64_t got = 0;
    try {
      got = airt::Get(ref, 600000)->size();
    } catch (...) {
      done = true;
      watcher.join();
      throw;
    }
    auto end = Clock::now();
    done = true;
    watcher.join();
    if (got != plan.pull_bytes) {
      return airt::Internal("Get returned " + std::to_string(got) + " bytes, not " +
                            std::to_string(plan.pull_bytes));
    }
    if (!local.Contains(id)) {
      return airt::Internal("Get left no copy of " + id.Hex() + " in the driver's node store");
    }
    if (rep == 0) continue;
    pull += sealed - start;
    get += end - start;
  }
  double gigabytes = static_cast<double>(plan.pull_bytes) * plan.pull_reps / 1e9;
  return PullFigures{gigabytes / Seconds(pull), gigabytes / Seconds(get)};
}

// Ray's metrics in the order the issue lists them, then airt's cross-node ones, for which
// `start_remote_node` starts the second node and returns the driver's node store socket.
void RunMetrics(const Plan& plan, const std::string& only,
                const std::function<airt::Result<std::string>()>& start_remote_node) {
  auto selected = [&](const char* metric) {
    return only.empty() ||
           ("," + only + ",").find(std::string(",") + metric + ",") != std::string::npos;
  };
  // Runs and prints `metric` unless --metrics names others.
  auto measure = [&](const char* metric, const std::function<double()>& figure) {
    if (selected(metric)) Print(metric, figure());
  };
  measure("single_client_tasks_sync",
          [&] { return Rate(plan, 1, [] { airt::Get(airt::Task(SmallValue).Remote()); }); });
  measure("single_client_tasks_async",
          [&] { return Rate(plan, plan.batch, [&] { SubmitAndGet(plan.batch); }); });
  measure("multi_client_tasks_async", [&] {
    return Rate(plan, static_cast<double>(plan.clients) * plan.client_batch, [&] {
      std::vector<std::thread> clients;
      for (int c = 0; c < plan.clients; ++c) {
        clients.emplace_back([&] { SubmitAndGet(plan.client_batch); });
      }
      for (std::thread& t : clients) t.join();
    });
  });
  auto actor_calls = [&](int concurrency, bool sync) {
    auto actor = airt::Actor(BenchActor::Create).SetMaxConcurrency(concurrency).Remote();
    auto call = [&] { return actor.Task(&BenchActor::SmallValue).Remote(); };
    if (sync) return Rate(plan, 1, [&] { airt::Get(call()); });
    return Rate(plan, plan.batch, [&] {
      std::vector<airt::ObjectRef<int>> refs;
      refs.reserve(plan.batch);
      for (int i = 0; i < plan.batch; ++i) refs.push_back(call());
      airt::Get(refs);
    });
  };
  measure("1_1_actor_calls_sync", [&] { return actor_calls(1, true); });
  measure("1_1_actor_calls_async", [&] { return actor_calls(1, false); });
  measure("1_1_actor_calls_concurrent", [&] { return actor_calls(16, false); });
  measure("n_n_actor_calls_async", [&] {
    // As ray_perf.py: cores / 2 actors, `clients` callers each making client_batch calls spread
    // over them. Ray's callers are tasks; airt's are driver threads (tasks cannot call actors
    // yet), as for multi_client_tasks_async.
    std::vector<airt::ActorHandle<BenchActor>> actors;
    for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency() / 2); ++i) {
      actors.push_back(airt::Actor(BenchActor::Create).Remote());
    }
    return Rate(plan, static_cast<double>(plan.clients) * plan.client_batch, [&] {
      std::vector<std::thread> clients;
      for (int c = 0; c < plan.clients; ++c) {
        clients.emplace_back([&] {
          std::vector<airt::ObjectRef<int>> refs;
          refs.reserve(plan.client_batch);
          for (int i = 0; i < plan.client_batch; ++i) {
            refs.push_back(actors[i % actors.size()].Task(&BenchActor::SmallValue).Remote());
          }
          airt::Get(refs);
        });
      }
      for (std::thread& t : clients) t.join();
    });
  });

  measure("single_client_get_calls", [&] {
    airt::ObjectRef<int> value = airt::Put(0);
    return Rate(plan, 1, [&] { airt::Get(value); });
  });
  measure("single_client_put_calls", [&] { return Rate(plan, 1, [] { airt::Put(0); }); });
  measure("single_client_put_gigabytes", [&] {
    std::vector<uint8_t> array(plan.put_bytes, 0);  // touched, as a filled numpy array
    double gigabytes = static_cast<double>(plan.put_bytes) / 1e9;
    auto put = [&] { airt::Put(array); };
    return Rate(plan, gigabytes, put, plan.max_large_puts);
  });
  measure("single_client_tasks_and_get_batch",
          [&] { return Rate(plan, 1, [&] { SubmitAndGet(plan.batch); }); });
  measure("single_client_wait_1k_refs",
          [&] { return Rate(plan, 1, [&] { WaitOneAtATime(plan.batch); }); });

  if (selected("cross_node_pull_gigabytes")) {
    auto fail = [](const airt::Status& s) {
      throw airt::Exception("cross_node_pull_gigabytes: " + s.ToString());
    };
    airt::Result<std::string> socket = start_remote_node();
    if (!socket.ok()) fail(socket.status());
    auto local = StoreClient::Connect(*socket, StoreClient::Options{.prefault = false});
    if (!local.ok()) fail(local.status());
    airt::Result<PullFigures> pulled = MeasureCrossNodePull(plan, **local);
    if (!pulled.ok()) fail(pulled.status());
    airt::Result<double> raw = airt::bench::RawTcpCopyGbps(plan.pull_bytes, plan.pull_reps);
    if (!raw.ok()) fail(raw.status());
    Print("cross_node_pull_gigabytes", pulled->pull_gbps);
    Print("cross_node_get_gigabytes", pulled->get_gbps);
    Print("raw_tcp_copy_gigabytes", *raw);
    Print("cross_node_pull_vs_raw_tcp", pulled->pull_gbps / *raw);
  }
}

}  // namespace

int main(int argc, char** argv) {
  airt::InitProcess("microbenchmark");
  airt::bench::ClusterFlags cluster_flags;
  std::string only;
  if (auto code = airt::bench::ParseClusterFlags(
          "microbenchmark", argc, argv, "the library of SmallValue the workers load",
          "small batches, one call per metric (for CI smoke runs)", &cluster_flags,
          [&](airt::FlagSet& flags) {
            flags.AddString("metrics", &only, "only these metrics, comma-separated (default: all)");
          })) {
    return *code;
  }
  bool quick = cluster_flags.quick;
  Plan plan;
  if (quick) {
    plan = Plan{.warmup_s = 0,
                .measure_s = 0,
                .batch = 20,
                .clients = 4,
                .client_batch = 20,
                .put_bytes = 64ull << 20,
                .max_large_puts = 2,
                .pull_bytes = 64ull << 20,
                .pull_reps = 1};
  }

  airt::bench::LocalCluster cluster(std::move(cluster_flags));
  auto address = cluster.StartHead();
  if (!address.ok()) return Fail(address.status(), "airt-head");
  cluster.StartNode("node", {"--num-cpus=2", "--num-gpus=0",
                             "--object-store-memory=" + std::to_string(plan.DriverStoreBytes())});
  auto node_socket = cluster.WaitForNode("node");
  if (!node_socket.ok()) return Fail(node_socket.status(), "airt-node");
  // The second node, started by the cross-node metrics only: {"remote": 1} and room for the
  // object they pull. Stopped after the driver has left (with the cluster).
  auto start_remote_node = [&]() -> airt::Result<std::string> {
    cluster.StartNode("remote", {"--num-cpus=1", "--num-gpus=0", "--resources={\"remote\": 1}",
                                 "--object-store-memory=" +
                                     std::to_string(plan.pull_bytes + (256ull << 20))});
    AIRT_RETURN_IF_ERROR(cluster.WaitForNode("remote").status().WithContext("the second airt-node"));
    return *node_socket;
  };

  std::printf(
      "# microbenchmark: airt, airt-head + one airt-node (--num-cpus=2; cross_node_*: a second "
      "with {remote: 1}), %u cores; ops/s (*_gigabytes: GB/s)%s\n",
      std::thread::hardware_concurrency(), quick ? "; --quick" : "");
  std::fflush(stdout);
  int rc = 0;
  try {
    airt::Init(airt::Config{.address = *address});
    RunMetrics(plan, only, start_remote_node);
  } catch (const airt::Exception& e) {
    std::fprintf(stderr, "microbenchmark: %s\n", e.what());
    for (const char* name : {"node", "remote"}) {
      std::string log = cluster.LogTail(name, 4000);
      if (log.empty()) continue;
      std::fprintf(stderr, "---- %s/%s.log (tail) ----\n", cluster.dir().c_str(), name);
      std::fputs(log.c_str(), stderr);
    }
    rc = 1;
  }
  airt::Shutdown();
  return rc;
}
