// fetch_bench: Gets of objects made on another node, next to raw TCP copies of the same bytes
// measured in the same run. Starts airt-head, the driver's airt-node and a second airt-node
// ({"remote": 1}) on loopback; tasks pinned to the second node make the objects, the driver Gets
// them (its core worker pulls them through the nodes' transfer services, one pooled connection
// per node, pipelined, into its own node's store):
//   many_get              1,000 x 1 MiB airt::Buffer objects, one Get of all (views, no copy)
//   big_get_view          one 1 GiB airt::Buffer, Get into a view (no copy)
//   big_get_vector        the same object read as std::vector<uint8_t> (pull, then msgpack's copy
//                         into fresh memory), beside "pull + one copy into fresh memory" (a view
//                         Get, then one memcpy into freshly mapped memory), same run
// Each raw TCP figure copies the same bytes over one loopback connection from another process's
// touched buffer into this process's touched buffer. Before each timed Get the pulled copies are
// deleted from the driver's node store, so each Get pulls anew; one untimed Get comes first.
// Prints figures only; never fails on time. Exits 1 when the cluster cannot start or a Get fails.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include "airt/api.h"
#include "airt/buffer.h"
#include "bench/bench_cluster.h"
#include "bench/bench_support.h"
#include "common/ids.h"
#include "common/process.h"
#include "objectstore/object_store.h"

// bench/microbench_functions.cc
airt::Buffer FilledBuffer(int64_t size);

namespace {

using airt::bench::Clock;
using airt::bench::Seconds;
using airt::objectstore::StoreClient;
using namespace std::chrono_literals;

struct Plan {
  int count = 1000;              // objects of many_1mib_get
  uint64_t object = 1ull << 20;  // their size
  uint64_t big = 1ull << 30;     // the object of 1gib_*
  int reps = 3;                  // timed Gets of each (after one untimed)

  // Either store holds every small object twice over (a Get pulls at most half its store in one
  // window), or the big object, plus room.
  uint64_t StoreBytes() const {
    return std::max<uint64_t>(2 * object * static_cast<uint64_t>(count), big) + (256ull << 20);
  }
};

airt::ObjectId IdOf(const std::string& binary) {
  return airt::ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(binary.data()));
}

// Drops the driver node's copies of `refs` (as eviction would), so that the next Get pulls.
template <typename T>
airt::Status DropLocalCopies(StoreClient& local, const std::vector<airt::ObjectRef<T>>& refs) {
  for (const auto& ref : refs) {
    airt::ObjectId id = IdOf(ref.ID());
    if (local.Contains(id)) AIRT_RETURN_IF_ERROR(local.Delete(id).WithContext("drop a copy"));
  }
  return airt::Status::Ok();
}

void Print(const char* name, double airt_gbps, const char* baseline, double baseline_gbps) {
  std::printf("%-18s %8.2f GB/s   %-34s %8.2f GB/s   ratio %.2f\n", name, airt_gbps, baseline,
              baseline_gbps, airt_gbps / baseline_gbps);
  std::fflush(stdout);
}

// A Get of every ref (views), plan.reps timed after one untimed; GB/s of the timed ones.
airt::Result<double> TimeViewGets(const Plan& plan, StoreClient& local,
                                  const std::vector<airt::ObjectRef<airt::Buffer>>& refs,
                                  uint64_t bytes_each) {
  Clock::duration total{};
  for (int rep = 0; rep <= plan.reps; ++rep) {
    AIRT_RETURN_IF_ERROR(DropLocalCopies(local, refs));
    auto start = Clock::now();
    std::vector<std::shared_ptr<airt::Buffer>> views = airt::Get(refs, 600000);
    auto took = Clock::now() - start;
    for (const auto& v : views) {
      if (v->size() != bytes_each || !v->is_view()) {
        return airt::Internal("Get returned " + std::to_string(v->size()) + " bytes, not " +
                              std::to_string(bytes_each) + " viewed in place");
      }
    }
    if (rep > 0) total += took;
  }
  return static_cast<double>(bytes_each) * refs.size() * plan.reps / Seconds(total) / 1e9;
}

struct VectorFigures {
  double vector_gbps;     // Get as std::vector<uint8_t>
  double pull_copy_gbps;  // view Get, then one memcpy into fresh memory
};

// The same object read as a std::vector<uint8_t> (each Get's vector is fresh memory: glibc maps
// blocks this large anew and unmaps them when freed), and as a view copied once into memory
// mapped fresh for each run; alternately, plan.reps timed runs each after one untimed.
airt::Result<VectorFigures> TimeVectorGets(const Plan& plan, StoreClient& local,
                                           const airt::ObjectRef<airt::Buffer>& ref) {
  airt::ObjectRef<std::vector<uint8_t>> as_vector(ref.ID());
  std::vector<airt::ObjectRef<airt::Buffer>> refs = {ref};
  Clock::duration vector_total{}, copy_total{};
  for (int rep = 0; rep <= plan.reps; ++rep) {
    AIRT_RETURN_IF_ERROR(DropLocalCopies(local, refs));
    auto start = Clock::now();
    std::shared_ptr<std::vector<uint8_t>> value = airt::Get(as_vector, 600000);
    auto took = Clock::now() - start;
    if (value->size() != plan.big) return airt::Internal("the vector has the wrong size");
    value.reset();
    if (rep > 0) vector_total += took;

    AIRT_RETURN_IF_ERROR(DropLocalCopies(local, refs));
    void* fresh =
        ::mmap(nullptr, plan.big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fresh == MAP_FAILED) return airt::ErrnoStatus("mmap fresh memory", errno);
    start = Clock::now();
    std::shared_ptr<airt::Buffer> view = airt::Get(ref, 600000);
    std::memcpy(fresh, view->data(), view->size());
    took = Clock::now() - start;
    bool same = static_cast<const uint8_t*>(fresh)[plan.big - 1] == view->data()[plan.big - 1];
    view.reset();
    ::munmap(fresh, plan.big);
    if (!same) return airt::Internal("the copy differs from the object");
    if (rep > 0) copy_total += took;
  }
  double gigabytes = static_cast<double>(plan.big) * plan.reps / 1e9;
  return VectorFigures{gigabytes / Seconds(vector_total), gigabytes / Seconds(copy_total)};
}

