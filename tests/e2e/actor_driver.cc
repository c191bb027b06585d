// A second driver for actor_test: joins the cluster at AIRT_ADDRESS, creates a Counter named
// argv[1] in namespace argv[2], prints "actor pid <pid of its worker>", then either exits at once
// through Shutdown ("exit") or waits to be killed ("wait", at most 60 s).
//   actor_driver NAME NAMESPACE exit|wait
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "airt/api.h"
#include "tests/e2e/actor_functions.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: actor_driver NAME NAMESPACE exit|wait\n");
    return 2;
  }
  airt::Init();
  auto counter = airt::Actor(Counter::Create).SetName(argv[1], argv[2]).Remote(100);
  int pid = *airt::Get(counter.Task(&Counter::Pid).Remote());
  std::printf("actor pid %d\n", pid);
  std::fflush(stdout);
  if (std::string(argv[3]) == "wait") std::this_thread::sleep_for(std::chrono::seconds(60));
  airt::Shutdown();
  return 0;
}
