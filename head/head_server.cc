#include <optional>
#include <set>
#include <string>
#include <variant>

#include "common/logging.h"
#include "common/rpc_status.h"
#include "head/head.h"
#include "head/internal/actor_placement.h"
#include "head/internal/actor_table.h"
#include "head/internal/cluster_feed.h"
#include "head/internal/demand.h"
#include "head/internal/job_table.h"
#include "head/internal/kv_table.h"
#include "head/internal/node_table.h"
#include "head/internal/placement_group_manager.h"
#include "head/internal/wire.h"

namespace airt::head {
namespace {

using internal::kMaxAddressBytes;
using internal::kMaxDeathCauseBytes;
using internal::kMaxKvKeyBytes;
using internal::kMaxKvValueBytes;
using internal::kMaxNameBytes;
using internal::ParseText;

kj::Promise<void> Fail(const Status& status) { return ToKjException(status); }

// Answers the call once `committed` resolved: the Status as an exception, or `fill` on ok.
template <typename Fill>
kj::Promise<void> Answer(kj::Promise<Status> committed, Fill fill) {
  return committed.then([fill = kj::mv(fill)](Status s) mutable -> kj::Promise<void> {
    if (!s.ok()) return Fail(s);
    fill();
    return kj::READY_NOW;
  });
}

kj::Promise<void> Answer(kj::Promise<Status> committed) {
  return Answer(kj::mv(committed), [] {});
}

capnp::Data::Reader AsData(const std::string& s) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

Result<std::string> ParseNamespace(capnp::Text::Reader text) {
  return ParseText(text, "namespace", kMaxNameBytes, /*allow_empty=*/true);
}

Result<std::string> ParseKey(capnp::Text::Reader text) {
  return ParseText(text, "key", kMaxKvKeyBytes, /*allow_empty=*/false);
}

constexpr std::string_view kDefaultKillCause = "the actor was killed";

}  // namespace

// Held by a driver for as long as its job runs; dropped when the driver lets go of it or its
// connection closes. Confined to the head's loop thread, like the server it reaches through
// `head`, which is null once that server is gone (then dropping it does nothing).
class HeadServer::JobLeaseServer final : public proto::JobLease::Server {
 public:
  JobLeaseServer(std::shared_ptr<HeadServer*> head, const JobId& job)
      : head_(std::move(head)), job_(job) {}
  ~JobLeaseServer() {
    HeadServer* head = *head_;
    if (head == nullptr) return;
    std::optional<internal::JobRecord> job = head->jobs_->Find(job_);
    if (!job || !job->alive) return;
    AIRT_LOG(INFO) << "the driver of job " << job_.Hex() << " (pid " << job->driver_pid
                   << ") let go of its job lease or disconnected; finishing the job";
    head->FinishJobOfLostDriver(job_);
  }

