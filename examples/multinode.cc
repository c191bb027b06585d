// Tasks on two nodes, and an object crossing between them each way.
//   airt start --head --port=0 --temp-dir=D --code-search-path=build/examples
//   airt start --address=HOST:PORT --temp-dir=D --resources='{"node2": 1}' \
//       --code-search-path=build/examples
//   AIRT_ADDRESS=HOST:PORT build/examples/multinode   (scripts/demo does all of this)
// The driver joins the cluster on the first node (the head's); tasks asking for {"node2": 1} can
// run only on the second. A 32 MiB block made there is checked by a task on the first node, and
// one the driver puts is checked by a task on the second: each moves through the nodes' transfer
// services. Exits 1 when a block arrives damaged or when both nodes turn out to be one.
#include "examples/multinode.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int64_t kBlockBytes = 32 << 20;

bool HasAddress(int argc, char** argv) {
  if (std::getenv("AIRT_ADDRESS") != nullptr) return true;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--airt_address=", 15) == 0) return true;
  }
  return false;
}

const char* Verdict(int64_t first_bad_byte) { return first_bad_byte < 0 ? "intact" : "DAMAGED"; }

}  // namespace

int main(int argc, char** argv) {
  if (!HasAddress(argc, argv)) {
    std::fprintf(stderr,
                 "multinode: needs a cluster of two nodes, the second offering {\"node2\": 1}: set "
                 "AIRT_ADDRESS or pass --airt_address=HOST:PORT (scripts/demo starts one)\n");
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  airt::Init(airt::Config{}, argc, argv);

  Place first = *airt::Get(airt::Task(WhereAmI).Remote());
  Place second = *airt::Get(airt::Task(WhereAmI).SetResource("node2", 1).Remote());
  std::printf("a task asking for {CPU: 1} ran on    %s\n", first.Describe().c_str());
  std::printf("a task asking for {node2: 1} ran on  %s\n", second.Describe().c_str());

  // Made on the second node (it stays in that node's store); the check on the first pulls it.
  airt::ObjectRef<std::vector<uint8_t>> made =
      airt::Task(MakeBlock).SetResource("node2", 1).Remote(kBlockBytes, 1);
  BlockCheck there_to_here = *airt::Get(airt::Task(CheckBlock).Remote(made, kBlockBytes, 1));
  std::printf("32 MiB made on node pid %d, checked on node pid %d: %s\n", second.node_pid,
              there_to_here.place.node_pid, Verdict(there_to_here.first_bad_byte));

  // Put by the driver into its own node's store; the check on the second node pulls it.
  airt::ObjectRef<std::vector<uint8_t>> put = airt::Put(BlockBytes(kBlockBytes, 2));
  BlockCheck here_to_there =
      *airt::Get(airt::Task(CheckBlock).SetResource("node2", 1).Remote(put, kBlockBytes, 2));
  std::printf("32 MiB put by the driver, checked on node pid %d: %s\n",
              here_to_there.place.node_pid, Verdict(here_to_there.first_bad_byte));

  // The driver reads the block made on the second node too.
  int64_t got = FirstBadByte(*airt::Get(made), kBlockBytes, 1);
  std::printf("32 MiB made on node pid %d, read by the driver: %s\n", second.node_pid,
              Verdict(got));
  airt::Shutdown();

  bool two_nodes =
      !(first == second) && !(there_to_here.place == second) && here_to_there.place == second;
  bool intact = there_to_here.first_bad_byte < 0 && here_to_there.first_bad_byte < 0 && got < 0;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("summary: 5 tasks on %s, 2 blocks of 32 MiB moved between nodes, %s (%.1f s)\n",
              two_nodes ? "2 nodes" : "ONE node (expected two)",
              intact ? "all intact" : "SOME DAMAGED", seconds);
  return two_nodes && intact ? 0 : 1;
}
