// A driver process for local_init_test: calls airt::Init with no address (the test unsets
// AIRT_ADDRESS), so Init starts a local cluster under TEMP_BASE (its TMPDIR), and runs tasks.
//   local_init_driver shutdown TEMP_BASE MARKER [ARGS...]  tasks, then waits for MARKER, Shutdown
//   local_init_driver exit TEMP_BASE MARKER [ARGS...]      the same, but Init runs on a thread
//                                                          that ends at once, and main returns
//   local_init_driver hang TEMP_BASE                       a task that runs a minute, for a kill
// ARGS go to Init(config, argc, argv) (e.g. --airt_code_search_path=...). In the first two modes
// the local node has num_cpus 2, num_gpus 1 and {"local_slot": 1}; `hang` uses the defaults (all
// CPUs, the program's folder as the code search path). It prints "cluster up" once Init returns,
// a line per result, and "waiting" or "submitted" before it blocks.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "airt/api.h"

int Add(int a, int b);
std::vector<uint8_t> Bytes(int n, int seed);
int64_t SumBytes(std::vector<uint8_t> bytes);
std::string VisibleDevices();
int SleepMs(int ms);

namespace {

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void RunTasks() {
  Say("add " + std::to_string(*airt::Get(airt::Task(Add).Remote(2, 3))));
  airt::ObjectRef<std::vector<uint8_t>> bytes = airt::Task(Bytes).Remote(1 << 20, 3);
  std::shared_ptr<std::vector<uint8_t>> got = airt::Get(bytes);
  int64_t expect = 0;
  for (uint8_t b : *got) expect += b;
  Say(std::string("sum ") +
      (*airt::Get(airt::Task(SumBytes).Remote(bytes)) == expect ? "ok" : "wrong"));
  Say("slot " +
      std::to_string(*airt::Get(airt::Task(Add).SetResource("local_slot", 1).Remote(1, 1))));
  Say("gpu " + *airt::Get(airt::Task(VisibleDevices).SetResource("GPU", 1).Remote()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: local_init_driver shutdown|exit|hang TEMP_BASE [MARKER] ...\n");
    return 2;
  }
  std::string mode = argv[1];
  ::setenv("TMPDIR", argv[2], 1);
  if (mode == "hang") {
    airt::Init();
    Say("cluster up");
    airt::ObjectRef<int> slow = airt::Task(SleepMs).Remote(60000);
    Say("submitted");
    airt::Get(slow);
    return 0;
  }
  if (argc < 4 || (mode != "shutdown" && mode != "exit")) return 2;
  airt::Config config;
  config.num_cpus = 2;
  config.num_gpus = 1;
  config.resources = {{"local_slot", 1}};
  auto init = [&] { airt::Init(config, argc - 3, argv + 3); };  // argv[3] as the program name
  if (mode == "exit") {
    std::thread(init).join();  // the cluster must outlive the thread that started it
  } else {
    init();
  }
  Say("cluster up");
  RunTasks();
  Say("waiting");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::access(argv[3], F_OK) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (mode == "shutdown") {
    airt::Shutdown();
    Say("shut down");
  }
  return 0;
}