int Fail(const airt::Status& status, const std::string& what) {
  std::fprintf(stderr, "fetch_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

airt::Status Run(const Plan& plan, StoreClient& local) {
  auto size_name = [](uint64_t bytes) {
    return bytes >= (1ull << 30) ? std::to_string(bytes >> 30) + " GiB"
                                 : std::to_string(bytes >> 20) + " MiB";
  };
  // Many objects made on the second node.
  std::vector<airt::ObjectRef<airt::Buffer>> many;
  for (int i = 0; i < plan.count; ++i) {
    many.push_back(airt::Task(FilledBuffer)
                       .SetResource("remote", 1)
                       .Remote(static_cast<int64_t>(plan.object)));
  }
  if (!airt::Wait(many, plan.count, 600000).unready.empty()) {
    return airt::DeadlineExceeded("the tasks making the objects did not finish in 10 minutes");
  }
  if (local.Contains(IdOf(many[0].ID()))) {
    return airt::FailedPrecondition("the objects were made on the driver's node, not the second");
  }
  AIRT_ASSIGN_OR_RETURN(double many_gbps, TimeViewGets(plan, local, many, plan.object));
  AIRT_RETURN_IF_ERROR(DropLocalCopies(local, many));
  AIRT_ASSIGN_OR_RETURN(double many_raw,
                        airt::bench::RawTcpCopyGbps(plan.object * plan.count, plan.reps));
  std::string name = std::to_string(plan.count) + " x " + size_name(plan.object);
  std::string raw_name = "raw TCP, " + size_name(plan.object * plan.count) + " stream";
  std::printf("%s Get (views):\n", name.c_str());
  Print("many_get", many_gbps, raw_name.c_str(), many_raw);
  many.clear();  // frees them on both nodes

  // One big object made on the second node.
  auto big =
      airt::Task(FilledBuffer).SetResource("remote", 1).Remote(static_cast<int64_t>(plan.big));
  if (!airt::Wait(std::vector{big}, 1, 600000).unready.empty()) {
    return airt::DeadlineExceeded("the task making the big object did not finish in 10 minutes");
  }
  AIRT_ASSIGN_OR_RETURN(double view_gbps, TimeViewGets(plan, local, {big}, plan.big));
  AIRT_RETURN_IF_ERROR(DropLocalCopies(local, std::vector{big}));
  AIRT_ASSIGN_OR_RETURN(double big_raw, airt::bench::RawTcpCopyGbps(plan.big, plan.reps));
  std::printf("%s Get:\n", size_name(plan.big).c_str());
  std::string raw_big = "raw TCP, " + size_name(plan.big);
  Print("big_get_view", view_gbps, raw_big.c_str(), big_raw);
  AIRT_ASSIGN_OR_RETURN(VectorFigures vec, TimeVectorGets(plan, local, big));
  Print("big_get_vector", vec.vector_gbps, "pull + one copy into fresh memory", vec.pull_copy_gbps);
  return airt::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  airt::InitProcess("fetch_bench");
  airt::bench::ClusterFlags cluster_flags;
  if (auto code = airt::bench::ParseClusterFlags(
          "fetch_bench", argc, argv, "the library of FilledBuffer the workers load",
          "20 x 1 MiB and 64 MiB, one timed Get each (CI smoke runs)", &cluster_flags)) {
    return *code;
  }
  bool quick = cluster_flags.quick;
  Plan plan;
  if (quick) plan = Plan{.count = 20, .object = 1ull << 20, .big = 64ull << 20, .reps = 1};

  airt::bench::LocalCluster cluster(std::move(cluster_flags));
  auto address = cluster.StartHead();
  if (!address.ok()) return Fail(address.status(), "airt-head");
  std::string store = "--object-store-memory=" + std::to_string(plan.StoreBytes());
  cluster.StartNode("node", {"--num-gpus=0", store, "--num-cpus=1"});
  cluster.StartNode("remote",
                    {"--num-gpus=0", store, "--num-cpus=1", "--resources={\"remote\": 1}"});
  std::string node_socket;
  for (const char* name : {"node", "remote"}) {
    auto socket = cluster.WaitForNode(name);
    if (!socket.ok()) return Fail(socket.status(), std::string("airt-node ") + name);
    if (std::string(name) == "node") node_socket = *socket;
  }
  auto local = StoreClient::Connect(node_socket, StoreClient::Options{.prefault = false});
  if (!local.ok()) return Fail(local.status(), "the driver node's store");

  std::printf("# fetch_bench: airt-head + two airt-nodes on loopback, %u cores%s\n",
              std::thread::hardware_concurrency(), quick ? "; --quick" : "");
  int rc = 0;
  try {
    airt::Init(airt::Config{.address = *address});
    if (airt::Status s = Run(plan, **local); !s.ok()) rc = Fail(s, "run");
  } catch (const airt::Exception& e) {
    std::fprintf(stderr, "fetch_bench: %s\n", e.what());
    rc = 1;
  }
  airt::Shutdown();
  return rc;
}
