// A second driver for actor_test: joins the cluster at AIRT_ADDRESS, creates a Counter named
// argv[1] in namespace argv[2] (detached with "detached"), prints "actor pid <pid of its worker>"
// and "job <its job id hex>", then either exits at once through Shutdown ("exit", "detached") or
// waits to be killed ("wait", at most 60 s). MAX_RESTARTS (default 0) is the actor's max_restarts.
//   actor_driver NAME NAMESPACE exit|wait|detached [MAX_RESTARTS]
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "airt/api.h"
#include "tests/e2e/actor_functions.h"

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: actor_driver NAME NAMESPACE exit|wait|detached [MAX_RESTARTS]\n");
    return 2;
  }
  airt::Init();
  std::string mode = argv[3];
  auto counter = airt::Actor(Counter::Create)
                     .SetName(argv[1], argv[2])
                     .SetDetached(mode == "detached")
                     .SetMaxRestarts(argc == 5 ? std::stoi(argv[4]) : 0)
                     .Remote(100);
  int pid = *airt::Get(counter.Task(&Counter::Pid).Remote());
  std::printf("actor pid %d\njob %s\n", pid, airt::internal::JobIdHex().c_str());
  std::fflush(stdout);
  if (mode == "wait") std::this_thread::sleep_for(std::chrono::seconds(60));
  airt::Shutdown();
  return 0;
}
