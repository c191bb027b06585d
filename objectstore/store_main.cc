// airt-store: serves one node's object store until SIGINT or SIGTERM, and with --transfer also
// its objects to other nodes over TCP. airt-node embeds the same StoreServer and TransferServer;
// this daemon runs them alone (tests, benchmarks, a store shared by local processes).
#include <signal.h>

#include <cstdio>
#include <iostream>

#include "common/flags.h"
#include "common/logging.h"
#include "common/process.h"
#include "objectstore/object_store.h"
#include "objectstore/transfer.h"

int main(int argc, char** argv) {
  airt::InitProcess("airt-store");
  airt::objectstore::StoreOptions options;
  uint64_t max_clients = options.max_clients;
  bool prefault = options.prefault;
  uint64_t spin = static_cast<uint64_t>(options.poll_spin_us);
  bool transfer = false;
  uint64_t transfer_port = 0;
  std::string transfer_address = "127.0.0.1";
  airt::FlagSet flags("airt-store");
  flags.AddString("socket", &options.socket_path, "Unix socket path clients connect to (required)");
  flags.AddBytes("capacity", &options.capacity_bytes, "size of the shared-memory arena, e.g. 512M");
  flags.AddUint64("max-objects", &options.max_objects, "objects held at once, spilled included");
  flags.AddUint64("max-clients", &max_clients, "clients connected at once");
  flags.AddUint64("pin-slots", &options.pin_slots_per_client,
                  "distinct objects one client may pin");
  flags.AddString("spill-dir", &options.spill_dir,
                  "directory for spilled objects; empty: no spilling");
  flags.AddString("fallback-dir", &options.fallback_dir,
                  "directory for fallback files (objects the arena cannot hold); empty: none");
  flags.AddBytes("fallback-limit", &options.fallback_limit_bytes,
                 "bytes the fallback files may hold at once; default: what the disk holds");
  flags.AddBool("prefault", &prefault, "populate the arena in the background at start");
  flags.AddUint64("poll-spin-us", &spin, "poll this long after a request before sleeping");
  flags.AddBool("transfer", &transfer, "serve this store's objects to other nodes over TCP");
  flags.AddUint64("transfer-port", &transfer_port, "TCP port of the transfer service; 0: any free");
  flags.AddString("transfer-address", &transfer_address, "address the transfer service binds");
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

  auto transfer_counters = std::make_shared<airt::objectstore::TransferCounters>();
  options.transfer_counters = transfer_counters;  // its Stats show what the service sent
  auto server = airt::objectstore::StoreServer::Start(options);
  if (!server.ok()) {
    std::cerr << "airt-store: " << server.status().ToString() << "\n";
    return 1;
  }
  std::unique_ptr<airt::objectstore::TransferServer> transfer_server;
  if (transfer) {
    if (transfer_port > 65535) {
      std::cerr << "airt-store: --transfer-port must be below 65536\n";
      return 2;
    }
    auto started = airt::objectstore::TransferServer::Start(
        {options.socket_path, transfer_address, static_cast<uint16_t>(transfer_port)},
        transfer_counters);
    if (!started.ok()) {
      std::cerr << "airt-store: " << started.status().ToString() << "\n";
      return 1;
    }
    transfer_server = std::move(*started);
    std::printf("transfer %s:%u\n", transfer_address.c_str(), transfer_server->port());
  }
  AIRT_LOG(INFO) << "serving " << options.capacity_bytes << " bytes at " << options.socket_path;
  std::printf("ready %s\n", options.socket_path.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  AIRT_LOG(INFO) << "stopping on signal " << sig;
  transfer_server.reset();  // before the store it reads from
  return 0;
}
