// microbenchmark: Ray's microbenchmark metrics (ray/_private/ray_perf.py, `ray microbenchmark`)
// measured on airt. Starts its own cluster (airt-head --port=0 and one airt-node with 2 CPUs whose
// workers load libairt_microbench_functions), connects as a driver, and prints one line per
// metric, under Ray's metric names:
//   <metric> <figure>                  ops/s (single_client_put_gigabytes: GB/s)
// bench/peer_microbenchmark.py runs the same operations, with the same sizes, on Ray and Dask;
// bench/run_microbenchmarks runs both and prints the ratios. Sizes are scaled down from
// ray_perf.py (and the timing is one warm-up and one timed stretch per metric instead of a 10 s
// sleep and four) so that the whole run stays within a few minutes.
// Prints figures only; never fails on time. Exits 1 when the cluster cannot start or an operation
// fails, after stopping every process it started.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "airt/api.h"
#include "bench/bench_support.h"
#include "common/flags.h"
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

namespace {

using airt::bench::Clock;
using airt::bench::Seconds;
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

// Waits until the node's store has populated its arena (seconds of kernel time for 4 GiB, which
// would otherwise compete with the first metrics for the two cores), as objectstore_bench does.
airt::Status WaitForWarmStore(const std::string& dir) {
  std::string socket;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    auto candidate = entry.path() / "store.sock";
    if (entry.path().filename().string().rfind("node-", 0) == 0 &&
        std::filesystem::exists(candidate)) {
      socket = candidate.string();
    }
  }
  if (socket.empty()) return airt::NotFound("no node store socket under " + dir);
  AIRT_ASSIGN_OR_RETURN(auto client,
                        airt::objectstore::StoreClient::Connect(
                            socket, airt::objectstore::StoreClient::Options{.prefault = false}));
  for (;;) {
    AIRT_ASSIGN_OR_RETURN(airt::objectstore::StoreStats stats, client->Stats());
    if (stats.prefaulted_bytes >= stats.prefault_target_bytes) return airt::Status::Ok();
    std::this_thread::sleep_for(50ms);
  }
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

// Ray's metrics in the order the issue lists them.
void RunMetrics(const Plan& plan, const std::string& only) {
  // Runs and prints `metric` unless --metrics names others.
  auto measure = [&](const char* metric, const std::function<double()>& figure) {
    if (!only.empty() &&
        ("," + only + ",").find(std::string(",") + metric + ",") == std::string::npos) {
      return;
    }
    Print(metric, figure());
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
}

}  // namespace

int main(int argc, char** argv) {
  airt::InitProcess("microbenchmark");
  std::string head_binary = AIRT_HEAD_BIN;
  std::string node_binary = AIRT_NODE_BIN;
  std::string worker_binary = AIRT_WORKER_BIN;
  std::string functions = AIRT_MICROBENCH_FUNCTIONS;
  bool quick = false;
  std::string only;
  airt::FlagSet flags("microbenchmark");
  flags.AddString("head-binary", &head_binary, "the airt-head to start");
  flags.AddString("node-binary", &node_binary, "the airt-node to start");
  flags.AddString("worker-binary", &worker_binary, "the airt-worker the node starts");
  flags.AddString("functions", &functions, "the library of SmallValue the workers load");
  flags.AddBool("quick", &quick, "small batches, one call per metric (for CI smoke runs)");
  flags.AddString("metrics", &only, "only these metrics, comma-separated (default: all)");
  if (airt::Status s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "%s\n%s", s.message().c_str(), flags.Usage().c_str());
    return s.code() == airt::Code::kCancelled ? 0 : 2;
  }
  Plan plan;
  if (quick) {
    plan = Plan{.warmup_s = 0,
                .measure_s = 0,
                .batch = 20,
                .clients = 4,
                .client_batch = 20,
                .put_bytes = 64ull << 20,
                .max_large_puts = 2};
  }

  airt::bench::ScratchDir dir;  // removed last, once the daemons below have stopped
  airt::bench::DaemonProcess head({head_binary, "--port=0", "--temp-dir=" + dir.path()},
                                  dir.path() + "/head.log");
  auto address = head.WaitForLine("head ready ", 30s);
  if (!address.ok()) return Fail(address.status(), "airt-head");
  airt::bench::DaemonProcess node(
      {node_binary, "--head-address=" + *address, "--num-cpus=2", "--num-gpus=0",
       "--object-store-memory=4G", "--temp-dir=" + dir.path(), "--worker-binary=" + worker_binary,
       "--worker-code-search-path=" + functions},
      dir.path() + "/node.log");
  if (auto ready = node.WaitForLine("node ready ", 30s); !ready.ok()) {
    return Fail(ready.status(), "airt-node");
  }

  if (auto warm = WaitForWarmStore(dir.path()); !warm.ok()) return Fail(warm, "store warm-up");
  std::printf(
      "# microbenchmark: airt, airt-head + one airt-node (--num-cpus=2), %u cores; "
      "ops/s (single_client_put_gigabytes: GB/s)%s\n",
      std::thread::hardware_concurrency(), quick ? "; --quick" : "");
  std::fflush(stdout);
  int rc = 0;
  try {
    airt::Init(airt::Config{.address = *address});
    RunMetrics(plan, only);
  } catch (const airt::Exception& e) {
    std::fprintf(stderr, "microbenchmark: %s\n---- %s/node.log (tail) ----\n", e.what(),
                 dir.path().c_str());
    std::string log = airt::bench::ReadFile(dir.path() + "/node.log");
    std::fputs(log.size() > 4000 ? log.substr(log.size() - 4000).c_str() : log.c_str(), stderr);
    rc = 1;
  }
  airt::Shutdown();
  return rc;
}
