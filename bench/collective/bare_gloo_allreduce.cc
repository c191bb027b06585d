// A plain Gloo program (no airt): `world` ranks as processes forked from this one, a
// FileStore rendezvous in `dir`, the TCP transport on 127.0.0.1, gloo::allreduce with gloo::sum,
// or with OP "reducescatter" Gloo's own reduce-scatter (ReduceScatterHalvingDoubling, made once
// per size as Gloo's benchmark does, each rank keeping an equal block); rank 0 prints
// "BYTES SECONDS" per size (allreduce_loop.h). The baseline of allreduce_bench.py.
//   bare_gloo_allreduce DIR WORLD SIZES_CSV [allreduce|reducescatter]
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "bench/collective/allreduce_loop.h"

int RunRank(const std::string& dir, int world, int rank, const std::vector<size_t>& sizes,
            bool reducescatter) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, world);
  gloo::rendezvous::FileStore store(dir);
  context->connectFullMesh(store, device);
  uint32_t tag = 0;
  std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> scatter;
  float* scatter_data = nullptr;
  auto results = airt::bench::TimeAllreduce(
      sizes,
      [&](float* data, size_t count) {
        if (reducescatter) {
          if (scatter_data != data) {
            scatter = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
                context, std::vector<float*>{data}, static_cast<int>(count),
                std::vector<int>(world, static_cast<int>(count / world)));
            scatter_data = data;
          }
          scatter->run();
          return;
        }
        gloo::AllreduceOptions o(context);
        o.setOutput(data, count);
        o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
            &gloo::sum<float>));
        o.setTag(++tag);
        gloo::allreduce(o);
      },
      [&] {
        gloo::BarrierOptions o(context);
        o.setTag(++tag);
        gloo::barrier(o);
      });
  if (rank == 0) {
    for (auto& [bytes, seconds] : results) std::printf("%zu %.9f\n", bytes, seconds);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s DIR WORLD SIZES_CSV [allreduce|reducescatter]\n", argv[0]);
    return 2;
  }
  bool reducescatter = argc == 5 && std::string(argv[4]) == "reducescatter";
  std::string dir = argv[1];
  int world = std::atoi(argv[2]);
  std::vector<size_t> sizes = airt::bench::ParseSizes(argv[3]);
  std::vector<pid_t> children;
  for (int r = 1; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(RunRank(dir, world, r, sizes, reducescatter));
    children.push_back(pid);
  }
  int rc = RunRank(dir, world, 0, sizes, reducescatter);
  std::fflush(stdout);
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}
