// The Head service over the real RPC stack: HeadServer behind capnp::EzRpcServer on loopback, an
// EzRpcClient talking to it, a manual clock and a fault-injecting store under it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>
#include <kj/async-io.h>

#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "common/rpc_status.h"
#include "head/head.h"
#include "head/internal/node_connector.h"
#include "tests/head/head_doubles.h"

namespace airt::head::testing {

class HeadRpcTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kHeartbeatMs = 100;
  static constexpr uint32_t kTimeoutMs = 1000;
  static constexpr uint32_t kDisconnectGraceMs = 200;

  void SetUp() override { StartHead(); }
  void TearDown() override { StopHead(); }

  // Starts a head over the fixture's store (which survives StopHead: a restarted head).
  void StartHead() {
    HeadOptions options;
    options.heartbeat_interval_ms = kHeartbeatMs;
    options.node_timeout_ms = kTimeoutMs;
    options.node_disconnect_grace_ms = kDisconnectGraceMs;
    auto opened = HeadServer::Open(options, store_, clock_, connector_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    head_ = opened->get();
    server_ = std::make_unique<capnp::EzRpcServer>(kj::mv(*opened), "127.0.0.1", 0);
    port_ = server_->getPort().wait(server_->getWaitScope());
    client_ = std::make_unique<capnp::EzRpcClient>("127.0.0.1", port_);
    cap_ = std::make_unique<proto::Head::Client>(client_->getMain<proto::Head>());
  }
  void StopHead() {
    leases_.clear();
    cap_.reset();
    client_.reset();
    // The server sees the client go and drops the job leases, whose drivers' jobs the head then
    // finishes: let the loop run that before it is destroyed with the server.
    kj::Timer& timer = server_->getIoProvider().getTimer();
    for (int i = 0; i < 10; ++i) timer.afterDelay(kj::MILLISECONDS).wait(server_->getWaitScope());
    server_.reset();
    head_ = nullptr;
  }

  proto::Head::Client& head() { return *cap_; }
  uint port() const { return port_; }

  // Runs the loop until `condition` holds; false after 10 s.
  bool PumpUntil(const std::function<bool()>& condition) {
    kj::Timer& timer = server_->getIoProvider().getTimer();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!condition()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      timer.afterDelay(2 * kj::MILLISECONDS).wait(server_->getWaitScope());
    }
    return true;
  }

  // Sends `request` (a request is sent once) and waits for the reply; a failure is the Status the
  // server threw.
  template <typename Params, typename Results>
  Result<capnp::Response<Results>> Send(capnp::Request<Params, Results>&& request) {
    std::optional<capnp::Response<Results>> response;
    Status s = CatchKj([&] { response.emplace(request.send().wait(client_->getWaitScope())); });
    if (!s.ok()) return s;
    return std::move(*response);
  }

  // A valid NodeInfo for `id`: 8 CPUs and `gpus` GPU ids 0..gpus-1; `edit` may then spoil it.
  static void FillNode(proto::NodeInfo::Builder info, const NodeId& id, uint32_t gpus = 0) {
    info.setNodeId(capnp::Data::Reader(id.data(), NodeId::kSize));
    info.setAddress("10.0.0.1");
    info.setNodePort(7000);
    info.setTransferPort(7001);
    info.setStoreSocket("/tmp/airt/store.sock");
    auto total = info.initTotal(gpus > 0 ? 2 : 1);
    total[0].setName("CPU");
    total[0].setAmount(8);
    if (gpus > 0) {
      total[1].setName("GPU");
      total[1].setAmount(gpus);
    }
    auto labels = info.initLabels(1);
    labels[0].setKey("ray.io/accelerator-type");
    labels[0].setValue("A10");
    auto ids = info.initGpuIds(gpus);
    for (uint32_t g = 0; g < gpus; ++g) ids.set(g, g);
    info.setTempDir("/tmp/airt");
    info.setPid(4242);
  }

  Status RegisterNode(const NodeId& id, uint32_t gpus = 0,
                      const std::function<void(proto::NodeInfo::Builder)>& edit = {}) {
    auto request = head().registerNodeRequest();
    FillNode(request.initInfo(), id, gpus);
    if (edit) edit(request.getInfo());
    return Send(kj::mv(request)).status();
  }