 private:
  std::shared_ptr<HeadServer*> head_;
  JobId job_;
};

Result<kj::Own<HeadServer>> HeadServer::Open(const HeadOptions& options, MetadataStore& store,
                                             Clock& clock, internal::NodeConnector* nodes) {
  auto server = kj::heap<HeadServer>(Token{}, options, store, clock, nodes);
  AIRT_RETURN_IF_ERROR(server->nodes_->Load().WithContext("loading the node table"));
  AIRT_RETURN_IF_ERROR(server->kv_->Load().WithContext("loading the KV"));
  AIRT_RETURN_IF_ERROR(server->jobs_->Load().WithContext("loading the job table"));
  AIRT_RETURN_IF_ERROR(server->actors_->Load().WithContext("loading the actor directory"));
  AIRT_RETURN_IF_ERROR(server->groups_->Load().WithContext("loading the placement groups"));
  AIRT_RETURN_IF_ERROR(
      server->LoadResourceRequest().WithContext("loading the request_resources call"));
  server->ClusterMayHaveChanged();
  server->WatchActors();
  return kj::Own<HeadServer>(kj::mv(server));
}

HeadServer::HeadServer(Token, const HeadOptions& options, MetadataStore& store, Clock& clock,
                       internal::NodeConnector* nodes)
    : options_(options),
      clock_(clock),
      nodes_(std::make_unique<internal::NodeTable>(
          internal::NodeTable::Options{options.node_timeout_ms, options.max_dead_nodes,
                                       options.node_disconnect_grace_ms},
          store,
          clock)),
      kv_(std::make_unique<internal::KvTable>(store)),
      jobs_(std::make_unique<internal::JobTable>(store, clock)),
      actors_(std::make_unique<internal::ActorTable>(
          internal::ActorTable::Options{options.max_dead_actors}, store, *jobs_)),
      groups_(std::make_unique<internal::PlacementGroupManager>(
          store, clock, *nodes_, *actors_, *jobs_, nodes,
          [this](std::function<Result<internal::Change>()> stage) {
            return Commit(std::move(stage));
          })),
      node_connector_(nodes),
      requested_(std::make_unique<internal::ResourceRequest>()),
      last_demand_(std::make_unique<internal::DemandRecord>()),
      feed_(std::make_unique<internal::ClusterFeed>(internal::NewFeedEpoch())),
      store_(store),
      self_(std::make_shared<HeadServer*>(this)) {
  groups_->SetNodeTypes([this] { return NodeTypes(); });
}

HeadServer::~HeadServer() { *self_ = nullptr; }

void HeadServer::TaskErrors::taskFailed(kj::Exception&& exception) {
  AIRT_LOG(ERROR) << "a metadata write failed: " << exception.getDescription().cStr();
}

struct HeadServer::PendingCommit {
  std::function<Result<internal::Change>()> stage;
  kj::Own<kj::PromiseFulfiller<Status>> done;
};

kj::Promise<Status> HeadServer::Commit(std::function<Result<internal::Change>()> stage) {
  auto paf = kj::newPromiseAndFulfiller<Status>();
  commits_.push_back({std::move(stage), kj::mv(paf.fulfiller)});
  RunCommits();
  return kj::mv(paf.promise);
}

void HeadServer::RunCommits() {
  while (!writing_ && !commits_.empty()) {
    PendingCommit next = std::move(commits_.front());
    commits_.pop_front();
    if (!next.done->isWaiting()) continue;  // its caller went away before its turn
    Result<internal::Change> change = next.stage();
    if (!change.ok()) {
      next.done->fulfill(change.status());
      continue;
    }
    if (change->rows.empty()) {
      change->Apply();
      ClusterMayHaveChanged();
      next.done->fulfill(Status::Ok());
      continue;
    }
    writing_ = true;
    WriteBatch rows = std::move(change->rows);
    tasks_.add(
        store_.Write(std::move(rows))
            .catch_([](kj::Exception&& e) { return Status(Internal(e.getDescription().cStr())); })
            .then([this, change = std::move(*change),
                   done = kj::mv(next.done)](Status written) mutable {
              if (written.ok()) {
                change.Apply();
                ClusterMayHaveChanged();
              } else {
                written = written.WithContext(change.what);
                AIRT_LOG(WARNING) << written.ToString() << "; nothing changed";
              }
              done->fulfill(std::move(written));
              writing_ = false;
              RunCommits();
            }));
  }
}

kj::Promise<std::vector<NodeId>> HeadServer::CheckLiveness() {
  for (const JobId& job : std::vector<JobId>(lost_drivers_.begin(), lost_drivers_.end())) {
    lost_drivers_.erase(job);
    FinishJobOfLostDriver(job);
  }
  feed_->Expire(clock_.MonotonicMs());
  auto died = std::make_shared<std::vector<NodeId>>();
  return Commit([this, died]() -> Result<internal::Change> {
           internal::Staged<std::vector<NodeId>> staged = nodes_->CheckLiveness();
           *died = std::move(staged.value);
           return std::move(staged.change);
         })
      .then([this, died](Status s) {
        DemandMayHaveChanged();
        if (!s.ok()) return std::vector<NodeId>();
        if (!died->empty()) groups_->OnNodesMayHaveDied();
        // The actors on nodes now dead, and restarts that waited for a node.
        if (!died->empty() || restarts_waiting_) WatchActors();
        return std::move(*died);
      });
}

kj::Promise<void> HeadServer::WatchLiveness(kj::Timer& timer, kj::Duration interval) {
  return timer.afterDelay(interval)
      .then([this] { return CheckLiveness(); })
      .then(
          [this, &timer, interval](std::vector<NodeId>) { return WatchLiveness(timer, interval); });
}

// ---- nodes ------------------------------------------------------------------------------------

kj::Promise<void> HeadServer::registerNode(RegisterNodeContext context) {
  auto params = context.getParams();
  Result<internal::NodeInfo> info = internal::ParseNodeInfo(params.getInfo(), "info");
  if (!info.ok()) return Fail(info.status());
  NodeId id = info->id;
  Result<std::vector<std::pair<PlacementGroupId, std::vector<uint32_t>>>> held =
      internal::ParseHeldBundles(params.getHeldBundles());
  if (!held.ok()) return Fail(held.status());
  return Answer(Commit([this, info = std::move(*info)]() -> Result<internal::Change> {
                  return nodes_->Register(info);
                }),
                [this, context, id, held = std::move(*held)]() mutable {
                  groups_->OnNodeRegistered(id, held);
                  groups_->OnNodeReport(id);
                  DemandMayHaveChanged();
                  auto results = context.getResults();
                  results.setHeartbeatIntervalMs(options_.heartbeat_interval_ms);
                  results.setNodeTimeoutMs(options_.node_timeout_ms);
                  if (context.getParams().hasSession()) {
                    WatchSession(id, context.getParams().getSession());
                  }
                });
}

void HeadServer::WatchSession(const NodeId& id, proto::NodeSession::Client session) {
  uint64_t generation = ++session_generation_;
  sessions_[id] = generation;
  session_watches_.add(session.holdRequest().send().ignoreResult().then(
      [] {},
      [this, id, generation](kj::Exception&&) {
        auto current = sessions_.find(id);
        if (current == sessions_.end() || current->second != generation) return;
        sessions_.erase(current);
        nodes_->Disconnected(id);
      }));
}

kj::Promise<void> HeadServer::heartbeat(HeartbeatContext context) {
  auto params = context.getParams();
  Result<NodeId> id = internal::ParseNodeId(params.getNodeId(), "nodeId");
  if (!id.ok()) return Fail(id.status());
  Result<internal::NodeLoad> load = internal::ParseNodeLoad(params);
  if (!load.ok()) return Fail(load.status());
  bool has_queue = !load->queued.empty();
  Result<bool> known = nodes_->Heartbeat(*id, std::move(*load));
  if (!known.ok()) return Fail(known.status());
  if (*known) {
    groups_->OnNodeReport(*id);
    NodeMayHaveChanged(*id);
  }
  // Only a node that reports a queue, or reported one last time, can change the demand.
  if (has_queue || nodes_with_queue_.count(*id) > 0) {
    if (has_queue) {
      nodes_with_queue_.insert(*id);
    } else {
      nodes_with_queue_.erase(*id);
    }
    DemandMayHaveChanged();
  }
  internal::FinishedJobs finished = jobs_->FinishedSince(params.getJobsSeen());
  auto results = context.getResults();
  results.setKnown(*known);
  auto jobs = results.initFinishedJobs(finished.jobs.size());
  for (size_t i = 0; i < finished.jobs.size(); ++i) {
    jobs.set(i, capnp::Data::Reader(finished.jobs[i].data(), JobId::kSize));
  }
  results.setFinishedSeq(finished.seq);
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::unregisterNode(UnregisterNodeContext context) {
  Result<NodeId> id = internal::ParseNodeId(context.getParams().getNodeId(), "nodeId");
  if (!id.ok()) return Fail(id.status());
  sessions_.erase(*id);  // its connection dropping next is no news
  return Answer(Commit([this, id = *id] { return nodes_->Unregister(id); }), [this] {
    groups_->OnNodesMayHaveDied();
    DemandMayHaveChanged();
  });
}

kj::Promise<void> HeadServer::clusterView(ClusterViewContext context) {
  std::vector<internal::NodeView> view = groups_->WithBundleResources(nodes_->View());
  auto nodes = context.getResults().initNodes(view.size());
  for (size_t i = 0; i < view.size(); ++i) internal::FillNodeStatus(view[i], nodes[i]);
  const std::vector<internal::NodeInfo>& types = NodeTypes();
  auto out = context.getResults().initNodeTypes(types.size());
  for (size_t i = 0; i < types.size(); ++i) internal::FillNodeInfo(types[i], out[i]);
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
  auto added = std::make_shared<bool>(false);
  return Answer(
      Commit([this, ns = std::move(*ns), key = std::move(*key),
              bytes = std::string(reinterpret_cast<const char*>(value.begin()), value.size()),
              overwrite = params.getOverwrite(), added]() -> Result<internal::Change> {
        internal::Staged<bool> staged = kv_->Put(ns, key, bytes, overwrite);
        *added = staged.value;
        return std::move(staged.change);
      }),
      [context, added]() mutable { context.getResults().setAdded(*added); });
}

kj::Promise<void> HeadServer::kvGet(KvGetContext context) {
  auto params = context.getParams();
  Result<std::string> ns = ParseNamespace(params.getNamespace());
  if (!ns.ok()) return Fail(ns.status());
  Result<std::string> key = ParseKey(params.getKey());
  if (!key.ok()) return Fail(key.status());
  std::optional<std::string> value = kv_->Get(*ns, *key);
  auto results = context.getResults();
  results.setFound(value.has_value());
  if (value.has_value()) results.setValue(AsData(*value));
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::kvDelete(KvDeleteContext context) {
  auto params = context.getParams();
  Result<std::string> ns = ParseNamespace(params.getNamespace());
  if (!ns.ok()) return Fail(ns.status());
  Result<std::string> key = ParseKey(params.getKey());
  if (!key.ok()) return Fail(key.status());
  auto deleted = std::make_shared<bool>(false);
  return Answer(Commit([this, ns = std::move(*ns), key = std::move(*key),
                        deleted]() -> Result<internal::Change> {
                  internal::Staged<bool> staged = kv_->Delete(ns, key);
                  *deleted = staged.value;
                  return std::move(staged.change);
                }),
                [context, deleted]() mutable { context.getResults().setDeleted(*deleted); });
}

kj::Promise<void> HeadServer::kvKeys(KvKeysContext context) {
  auto params = context.getParams();
  Result<std::string> ns = ParseNamespace(params.getNamespace());
  if (!ns.ok()) return Fail(ns.status());
  Result<std::string> prefix =
      ParseText(params.getPrefix(), "prefix", kMaxKvKeyBytes, /*allow_empty=*/true);
  if (!prefix.ok()) return Fail(prefix.status());
  std::vector<std::string> keys = kv_->Keys(*ns, *prefix);
  auto out = context.getResults().initKeys(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out.set(i, capnp::Text::Reader(keys[i].data(), keys[i].size()));
  }
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::kvDeletePrefix(KvDeletePrefixContext context) {
  auto params = context.getParams();
  Result<std::string> ns = ParseNamespace(params.getNamespace());
  if (!ns.ok()) return Fail(ns.status());
  Result<std::string> prefix =
      ParseText(params.getPrefix(), "prefix", kMaxKvKeyBytes, /*allow_empty=*/false);
  if (!prefix.ok()) return Fail(prefix.status());
  auto deleted = std::make_shared<uint32_t>(0);
  return Answer(Commit([this, ns = std::move(*ns), prefix = std::move(*prefix),
                        deleted]() -> Result<internal::Change> {
                  internal::Staged<uint32_t> staged = kv_->DeletePrefix(ns, prefix);
                  *deleted = staged.value;
                  return std::move(staged.change);
                }),
                [context, deleted]() mutable { context.getResults().setDeleted(*deleted); });
}

// ---- jobs -------------------------------------------------------------------------------------

kj::Promise<void> HeadServer::registerJob(RegisterJobContext context) {
  auto params = context.getParams();
  Result<std::string> address =
      ParseText(params.getDriverAddress(), "driverAddress", kMaxAddressBytes, /*allow_empty=*/true);
  if (!address.ok()) return Fail(address.status());
  Result<std::string> code = ParseText(params.getCodeSearchPath(), "codeSearchPath",
                                       internal::kMaxCodeSearchPathBytes, /*allow_empty=*/true);
  if (!code.ok()) return Fail(code.status());
  Result<std::string> ns = ParseNamespace(params.getNamespace());
  if (!ns.ok()) return Fail(ns.status());
  auto id = std::make_shared<JobId>();
  return Answer(Commit([this, pid = params.getDriverPid(), address = std::move(*address),
                        code = std::move(*code), ns = std::move(*ns),
                        id]() -> Result<internal::Change> {
                  AIRT_ASSIGN_OR_RETURN(internal::Staged<JobId> staged,
                                        jobs_->Register(pid, address, code, ns));
                  *id = staged.value;
                  return std::move(staged.change);
                }),
                [this, context, id]() mutable {
                  auto results = context.getResults();
                  results.setJobId(capnp::Data::Reader(id->data(), JobId::kSize));
                  results.setLease(kj::heap<JobLeaseServer>(self_, *id));
                });
}

kj::Promise<void> HeadServer::finishJob(FinishJobContext context) {
  Result<JobId> id = internal::ParseJobId(context.getParams().getJobId(), "jobId");
  if (!id.ok()) return Fail(id.status());
  return Answer(FinishJob(*id));
}

kj::Promise<Status> HeadServer::FinishJob(const JobId& id) {
  auto dying = std::make_shared<std::vector<internal::ActorRecord>>();
  return Commit([this, id, dying]() -> Result<internal::Change> {
    AIRT_ASSIGN_OR_RETURN(internal::Change change, jobs_->Finish(id));
    if (change.rows.empty()) return change;  // finished already
    for (const internal::ActorRecord& actor : actors_->List()) {
      if (actor.job == id && !actor.detached && actor.state != internal::ActorState::kDead) {
        dying->push_back(actor);
      }
    }
    change.Add(actors_->OnJobFinished(id).change);
    return change;
  }).then([this, id, dying](Status s) {
    if (!s.ok()) return s;
    groups_->OnJobFinished(id);
    // Its actors that are not detached share its fate: their workers are stopped.
    for (const internal::ActorRecord& actor : *dying) ActorEnded(actor);
    WatchActors();  // its detached actors' restarts no longer wait for their owner
    return s;
  });
}

void HeadServer::FinishJobOfLostDriver(const JobId& id) {
  tasks_.add(FinishJob(id).then([this, id](Status s) {
    if (s.ok() || s.code() == Code::kNotFound) return;
    AIRT_LOG(WARNING) << s.ToString() << "; retried with the next liveness check";
    lost_drivers_.insert(id);
  }));
}

kj::Promise<void> HeadServer::listJobs(ListJobsContext context) {
  std::vector<internal::JobRecord> jobs = jobs_->List();
  auto out = context.getResults().initJobs(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) internal::FillJobInfo(jobs[i], out[i]);
  return kj::READY_NOW;
}

// ---- actors -----------------------------------------------------------------------------------

kj::Promise<void> HeadServer::registerActor(RegisterActorContext context) {
  Result<internal::ActorRecord> actor =
      internal::ParseActorInfo(context.getParams().getInfo(), "info");
  if (!actor.ok()) return Fail(actor.status());
  return Answer(Commit([this, actor = std::move(*actor)] { return actors_->Register(actor); }));
}

kj::Promise<void> HeadServer::updateActor(UpdateActorContext context) {
  Result<internal::ActorRecord> news =
      internal::ParseActorUpdate(context.getParams().getInfo(), "info");
  if (!news.ok()) return Fail(news.status());
  ActorId id = news->id;
  return Answer(Commit([this, news = std::move(*news)] { return actors_->Update(news); }),
                [this, id] {
                  // ALIVE with its creation task: the head watches its worker from now on.
                  if (std::optional<internal::ActorRecord> actor = actors_->Find(id)) {
                    LookAfter(*actor);
                  }
                });
}

kj::Promise<void> HeadServer::getActor(GetActorContext context) {
  auto params = context.getParams();
  std::optional<internal::ActorRecord> actor;
  if (params.getActorId().size() != 0) {
    Result<ActorId> id = internal::ParseActorId(params.getActorId(), "actorId");
    if (!id.ok()) return Fail(id.status());
    actor = actors_->Find(*id);
  } else {
    Result<std::string> ns = ParseNamespace(params.getNamespace());
    if (!ns.ok()) return Fail(ns.status());
    Result<std::string> name = ParseText(params.getName(), "name", kMaxNameBytes, true);
    if (!name.ok()) return Fail(name.status());
    if (name->empty())
      return Fail(InvalidArgument("name must not be empty when actorId is not set"));
    actor = actors_->FindNamed(*ns, *name);
  }
  auto results = context.getResults();
  results.setFound(actor.has_value());
  if (actor) {
    internal::FillActorInfo(*actor, results.initInfo());
    std::optional<internal::JobRecord> job = jobs_->Find(actor->job);
    results.setJobAlive(job.has_value() && job->alive);
  }
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::listActors(ListActorsContext context) {
  std::vector<internal::ActorRecord> actors = actors_->List();
  auto out = context.getResults().initActors(actors.size());
  for (size_t i = 0; i < actors.size(); ++i) internal::FillActorInfo(actors[i], out[i]);
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::killActor(KillActorContext context) {
  auto params = context.getParams();
  Result<ActorId> id = internal::ParseActorId(params.getActorId(), "actorId");
  if (!id.ok()) return Fail(id.status());
  Result<std::string> cause = ParseText(params.getCause(), "cause", kMaxDeathCauseBytes, true);
  if (!cause.ok()) return Fail(cause.status());
  if (cause->empty()) *cause = kDefaultKillCause;
  auto killed = std::make_shared<internal::ActorRecord>();
  return Answer(
      Commit([this, id = *id, cause = std::move(*cause), killed]() -> Result<internal::Change> {
        AIRT_ASSIGN_OR_RETURN(internal::Staged<internal::ActorRecord> staged,
                              actors_->Kill(id, cause));
        *killed = std::move(staged.value);
        return std::move(staged.change);
      }),
      [this, context, killed]() mutable {
        internal::FillActorInfo(*killed, context.getResults().initInfo());
        ActorEnded(*killed);
      });
}

kj::Promise<void> HeadServer::placeActor(PlaceActorContext context) {
  auto params = context.getParams();
  Result<ActorId> id = internal::ParseActorId(params.getActorId(), "actorId");
  if (!id.ok()) return Fail(id.status());
  auto avoid_list = params.getAvoidNodes();
  if (avoid_list.size() > internal::kMaxListEntries) {
    return Fail(InvalidArgument("avoidNodes has " + std::to_string(avoid_list.size()) +
                                " entries, more than the " +
                                std::to_string(internal::kMaxListEntries) + " allowed"));
  }
  std::set<NodeId> avoid;
  for (size_t i = 0; i < avoid_list.size(); ++i) {
    Result<NodeId> node =
        internal::ParseNodeId(avoid_list[i], "avoidNodes[" + std::to_string(i) + "]");
    if (!node.ok()) return Fail(node.status());
    avoid.insert(*node);
  }
  std::optional<internal::ActorRecord> actor = actors_->Find(*id);
  if (!actor) return Fail(NotFound("actor " + id->Hex() + " is not registered"));
  if (actor->state == internal::ActorState::kDead) {
    placing_since_.erase(*id);
    return Fail(FailedPrecondition("actor " + id->Hex() + " is DEAD (" + actor->death_cause +
                                   "); it is not placed again"));
  }

  ActorNodeChoice choice = ChooseActorNode(*actor, avoid);
  auto placement = context.getResults().initPlacement();
  if (choice.kind == ActorNodeChoice::Kind::kWait) {
    placement.setWaiting(choice.message);
    return kj::READY_NOW;
  }
  if (choice.kind == ActorNodeChoice::Kind::kCannot) {
    placement.setInfeasible(choice.message);
    return kj::READY_NOW;
  }
  NodeId node = choice.node;
  std::string address = choice.address;
  return Answer(Commit([this, id = *id, node] { return actors_->Place(id, node); }),
                [context, node, address]() mutable {
                  auto placed = context.getResults().getPlacement().initPlaced();
                  placed.setNodeId(capnp::Data::Reader(node.data(), NodeId::kSize));
                  placed.setNodeAddress(address);
                });
}

}  // namespace airt::head
