#include <string>

#include "common/logging.h"
#include "common/rpc_status.h"
#include "head/head.h"
#include "head/internal/job_table.h"
#include "head/internal/kv_table.h"
#include "head/internal/node_table.h"
#include "head/internal/wire.h"

namespace airt::head {
namespace {

using internal::kMaxAddressBytes;
using internal::kMaxKvKeyBytes;
using internal::kMaxKvValueBytes;
using internal::kMaxNameBytes;
using internal::ParseText;

kj::Promise<void> Fail(const Status& status) { return ToKjException(status); }

capnp::Data::Reader AsData(const std::string& s) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

Result<std::string> ParseNamespace(capnp::Text::Reader text) {
  return ParseText(text, "namespace", kMaxNameBytes, /*allow_empty=*/true);
}

Result<std::string> ParseKey(capnp::Text::Reader text) {
  return ParseText(text, "key", kMaxKvKeyBytes, /*allow_empty=*/false);
}

}  // namespace

Result<kj::Own<HeadServer>> HeadServer::Open(const HeadOptions& options, MetadataStore& store,
                                             Clock& clock) {
  auto server = kj::heap<HeadServer>(Token{}, options, store, clock);
  AIRT_RETURN_IF_ERROR(server->nodes_->Load().WithContext("loading the node table"));
  AIRT_RETURN_IF_ERROR(server->jobs_->Load().WithContext("loading the job table"));
  return kj::Own<HeadServer>(kj::mv(server));
}

HeadServer::HeadServer(Token, const HeadOptions& options, MetadataStore& store, Clock& clock)
    : options_(options),
      nodes_(std::make_unique<internal::NodeTable>(
          internal::NodeTable::Options{options.node_timeout_ms, options.max_dead_nodes}, store,
          clock)),
      kv_(std::make_unique<internal::KvTable>(store)),
      jobs_(std::make_unique<internal::JobTable>(store, clock)) {}

HeadServer::~HeadServer() = default;

std::vector<NodeId> HeadServer::CheckLiveness() { return nodes_->CheckLiveness(); }

kj::Promise<void> HeadServer::WatchLiveness(kj::Timer& timer, kj::Duration interval) {
  return timer.afterDelay(interval).then([this, &timer, interval] {
    CheckLiveness();
    return WatchLiveness(timer, interval);
  });
}

// ---- nodes ------------------------------------------------------------------------------------

kj::Promise<void> HeadServer::registerNode(RegisterNodeContext context) {
  Result<internal::NodeInfo> info = internal::ParseNodeInfo(context.getParams().getInfo(), "info");
  if (!info.ok()) return Fail(info.status());
  if (Status s = nodes_->Register(std::move(*info)); !s.ok()) return Fail(s);
  auto results = context.getResults();
  results.setHeartbeatIntervalMs(options_.heartbeat_interval_ms);
  results.setNodeTimeoutMs(options_.node_timeout_ms);
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::heartbeat(HeartbeatContext context) {
  auto params = context.getParams();
  Result<NodeId> id = internal::ParseNodeId(params.getNodeId(), "nodeId");
  if (!id.ok()) return Fail(id.status());
  Result<internal::NodeLoad> load = internal::ParseNodeLoad(params);
  if (!load.ok()) return Fail(load.status());
  Result<bool> known = nodes_->Heartbeat(*id, std::move(*load));
  if (!known.ok()) return Fail(known.status());
  context.getResults().setKnown(*known);
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::unregisterNode(UnregisterNodeContext context) {
  Result<NodeId> id = internal::ParseNodeId(context.getParams().getNodeId(), "nodeId");
  if (!id.ok()) return Fail(id.status());
  if (Status s = nodes_->Unregister(*id); !s.ok()) return Fail(s);
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::clusterView(ClusterViewContext context) {
  nodes_->CheckLiveness();
  std::vector<internal::NodeView> view = nodes_->View();
  auto nodes = context.getResults().initNodes(view.size());
  for (size_t i = 0; i < view.size(); ++i) internal::FillNodeStatus(view[i], nodes[i]);
  return kj::READY_NOW;
}

// ---- KV ---------------------------------------------------------------------------------------

kj::Promise<void> HeadServer::kvPut(KvPutContext context) {
  auto params = context.getParams();
  Result<std::string> ns = ParseNamespace(params.getNamespace());
  if (!ns.ok()) return Fail(ns.status());
  Result<std::string> key = ParseKey(params.getKey());
  if (!key.ok()) return Fail(key.status());
  capnp::Data::Reader value = params.getValue();
  if (value.size() > kMaxKvValueBytes) {
    return Fail(InvalidArgument("value is " + std::to_string(value.size()) +
                                " bytes, more than the " + std::to_string(kMaxKvValueBytes) +
                                " allowed"));
  }
  Result<bool> added = kv_->Put(
      *ns, *key, std::string_view(reinterpret_cast<const char*>(value.begin()), value.size()),
      params.getOverwrite());
  if (!added.ok()) return Fail(added.status());
  context.getResults().setAdded(*added);
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::kvGet(KvGetContext context) {
  auto params = context.getParams();
  Result<std::string> ns = ParseNamespace(params.getNamespace());
  if (!ns.ok()) return Fail(ns.status());
  Result<std::string> key = ParseKey(params.getKey());
  if (!key.ok()) return Fail(key.status());
  Result<std::optional<std::string>> value = kv_->Get(*ns, *key);
  if (!value.ok()) return Fail(value.status());
  auto results = context.getResults();
  results.setFound(value->has_value());
  if (value->has_value()) results.setValue(AsData(**value));
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::kvDelete(KvDeleteContext context) {
  auto params = context.getParams();
  Result<std::string> ns = ParseNamespace(params.getNamespace());
  if (!ns.ok()) return Fail(ns.status());
  Result<std::string> key = ParseKey(params.getKey());
  if (!key.ok()) return Fail(key.status());
  Result<bool> deleted = kv_->Delete(*ns, *key);
  if (!deleted.ok()) return Fail(deleted.status());
  context.getResults().setDeleted(*deleted);
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::kvKeys(KvKeysContext context) {
  auto params = context.getParams();
  Result<std::string> ns = ParseNamespace(params.getNamespace());
  if (!ns.ok()) return Fail(ns.status());
  Result<std::string> prefix =
      ParseText(params.getPrefix(), "prefix", kMaxKvKeyBytes, /*allow_empty=*/true);
  if (!prefix.ok()) return Fail(prefix.status());
  Result<std::vector<std::string>> keys = kv_->Keys(*ns, *prefix);
  if (!keys.ok()) return Fail(keys.status());
  auto out = context.getResults().initKeys(keys->size());
  for (size_t i = 0; i < keys->size(); ++i) {
    out.set(i, capnp::Text::Reader((*keys)[i].data(), (*keys)[i].size()));
  }
  return kj::READY_NOW;
}

// ---- jobs -------------------------------------------------------------------------------------

kj::Promise<void> HeadServer::registerJob(RegisterJobContext context) {
  auto params = context.getParams();
  Result<std::string> address =
      ParseText(params.getDriverAddress(), "driverAddress", kMaxAddressBytes, /*allow_empty=*/true);
  if (!address.ok()) return Fail(address.status());
  Result<JobId> id = jobs_->Register(params.getDriverPid(), std::move(*address));
  if (!id.ok()) return Fail(id.status());
  context.getResults().setJobId(capnp::Data::Reader(id->data(), JobId::kSize));
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::finishJob(FinishJobContext context) {
  Result<JobId> id = internal::ParseJobId(context.getParams().getJobId(), "jobId");
  if (!id.ok()) return Fail(id.status());
  if (Status s = jobs_->Finish(*id); !s.ok()) return Fail(s);
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::listJobs(ListJobsContext context) {
  std::vector<internal::JobRecord> jobs = jobs_->List();
  auto out = context.getResults().initJobs(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) internal::FillJobInfo(jobs[i], out[i]);
  return kj::READY_NOW;
}

}  // namespace airt::head
