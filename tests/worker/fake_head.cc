#include "tests/worker/fake_head.h"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>

#include <kj/async-io.h>

#include "common/rpc_status.h"

namespace airt::testing {
namespace {

std::map<std::string, double> ToMap(capnp::List<proto::Resource>::Reader list) {
  std::map<std::string, double> out;
  for (auto r : list) out[r.getName().cStr()] = r.getAmount();
  return out;
}

std::vector<uint32_t> ToVector(capnp::List<uint32_t>::Reader list) {
  std::vector<uint32_t> out;
  for (uint32_t v : list) out.push_back(v);
  return out;
}

// The id, or an error reply: the edge validates what it receives.
NodeId IdOrThrow(capnp::Data::Reader data) {
  auto id = NodeId::FromBinary(
      std::string_view(reinterpret_cast<const char*>(data.begin()), data.size()));
  if (!id.ok()) throw ToKjException(id.status().WithContext("nodeId"));
  return *id;
}

}  // namespace

std::vector<RecordedNode> FakeHeadState::Registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}
std::vector<RecordedHeartbeat> FakeHeadState::Heartbeats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return heartbeats_;
}
std::vector<NodeId> FakeHeadState::Unregistrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unregistrations_;
}
size_t FakeHeadState::NumRegistrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_.size();
}
size_t FakeHeadState::NumRegisterCalls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return register_calls_;
}
size_t FakeHeadState::NumKnownHeartbeats(const NodeId& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const RecordedHeartbeat& h : heartbeats_) n += (h.id == id && h.known) ? 1 : 0;
  return n;
}
size_t FakeHeadState::NumUnknownHeartbeats() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const RecordedHeartbeat& h : heartbeats_) n += h.known ? 0 : 1;
  return n;
}
void FakeHeadState::ForgetAll() {
  std::lock_guard<std::mutex> lock(mu_);
  known_.clear();
}
void FakeHeadState::FinishJob(const JobId& job) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_jobs_.push_back(job);
}
void FakeHeadState::AddViewNode(ViewNode node) {
  std::lock_guard<std::mutex> lock(mu_);
  for (ViewNode& n : view_nodes_) {
    if (n.info.id == node.info.id) {
      n = std::move(node);
      return;
    }
  }
  view_nodes_.push_back(std::move(node));
}
size_t FakeHeadState::NumClusterViewCalls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cluster_view_calls_;
}
void FakeHeadState::SetHangRegister(bool hang) {
  std::lock_guard<std::mutex> lock(mu_);
  hang_register_ = hang;
}
void FakeHeadState::SetHangUnregister(bool hang) {
  std::lock_guard<std::mutex> lock(mu_);
  hang_unregister_ = hang;
}

void FakeHeadState::SetRefuseRegister(std::string why) {
  std::lock_guard<std::mutex> lock(mu_);
  refuse_register_ = std::move(why);
}

kj::Promise<void> FakeHead::registerNode(RegisterNodeContext context) {
  auto info = context.getParams().getInfo();
  RecordedNode node;
  node.id = IdOrThrow(info.getNodeId());
  node.address = info.getAddress();
  node.node_port = info.getNodePort();
  node.transfer_port = info.getTransferPort();
  node.store_socket = info.getStoreSocket();
  node.total = ToMap(info.getTotal());
  for (auto label : info.getLabels()) node.labels[label.getKey()] = label.getValue();
  node.gpu_ids = ToVector(info.getGpuIds());
  node.temp_dir = info.getTempDir();
  node.pid = info.getPid();
  std::lock_guard<std::mutex> lock(state_->mu_);
  state_->register_calls_++;
  if (state_->hang_register_) return kj::NEVER_DONE;
  if (!state_->refuse_register_.empty()) {
    return ToKjException(FailedPrecondition(state_->refuse_register_));
  }
  state_->known_[node.id] = true;
  state_->registrations_.push_back(std::move(node));
  context.getResults().setHeartbeatIntervalMs(state_->heartbeat_interval_ms);
  context.getResults().setNodeTimeoutMs(state_->node_timeout_ms);
  return kj::READY_NOW;
}

