// airt-node: the node daemon, one per machine (DESIGN.md "Processes"): hosts the node's object
// store and transfer service, registers with the head and heartbeats, grants worker leases and
// keeps the pool of worker processes. Exit status: 0 after SIGTERM or SIGINT or a drain, 1 when a
// service cannot start, 2 for bad flags.
#include <signal.h>

#include <cstdio>
#include <iostream>

#include "common/process.h"
#include "worker/internal/host.h"
#include "worker/internal/node_config.h"
#include "worker/internal/node_daemon.h"

int main(int argc, char** argv) {
  airt::InitProcess("airt-node");
  // Block the stop signals and SIGCHLD before any thread starts (the plugin's, the store's), so
  // that only the node's event loop receives them (through signalfds). Workers get an empty mask.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGUSR1);  // a preemption notice: the node drains itself (node_daemon.cc)
  sigset_t blocked = stop;
  sigaddset(&blocked, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);

  auto config = airt::worker::ParseNodeConfig(argc, argv, airt::worker::DetectHost());
  if (!config.ok()) {
    if (config.status().code() == airt::Code::kCancelled) {
      std::cout << config.status().message();
      return 0;
    }
    std::cerr << "airt-node: " << config.status().message() << "\n"
              << "run airt-node --help for the flags\n";
    return 2;
  }
  return airt::worker::RunNode(*config, stop);
}
