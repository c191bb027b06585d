// airt-store: serves one node's object store until SIGINT or SIGTERM. airt-node embeds the same
// StoreServer; this daemon runs it alone (tests, benchmarks, a store shared by local processes).
#include <signal.h>

#include <cstdio>
#include <iostream>

#include "common/flags.h"
#include "common/logging.h"
#include "common/process.h"
#include "objectstore/object_store.h"

int main(int argc, char** argv) {
  airt::InitProcess("airt-store");
  airt::objectstore::StoreOptions options;
  uint64_t max_clients = options.max_clients;
  bool prefault = options.prefault;
  uint64_t spin = static_cast<uint64_t>(options.poll_spin_us);
  airt::FlagSet flags("airt-store");
  flags.AddString("socket", &options.socket_path, "Unix socket path clients connect to (required)");
  flags.AddBytes("capacity", &options.capacity_bytes, "size of the shared-memory arena, e.g. 512M");
  flags.AddUint64("max-objects", &options.max_objects, "objects held at once, spilled included");
  flags.AddUint64("max-clients", &max_clients, "clients connected at once");
  flags.AddUint64("pin-slots", &options.pin_slots_per_client,
                  "distinct objects one client may pin");
  flags.AddString("spill-dir", &options.spill_dir,
                  "directory for spilled objects; empty: no spilling");
  flags.AddBool("prefault", &prefault, "populate the arena in the background at start");
  flags.AddUint64("poll-spin-us", &spin, "poll this long after a request before sleeping");
  airt::Status parsed = flags.Parse(argc, argv);
  if (!parsed.ok() || options.socket_path.empty()) {
    if (!parsed.ok() && parsed.code() != airt::Code::kCancelled) {
      std::cerr << "airt-store: " << parsed.message() << "\n";
    } else if (parsed.ok()) {
      std::cerr << "airt-store: --socket is required\n";
    }
    std::cerr << flags.Usage();
    return parsed.code() == airt::Code::kCancelled ? 0 : 2;
  }
  options.max_clients = static_cast<uint32_t>(max_clients);
  options.prefault = prefault;
  options.poll_spin_us = static_cast<int>(spin);

  // Block the stop signals before any thread starts, then wait for one.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  auto server = airt::objectstore::StoreServer::Start(options);
  if (!server.ok()) {
    std::cerr << "airt-store: " << server.status().ToString() << "\n";
    return 1;
  }
  AIRT_LOG(INFO) << "serving " << options.capacity_bytes << " bytes at " << options.socket_path;
  std::printf("ready %s\n", options.socket_path.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  AIRT_LOG(INFO) << "stopping on signal " << sig;
  return 0;
}
