// A second driver for actor_test: joins the cluster at AIRT_ADDRESS, creates a Counter named
// argv[1] in namespace argv[2] (detached with "detached"), prints "actor pid <pid of its worker>"
// and "job <its job id hex>", then either exits at once through Shutdown ("exit", "detached") or
// waits to be killed ("wait", at most 60 s). MAX_RESTARTS (default 0) is the actor's max_restarts.
// "follow" waits (at most 60 s) for the file GO to exist, then calls Add(1) until the actor
// answers (its restart may take a moment), prints "after restart <value> pid <its worker's pid>"
// and waits to be killed.
//   actor_driver NAME NAMESPACE exit|wait|detached [MAX_RESTARTS]
//   actor_driver NAME NAMESPACE follow MAX_RESTARTS GO
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "airt/api.h"
#include "tests/e2e/actor_functions.h"

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5 && argc != 6) {
    std::fprintf(stderr,
                 "usage: actor_driver NAME NAMESPACE exit|wait|detached [MAX_RESTARTS]\n"
                 "       actor_driver NAME NAMESPACE follow MAX_RESTARTS GO\n");
    return 2;
  }
  airt::Init();
  std::string mode = argv[3];
  auto counter = airt::Actor(Counter::Create)
                     .SetName(argv[1], argv[2])
                     .SetDetached(mode == "detached")
                     .SetMaxRestarts(argc >= 5 ? std::stoi(argv[4]) : 0)
                     .Remote(100);
  int pid = *airt::Get(counter.Task(&Counter::Pid).Remote());
  std::printf("actor pid %d\njob %s\n", pid, airt::internal::JobIdHex().c_str());
  std::fflush(stdout);
  if (mode == "follow" && argc == 6) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(argv[5]) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::optional<int> value;
    while (!value && std::chrono::steady_clock::now() < until) {
      try {
        value = *airt::Get(counter.Task(&Counter::Add).Remote(1), 20'000);
      } catch (const airt::ActorDiedError& e) {
        std::printf("dead: %s\n", e.what());
        break;
      } catch (const airt::ActorError&) {
        // The call reached the worker that died: the next goes to the restarted actor.
      }
    }
    if (value) {
      std::printf("after restart %d pid %d\n", *value,
                  *airt::Get(counter.Task(&Counter::Pid).Remote(), 20'000));
    }
    std::fflush(stdout);
  }
  if (mode == "wait" || mode == "follow") std::this_thread::sleep_for(std::chrono::seconds(60));
  airt::Shutdown();
  return 0;
}
