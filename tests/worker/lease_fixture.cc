#include "tests/worker/lease_fixture.h"

#include <signal.h>

#include <cstdlib>
#include <iostream>

#include "common/rpc_status.h"
#include "worker/scheduling/scheduling.h"

namespace airt::testing {
namespace {

constexpr auto kMs = kj::MILLISECONDS;

LeaseReply ToReply(proto::LeaseReply::Reader reply) {
  LeaseReply out;
  switch (reply.which()) {
    case proto::LeaseReply::GRANTED: {
      auto granted = reply.getGranted();
      out.kind = LeaseReply::Kind::kGranted;
      out.lease_id = granted.getLeaseId();
      auto worker = granted.getWorker();
      auto id = worker.getWorkerId();
      auto parsed = WorkerId::FromBinary(
          std::string_view(reinterpret_cast<const char*>(id.begin()), id.size()));
      if (parsed.ok()) out.worker.id = *parsed;
      out.worker.host = worker.getHost();
      out.worker.port = worker.getPort();
      out.worker.pid = worker.getPid();
      for (uint32_t gpu : granted.getGpuIds()) out.gpu_ids.push_back(gpu);
      break;
    }
    case proto::LeaseReply::SPILLBACK:
      out.kind = LeaseReply::Kind::kSpillback;
      out.text = reply.getSpillback();
      break;
    case proto::LeaseReply::INFEASIBLE:
      out.kind = LeaseReply::Kind::kInfeasible;
      out.text = reply.getInfeasible();
      break;
  }
  return out;
}

}  // namespace

LeaseFixture::LeaseFixture() {
  // Worker exits reach the reaper's signalfd only while SIGCHLD is blocked; blocked here, before
  // the test makes any thread, so every thread inherits it.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &chld, nullptr);
  ::unsetenv("AIRT_FAKE_WORKER_MODE");
  head_state_->heartbeat_interval_ms = 20;

  loop_ =
      std::make_unique<capnp::EzRpcServer>(kj::heap<worker::NodeService>(target_), "127.0.0.1", 0);
  node_port_ = static_cast<uint16_t>(loop_->getPort().wait(wait()));
  head_ = std::make_unique<capnp::EzRpcServer>(kj::heap<FakeHead>(head_state_), "127.0.0.1", 0);
  head_port_ = static_cast<uint16_t>(head_->getPort().wait(wait()));
}

LeaseFixture::~LeaseFixture() {
  ::unsetenv("AIRT_FAKE_WORKER_MODE");
  if (HasFailure() && pool_ != nullptr) {
    for (const auto& w : pool_->Snapshot().workers) {
      std::cerr << "---- " << w.log_path << " ----\n" << ReadFile(w.log_path);
    }
  }
  target_->leases = nullptr;
  holders_.clear();
  node_.reset();
  client_.reset();
  view_subscriber_.reset();
  view_connector_.reset();
  session_.reset();
  connector_.reset();
  cleanup_.reset();
  leases_.reset();
  pool_.reset();  // kills what is left
  reaper_.reset();
  store_client_.reset();
  store_.reset();
}

void LeaseFixture::StartNode(const NodeSetup& setup) {
  auto totals = worker::scheduling::ResourceSet::FromDoubles(setup.total);
  ASSERT_TRUE(totals.ok()) << totals.status().ToString();
  auto resources = worker::scheduling::NodeResources::Create(*totals);
  ASSERT_TRUE(resources.ok()) << resources.status().ToString();

  objectstore::StoreOptions store_options;
  store_options.socket_path = dir_.File("store.sock");
  store_options.capacity_bytes = 4 << 20;
  store_options.max_objects = 1024;
  store_options.max_clients = 8;
  store_options.prefault = false;
  auto store = objectstore::StoreServer::Start(store_options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  store_ = std::move(*store);
  auto store_client = objectstore::StoreClient::Connect(store_options.socket_path,
                                                        {.spin_us = 50, .prefault = false});
  ASSERT_TRUE(store_client.ok()) << store_client.status().ToString();
  store_client_ = std::move(*store_client);

  auto reaper = worker::ChildReaper::Open(loop_->getLowLevelIoProvider(), timer(), 200 * kMs);
  ASSERT_TRUE(reaper.ok()) << reaper.status().ToString();
  reaper_ = std::move(*reaper);
  worker::WorkerPoolOptions pool_options;
  pool_options.cpp_worker_binary = AIRT_FAKE_WORKER_BIN;
  pool_options.node_address = "127.0.0.1";
  pool_options.node_port = node_port_;
  pool_options.store_socket = dir_.File("store.sock");
  pool_options.transfer_address = "127.0.0.1:9";
  pool_options.code_search_path = dir_.File("code");
  pool_options.log_dir = dir_.path();
  pool_options.register_timeout = setup.register_timeout;
  pool_options.idle_timeout = setup.idle_timeout;
  pool_options.stop_grace = setup.stop_grace;
  pool_ = std::make_unique<worker::WorkerPool>(pool_options, launcher_, *reaper_, timer());
  leases_ = std::make_unique<worker::LeaseManager>(
      worker::LeaseManagerOptions{node_id_, setup.infeasible_grace}, std::move(*resources), *pool_,
      timer());
  target_->leases = leases_.get();
  cleanup_ = std::make_unique<worker::JobCleanup>(
      *leases_, [this](const JobId& job) { return store_client_->DeleteJob(job); });

  worker::NodeRegistration registration;
  registration.id = node_id_;
  registration.address = "127.0.0.1";
  registration.node_port = node_port_;
  for (const auto& [name, amount] : setup.total) registration.total.push_back({name, amount});
  std::string head = "127.0.0.1:" + std::to_string(head_port_);
  connector_ = std::make_unique<worker::EzRpcHeadConnector>(head);
  worker::HeadSessionOptions session_options;
  session_options.retry_jitter = 0;
  session_ = std::make_unique<worker::HeadSession>(*connector_, timer(), registration, *leases_,
                                                   session_options, nullptr);
  session_->SetOnFinishedJobs([this](std::vector<JobId> jobs) { cleanup_->OnFinished(jobs); });
  session_->Start();
  view_connector_ = std::make_unique<worker::EzRpcHeadConnector>(head);
  view_subscriber_ = std::make_unique<worker::ClusterViewSubscriber>(
      *view_connector_, timer(), worker::ClusterViewSubscriberOptions{20 * kMs, 2 * kj::SECONDS},
      [this](worker::RemoteNodes nodes) { leases_->UpdateView(std::move(nodes)); });
  view_subscriber_->Start();

  client_ = std::make_unique<capnp::EzRpcClient>("127.0.0.1", node_port_);
  node_ = std::make_unique<proto::Node::Client>(client_->getMain<proto::Node>());
}

kj::Promise<LeaseReply> LeaseFixture::Request(const std::map<std::string, double>& shape,
                                              const JobId& job, LeaseFlags flags) {
  auto request = node().requestWorkerLeaseRequest();
  auto resources = request.initShape().initResources(shape.size());
  size_t i = 0;
  for (const auto& [name, amount] : shape) {
    resources[i].setName(name);
    resources[i++].setAmount(amount);
  }
  JobId id = job.IsNil() ? job_ : job;
  request.setJobId(capnp::Data::Reader(id.data(), JobId::kSize));
  request.setLanguage(proto::Language::CPP);
  request.setPlaced(flags.placed);
  request.setDetached(flags.detached);
  return request.send().then(
      [this](capnp::Response<proto::Node::RequestWorkerLeaseResults>&& response) {
        LeaseReply reply = ToReply(response.getReply());
        if (reply.kind == LeaseReply::Kind::kGranted) {
          holders_.insert_or_assign(reply.lease_id, response.getHolder());
        }
        return reply;
      },
      [](kj::Exception&& e) {
        LeaseReply failed;
        failed.status = FromKjException(e);
        return failed;
      });
}

LeaseReply LeaseFixture::Await(kj::Promise<LeaseReply>& pending,
                               std::chrono::milliseconds timeout) {
  auto deadline = timer().afterDelay(timeout.count() * kMs).then([] {
    LeaseReply late;
    late.status = DeadlineExceeded("no lease reply in time");
    return late;
  });
  return pending.exclusiveJoin(kj::mv(deadline)).wait(wait());
}

LeaseReply LeaseFixture::Lease(const std::map<std::string, double>& shape, const JobId& job,
                               LeaseFlags flags) {
  kj::Promise<LeaseReply> pending = Request(shape, job, flags);
  return Await(pending);
}

Status LeaseFixture::Return(uint64_t lease_id, bool disconnect_worker) {
  auto request = node().returnWorkerLeaseRequest();
  request.setLeaseId(lease_id);
  request.setDisconnectWorker(disconnect_worker);
  return CatchKj([&] { timer().timeoutAfter(10 * kj::SECONDS, request.send()).wait(wait()); });
}

bool LeaseFixture::PumpUntil(const std::function<bool()>& condition,
                             std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    timer().afterDelay(2 * kMs).wait(wait());
  }
  return true;
}

bool LeaseFixture::WaitForFreshView() {
  uint64_t seen = view_subscriber_->views();
  return PumpUntil([&] { return view_subscriber_->views() >= seen + 2; });
}

bool LeaseFixture::WaitForHeartbeatAvailable(const std::string& name, double amount) {
  size_t seen = head_state_->Heartbeats().size();
  return PumpUntil([&] {
    auto beats = head_state_->Heartbeats();
    if (beats.size() <= seen) return false;
    auto it = beats.back().available.find(name);
    return it != beats.back().available.end() && it->second == amount;
  });
}

std::string LeaseFixture::LogPath(const WorkerId& worker) const {
  return dir_.File("worker-" + worker.Hex().substr(0, 12) + ".log");
}

}  // namespace airt::testing