  // The heartbeat's `known`, with `edit` applied to the request.
  Result<bool> Heartbeat(
      const NodeId& id,
      const std::function<void(proto::Head::HeartbeatParams::Builder)>& edit = {}) {
    auto request = head().heartbeatRequest();
    request.setNodeId(capnp::Data::Reader(id.data(), NodeId::kSize));
    auto available = request.initAvailable(1);
    available[0].setName("CPU");
    available[0].setAmount(4);
    if (edit) edit(request);
    auto reply = Send(kj::mv(request));
    if (!reply.ok()) return reply.status();
    return reply->getKnown();
  }

  Result<capnp::Response<proto::Head::ClusterViewResults>> View() {
    return Send(head().clusterViewRequest());
  }

  Result<bool> KvPut(const std::string& ns, const std::string& key, const std::string& value,
                     bool overwrite = true) {
    auto request = head().kvPutRequest();
    request.setNamespace(Text(ns));
    request.setKey(Text(key));
    request.setValue(
        capnp::Data::Reader(reinterpret_cast<const kj::byte*>(value.data()), value.size()));
    request.setOverwrite(overwrite);
    auto reply = Send(kj::mv(request));
    if (!reply.ok()) return reply.status();
    return reply->getAdded();
  }

  Result<std::optional<std::string>> KvGet(const std::string& ns, const std::string& key) {
    auto request = head().kvGetRequest();
    request.setNamespace(Text(ns));
    request.setKey(Text(key));
    auto reply = Send(kj::mv(request));
    if (!reply.ok()) return reply.status();
    if (!reply->getFound()) return std::optional<std::string>();
    auto value = reply->getValue();
    return std::optional<std::string>(
        std::string(reinterpret_cast<const char*>(value.begin()), value.size()));
  }

  // A new job's id; its lease is held in leases_ until the test drops it or the head stops.
  Result<JobId> RegisterJob(int32_t driver_pid = 1234) {
    auto request = head().registerJobRequest();
    request.setDriverPid(driver_pid);
    request.setDriverAddress("10.0.0.9");
    auto reply = Send(kj::mv(request));
    if (!reply.ok()) return reply.status();
    if (reply->getJobId().size() != JobId::kSize) return Internal("a malformed job id");
    JobId id = JobId::FromRaw(reply->getJobId().begin());
    leases_.insert_or_assign(id, reply->getLease());
    return id;
  }

  // The job as listJobs shows it; nullopt when it is not listed.
  std::optional<std::pair<bool, uint64_t>> JobAliveAndEnd(const JobId& id) {
    auto jobs = Send(head().listJobsRequest());
    if (!jobs.ok()) return std::nullopt;
    for (auto job : jobs->getJobs()) {
      if (job.getJobId() == capnp::Data::Reader(id.data(), JobId::kSize)) {
        return std::make_pair(job.getAlive(), job.getEndMs());
      }
    }
    return std::nullopt;
  }

  // A valid actor of `job` named `name` in `ns`; `edit` may then spoil it.
  static void FillActor(proto::ActorInfo::Builder info, const ActorId& id,
                        const std::string& name = "", const std::string& ns = "") {
    info.setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
    info.setJobId(capnp::Data::Reader(id.Job().data(), JobId::kSize));
    info.setName(name);
    info.setNamespace(ns);
    info.setClassName("Counter::Create");
    info.setMaxRestarts(1);
  }

  Status RegisterActor(const ActorId& id, const std::string& name = "", const std::string& ns = "",
                       const std::function<void(proto::ActorInfo::Builder)>& edit = {}) {
    auto request = head().registerActorRequest();
    FillActor(request.initInfo(), id, name, ns);
    if (edit) edit(request.getInfo());
    return Send(kj::mv(request)).status();
  }

  // All of `s`, NUL bytes included (a std::string converts to Text only up to its first NUL).
  static capnp::Text::Reader Text(const std::string& s) {
    return capnp::Text::Reader(s.data(), s.size());
  }

  InMemoryMetadataStore backing_;
  FaultInjectingMetadataStore store_{backing_};
  ManualClock clock_;
  // How the head reaches nodes (placement groups, drains); null: it has no connection to them.
  internal::NodeConnector* connector_ = nullptr;
  HeadServer* head_ = nullptr;  // owned by the capability inside server_
  uint port_ = 0;
  std::unique_ptr<capnp::EzRpcServer> server_;
  std::unique_ptr<capnp::EzRpcClient> client_;
  // Held by pointer: a kj::Own inside makes a member's destructor noexcept(false).
  std::unique_ptr<proto::Head::Client> cap_;
  std::map<JobId, proto::JobLease::Client> leases_;  // the jobs' drivers' leases
};

}  // namespace airt::head::testing