kj::Promise<void> FakeHead::heartbeat(HeartbeatContext context) {
  auto params = context.getParams();
  RecordedHeartbeat beat;
  beat.id = IdOrThrow(params.getNodeId());
  beat.available = ToMap(params.getAvailable());
  beat.gpu_ids_in_use = ToVector(params.getGpuIdsInUse());
  beat.quarantined_gpu_ids = ToVector(params.getQuarantinedGpuIds());
  beat.jobs_seen = params.getJobsSeen();
  std::lock_guard<std::mutex> lock(state_->mu_);
  beat.known = state_->known_.count(beat.id) > 0;
  auto results = context.getResults();
  results.setKnown(beat.known);
  const std::vector<JobId>& finished = state_->finished_jobs_;
  size_t from = beat.jobs_seen > finished.size() ? 0 : static_cast<size_t>(beat.jobs_seen);
  auto jobs = results.initFinishedJobs(finished.size() - from);
  for (size_t i = from; i < finished.size(); ++i) {
    jobs.set(i - from, capnp::Data::Reader(finished[i].data(), JobId::kSize));
  }
  results.setFinishedSeq(finished.size());
  state_->heartbeats_.push_back(std::move(beat));
  return kj::READY_NOW;
}

kj::Promise<void> FakeHead::unregisterNode(UnregisterNodeContext context) {
  NodeId id = IdOrThrow(context.getParams().getNodeId());
  std::lock_guard<std::mutex> lock(state_->mu_);
  if (state_->hang_unregister_) return kj::NEVER_DONE;
  state_->known_.erase(id);
  state_->unregistrations_.push_back(id);
  return kj::READY_NOW;
}

namespace {

void FillResources(const std::map<std::string, double>& from,
                   capnp::List<proto::Resource>::Builder to) {
  size_t j = 0;
  for (const auto& [name, amount] : from) {
    to[j].setName(name);
    to[j++].setAmount(amount);
  }
}

void FillViewNode(const ViewNode& node, proto::NodeStatus::Builder out) {
  const RecordedNode& r = node.info;
  auto info = out.initInfo();
  info.setNodeId(capnp::Data::Reader(r.id.data(), NodeId::kSize));
  info.setAddress(r.address);
  info.setNodePort(r.node_port);
  info.setTransferPort(r.transfer_port);
  FillResources(r.total, info.initTotal(r.total.size()));
  auto labels = info.initLabels(r.labels.size());
  size_t j = 0;
  for (const auto& [key, value] : r.labels) {
    labels[j].setKey(key);
    labels[j++].setValue(value);
  }
  auto gpus = info.initGpuIds(r.gpu_ids.size());
  for (size_t i = 0; i < r.gpu_ids.size(); ++i) gpus.set(i, r.gpu_ids[i]);
  FillResources(node.available, out.initAvailable(node.available.size()));
  out.setAlive(node.alive);
}

}  // namespace

kj::Promise<void> FakeHead::clusterView(ClusterViewContext context) {
  std::lock_guard<std::mutex> lock(state_->mu_);
  state_->cluster_view_calls_++;
  // Registered nodes, each once (its last registration), in registration order.
  std::vector<ViewNode> view;
  for (const RecordedNode& r : state_->registrations_) {
    ViewNode node{r, r.total, state_->known_.count(r.id) > 0};
    for (const RecordedHeartbeat& h : state_->heartbeats_) {
      if (h.id == r.id) node.available = h.available;
    }
    bool replaced = false;
    for (ViewNode& v : view) {
      if (v.info.id == r.id) {
        v = node;
        replaced = true;
      }
    }
    if (!replaced) view.push_back(std::move(node));
  }
  view.insert(view.end(), state_->view_nodes_.begin(), state_->view_nodes_.end());
  auto nodes = context.getResults().initNodes(view.size());
  for (size_t i = 0; i < view.size(); ++i) FillViewNode(view[i], nodes[i]);
  return kj::READY_NOW;
}

FakeHeadThread::FakeHeadThread(std::shared_ptr<FakeHeadState> state, uint16_t port)
    : server_([state] { return capnp::Capability::Client(kj::heap<FakeHead>(state)); }, port) {}

uint16_t UnusedPort() {
  auto state = std::make_shared<FakeHeadState>();
  FakeHeadThread probe(state, 0);
  return probe.port();
}

}  // namespace airt::testing
