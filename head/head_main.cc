// airt-head: the cluster's control plane. Serves the Head interface (common/proto/cluster.capnp)
// over TCP on one KJ event loop until SIGTERM or SIGINT, then exits 0.
//
// It binds 127.0.0.1 by default: anyone who reaches the port can register nodes and read the KV,
// so a head is local unless asked otherwise. A cluster across machines passes
// --bind-address=0.0.0.0 (or the address of the host's cluster network) on a trusted network.
// Once serving it prints one line, "head ready <bind address>:<port>" (the bound port when
// --port=0), to stdout.
//
// Its tables live in memory unless it is given a Redis (--redis-address, or the environment's
// AIRT_REDIS_ADDRESS, then RAY_REDIS_ADDRESS): then they are rows under --redis-key-prefix there,
// and a head started again against the same Redis and prefix reloads them (docs/cluster.md
// "Persistence").
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>

#include "common/flags.h"
#include "common/logging.h"
#include "common/process.h"
#include "common/rpc_status.h"
#include "head/head.h"
#include "head/internal/node_connector.h"
#include "head/internal/port_owner.h"
#include "head/redis_metadata_store.h"

namespace {

constexpr uint64_t kMaxMs = std::numeric_limits<uint32_t>::max();

int Usage(const airt::FlagSet& flags, const std::string& error) {
  std::cerr << "airt-head: " << error << "\n" << flags.Usage();
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  airt::InitProcess("airt-head");
  uint64_t port = 6379;
  std::string bind_address = "127.0.0.1";
  uint64_t heartbeat_interval_ms = 1000;
  uint64_t node_timeout_ms = 10000;
  uint64_t node_disconnect_grace_ms = 1000;
  uint64_t infeasible_grace_ms = 10000;
  std::string temp_dir = "/tmp/airt";
  std::string redis_address, redis_password, redis_key_prefix;
  uint64_t redis_retry_timeout_s = 60;
  uint64_t redis_retry_max_backoff_ms = 2000;
  airt::FlagSet flags("airt-head");
  flags.AddUint64("port", &port, "TCP port of the Head service (0: any free port)");
  flags.AddString(
      "bind-address", &bind_address,
      "address to listen on; 0.0.0.0 or the host's address for a multi-machine cluster");
  flags.AddUint64("heartbeat-interval-ms", &heartbeat_interval_ms,
                  "how often nodes are told to heartbeat");
  flags.AddUint64("node-timeout-ms", &node_timeout_ms,
                  "a node with no heartbeat for this long is dead");
  flags.AddUint64("node-disconnect-grace-ms", &node_disconnect_grace_ms,
                  "a node whose connection to the head dropped is dead unless it registers "
                  "again within this");
  flags.AddUint64("infeasible-grace-ms", &infeasible_grace_ms,
                  "how long an actor no node can hold waits for such a node to join before it "
                  "fails as infeasible");
  flags.AddString("temp-dir", &temp_dir, "the session's temp and log folder");
  flags.AddString("redis-address", &redis_address,
                  "HOST:PORT of a Redis that keeps the head's tables across head restarts "
                  "(default: $AIRT_REDIS_ADDRESS, then $RAY_REDIS_ADDRESS; none: in memory)");
  flags.AddString("redis-password", &redis_password, "password for Redis AUTH");
  flags.AddUint64("redis-retry-timeout-s", &redis_retry_timeout_s,
                  "how long writes wait, retried with backoff, for a Redis that went away before "
                  "they fail with UNAVAILABLE (the head keeps serving reads meanwhile)");
  flags.AddUint64("redis-retry-max-backoff-ms", &redis_retry_max_backoff_ms,
                  "the longest wait between two tries to reach a Redis that went away");
  flags.AddString("redis-key-prefix", &redis_key_prefix,
                  "prefix of every key the head keeps in Redis, one per cluster (default "
                  "\"airt:<--port>:\")");
  if (airt::Status parsed = flags.Parse(argc, argv); !parsed.ok()) {
    if (parsed.code() == airt::Code::kCancelled) return std::cout << flags.Usage(), 0;
    return Usage(flags, parsed.message());
  }
  if (port > 65535) return Usage(flags, "--port must be below 65536");
  if (heartbeat_interval_ms == 0 || heartbeat_interval_ms > kMaxMs) {
    return Usage(flags, "--heartbeat-interval-ms must be between 1 and " + std::to_string(kMaxMs));
  }
  if (node_timeout_ms <= heartbeat_interval_ms || node_timeout_ms > kMaxMs) {
    return Usage(flags, "--node-timeout-ms must exceed --heartbeat-interval-ms (" +
                            std::to_string(heartbeat_interval_ms) + ") and be at most " +
                            std::to_string(kMaxMs));
  }
  if (node_disconnect_grace_ms > kMaxMs) {
    return Usage(flags, "--node-disconnect-grace-ms must be at most " + std::to_string(kMaxMs));
  }
  if (infeasible_grace_ms > kMaxMs) {
    return Usage(flags, "--infeasible-grace-ms must be at most " + std::to_string(kMaxMs));
  }
  for (const char* env : {"AIRT_REDIS_ADDRESS", "RAY_REDIS_ADDRESS"}) {
    const char* value = std::getenv(env);
    if (redis_address.empty() && value != nullptr) redis_address = value;
  }
  std::optional<airt::head::RedisOptions> redis;
  if (!redis_address.empty()) {
    auto parsed_redis = airt::head::ParseRedisAddress(redis_address, "--redis-address");
    if (!parsed_redis.ok()) return Usage(flags, parsed_redis.status().message());
    redis = *parsed_redis;
    redis->password = redis_password;
    if (redis_retry_timeout_s > kMaxMs / 1000) {
      return Usage(flags,
                   "--redis-retry-timeout-s must be at most " + std::to_string(kMaxMs / 1000));
    }
    if (redis_retry_max_backoff_ms == 0 || redis_retry_max_backoff_ms > kMaxMs) {
      return Usage(flags,
                   "--redis-retry-max-backoff-ms must be between 1 and " + std::to_string(kMaxMs));
    }
    redis->retry_timeout_ms = static_cast<uint32_t>(redis_retry_timeout_s * 1000);
    redis->retry_max_backoff_ms = static_cast<uint32_t>(redis_retry_max_backoff_ms);
    redis->key_prefix =
        redis_key_prefix.empty() ? "airt:" + std::to_string(port) + ":" : redis_key_prefix;
  } else if (!redis_password.empty() || !redis_key_prefix.empty()) {
    return Usage(flags, "--redis-password and --redis-key-prefix need --redis-address");
  }
  std::error_code ec;
  std::filesystem::create_directories(temp_dir, ec);
  if (ec) AIRT_LOG(WARNING) << "cannot create --temp-dir " << temp_dir << ": " << ec.message();

  airt::head::HeadOptions options;
  options.heartbeat_interval_ms = static_cast<uint32_t>(heartbeat_interval_ms);
  options.node_timeout_ms = static_cast<uint32_t>(node_timeout_ms);
  options.infeasible_grace_ms = static_cast<uint32_t>(infeasible_grace_ms);
  options.node_disconnect_grace_ms = static_cast<uint32_t>(node_disconnect_grace_ms);
  std::unique_ptr<airt::head::Clock> clock = airt::head::NewSystemClock();

  // The stop signals are captured before the event loop exists and before any thread starts, so
  // every thread inherits them blocked and only this loop's onSignal receives them.
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  kj::AsyncIoContext io = kj::setupAsyncIo();

  // Listening first: a port that is taken (6379 is Ray's default and redis-server's) fails at
  // once, naming what holds it.
  kj::Own<kj::ConnectionReceiver> listener;
  airt::Status listening = airt::CatchKj([&] {
    listener = io.provider->getNetwork()
                   .parseAddress(bind_address, static_cast<uint>(port))
                   .wait(io.waitScope)
                   ->listen();
  });
  if (!listening.ok()) {
    std::string owner = port == 0 ? "" : airt::head::internal::DescribePortOwner(port);
    if (!owner.empty()) {
      std::cerr << "airt-head: port " << port << " is taken by " << owner
                << "; choose another with --port\n";
    } else {
      std::cerr << "airt-head: cannot listen on " << bind_address << ":" << port << ": "
                << listening.message() << "\n";
    }
    return 1;
  }
  uint bound_port = listener->getPort();

  // Declared after the event loop its writes answer on and before the server that uses it, so it
  // is destroyed after the server and before the loop.
  std::unique_ptr<airt::head::MetadataStore> store;
  if (redis) {
    auto connected = airt::head::RedisMetadataStore::Connect(*redis);
    if (!connected.ok()) {
      std::cerr << "airt-head: " << connected.status().message() << "\n";
      return 1;
    }
    AIRT_LOG(INFO) << "keeping the tables in Redis at " << redis->host << ":" << redis->port
                   << " under the key prefix '" << redis->key_prefix << "'";
    store = std::move(*connected);
  } else {
    store = std::make_unique<airt::head::InMemoryMetadataStore>();
  }

  airt::head::internal::TcpNodeConnector node_connector(io.provider->getNetwork());
  auto opened = airt::head::HeadServer::Open(options, *store, *clock, &node_connector);
  if (!opened.ok()) {
    std::cerr << "airt-head: " << opened.status().ToString() << "\n";
    return 1;
  }
  airt::head::HeadServer& head = **opened;
  airt::proto::Head::Client head_cap = kj::mv(*opened);  // keeps `head` alive until main returns
  capnp::TwoPartyServer server(head_cap);

  // Liveness is also checked whenever a call reads it; the timer makes deaths show promptly.
  // Every 100 ms at most: a node past its timeout or disconnect grace shows dead to the cluster
  // change feed's subscribers (waitClusterChange) within that.
  uint64_t check_ms = std::clamp<uint64_t>(node_timeout_ms / 20, 1, 100);
  kj::Promise<void> serving = server.listen(*listener).exclusiveJoin(
      head.WatchLiveness(io.provider->getTimer(), check_ms * kj::MILLISECONDS));
  kj::Promise<int> stopped = io.unixEventPort.onSignal(SIGTERM)
                                 .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
                                 .then([](siginfo_t info) { return info.si_signo; });

  AIRT_LOG(INFO) << "serving on " << bind_address << ":" << bound_port << " (heartbeat every "
                 << heartbeat_interval_ms << " ms, node timeout " << node_timeout_ms
                 << " ms, temp dir " << temp_dir << ")";
  std::printf("head ready %s:%u\n", bind_address.c_str(), bound_port);
  std::fflush(stdout);

  int signo = 0;
  airt::Status served = airt::CatchKj([&] {
    // `serving` only ends by failing, which wait() throws.
    signo = stopped.exclusiveJoin(serving.then([] { return 0; })).wait(io.waitScope);
  });
  if (!served.ok()) {
    AIRT_LOG(ERROR) << "serving failed: " << served.ToString();
    return 1;
  }
  AIRT_LOG(INFO) << "stopping on " << (signo == SIGTERM ? "SIGTERM" : "SIGINT");
  return 0;
}
