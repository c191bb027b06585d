// Allreduce (or reducescatter) through airt's communicator: `world` ranks as actors of a cluster
// (AIRT_ADDRESS, else a local one), each running allreduce_loop.h; prints rank 0's
// "BYTES SECONDS" per size.
//   airt_allreduce_bench WORLD SIZES_CSV ROUND [allreduce|reducescatter]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "airt/api.h"

class AllreduceRank {
 public:
  static AllreduceRank* Create();
  std::vector<double> Run(int world, int rank, std::string group, std::string sizes,
                          std::string op);
};

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s WORLD SIZES_CSV ROUND [allreduce|reducescatter]\n", argv[0]);
    return 2;
  }
  std::string op = argc == 5 ? argv[4] : "allreduce";
  int world = std::atoi(argv[1]);
  std::string group = std::string("bench") + argv[3];
  airt::Init();
  std::vector<airt::ActorHandle<AllreduceRank>> actors;
  std::vector<airt::ObjectRef<std::vector<double>>> ranks;
  for (int r = 0; r < world; ++r) actors.push_back(airt::Actor(AllreduceRank::Create).Remote());
  for (int r = 0; r < world; ++r) {
    ranks.push_back(actors[r].Task(&AllreduceRank::Run).Remote(world, r, group,
                                                                std::string(argv[2]), op));
  }
  std::vector<std::vector<double>> results;
  for (auto& r : ranks) results.push_back(*airt::Get(r));
  for (size_t i = 0; i + 1 < results[0].size(); i += 2) {
    std::printf("%zu %.9f\n", static_cast<size_t>(results[0][i]), results[0][i + 1]);
  }
  actors.clear();
  airt::Shutdown();
  return 0;
}
