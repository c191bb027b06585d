// A driver process for log_stream_test: joins the cluster at AIRT_ADDRESS, runs PrintHello(7)
// on a worker, prints "driver got 7", then stays connected (so the node can stream the worker's
// output to it) until the file argv[1] exists or 60 s pass.
//   log_driver MARKER
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "airt/api.h"

int PrintHello(int x);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: log_driver MARKER\n");
    return 2;
  }
  airt::Init();
  int got = *airt::Get(airt::Task(PrintHello).Remote(7));
  std::printf("driver got %d\n", got);
  std::fflush(stdout);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::access(argv[1], F_OK) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  airt::Shutdown();
  return 0;
}
