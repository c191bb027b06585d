// A plain Gloo program (no airt): `world` ranks as processes forked from this one, a
// FileStore rendezvous in `dir`, the TCP transport on 127.0.0.1, gloo::allreduce with gloo::sum;
// rank 0 prints "BYTES SECONDS" per size (allreduce_loop.h). The baseline of allreduce_bench.py.
//   bare_gloo_allreduce DIR WORLD SIZES_CSV
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "bench/collective/allreduce_loop.h"

int RunRank(const std::string& dir, int world, int rank, const std::vector<size_t>& sizes) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, world);
  gloo::rendezvous::FileStore store(dir);
  context->connectFullMesh(store, device);
  uint32_t tag = 0;
  auto results = airt::bench::TimeAllreduce(
      sizes,
      [&](float* data, size_t count) {
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
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DIR WORLD SIZES_CSV\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  int world = std::atoi(argv[2]);
  std::vector<size_t> sizes = airt::bench::ParseSizes(argv[3]);
  std::vector<pid_t> children;
  for (int r = 1; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(RunRank(dir, world, r, sizes));
    children.push_back(pid);
  }
  int rc = RunRank(dir, world, 0, sizes);
  std::fflush(stdout);
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}
