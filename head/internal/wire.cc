#include "head/internal/wire.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "common/strategy_wire.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"

namespace airt::head::internal {
namespace {

std::string Indexed(std::string_view field, size_t i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

std::string Join(std::string_view field, std::string_view member) {
  return std::string(field) + "." + std::string(member);
}

std::string FormatAmount(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

Status CheckListSize(size_t n, std::string_view field) {
  if (n > kMaxListEntries) {
    return InvalidArgument(std::string(field) + " has " + std::to_string(n) +
                           " entries, more than the " + std::to_string(kMaxListEntries) +
                           " allowed");
  }
  return Status::Ok();
}

template <typename Id>
Result<Id> ParseId(capnp::Data::Reader bytes, std::string_view field) {
  if (bytes.size() != Id::kSize) {
    return InvalidArgument(std::string(field) + " must be " + std::to_string(Id::kSize) +
                           " bytes, got " + std::to_string(bytes.size()));
  }
  return Id::FromRaw(bytes.begin());
}

capnp::Data::Reader AsData(const uint8_t* data, size_t n) { return capnp::Data::Reader(data, n); }

capnp::Text::Reader AsText(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }

std::string FlatBytes(capnp::MessageBuilder& message) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

// Decodes one row with `decode(reader)`; any failure, thrown or returned, is kInternal.
template <typename Row, typename Message, typename Decode>
Result<Row> DecodeRow(std::string_view bytes, std::string_view what, Decode&& decode) {
  auto corrupt = [&](const std::string& why) {
    return Internal("corrupt " + std::string(what) + " row in the metadata store: " + why);
  };
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return corrupt(std::to_string(bytes.size()) + " bytes is not a whole message");
  }
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  std::optional<Result<Row>> row;
  Status thrown = CatchKj([&] {
    capnp::FlatArrayMessageReader reader(words);
    row.emplace(decode(reader.getRoot<Message>()));
  });
  if (!thrown.ok()) return corrupt(thrown.message());
  if (!row->ok()) return corrupt(row->status().message());
  return std::move(*row);
}

}  // namespace

Result<NodeId> ParseNodeId(capnp::Data::Reader bytes, std::string_view field) {
  return ParseId<NodeId>(bytes, field);
}

Result<JobId> ParseJobId(capnp::Data::Reader bytes, std::string_view field) {
  return ParseId<JobId>(bytes, field);
}

Result<ActorId> ParseActorId(capnp::Data::Reader bytes, std::string_view field) {
  using Bytes = BaseId<ActorId::kSize, ActorIdTag>;  // FromRaw makes this, not an ActorId
  AIRT_ASSIGN_OR_RETURN(Bytes id, ParseId<Bytes>(bytes, field));
  return ActorId(id);
}

Result<std::string> ParseText(capnp::Text::Reader text, std::string_view field, size_t max_bytes,
                              bool allow_empty) {
  if (text.size() > max_bytes) {
    return InvalidArgument(std::string(field) + " is " + std::to_string(text.size()) +
                           " bytes, more than the " + std::to_string(max_bytes) + " allowed");
  }
  if (!allow_empty && text.size() == 0) {
    return InvalidArgument(std::string(field) + " must not be empty");
  }
  if (std::memchr(text.begin(), '\0', text.size()) != nullptr) {
    return InvalidArgument(std::string(field) + " must not contain a NUL byte");
  }
  return std::string(text.begin(), text.size());
}

Result<std::vector<Resource>> ParseResources(capnp::List<proto::Resource>::Reader list,
                                             std::string_view field) {
  AIRT_RETURN_IF_ERROR(CheckListSize(list.size(), field));
  std::vector<Resource> out;
  out.reserve(list.size());
  std::set<std::string, std::less<>> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = Indexed(field, i);
    AIRT_ASSIGN_OR_RETURN(std::string name,
                          ParseText(list[i].getName(), Join(at, "name"), kMaxNameBytes, false));
    double amount = list[i].getAmount();
    if (!std::isfinite(amount) || amount < 0) {
      return InvalidArgument(Join(at, "amount") + " (" + name + ") must be finite and >= 0, got " +
                             FormatAmount(amount));
    }
    if (!seen.insert(name).second) {
      return InvalidArgument(std::string(field) + " lists '" + name + "' twice");
    }
    out.push_back({std::move(name), amount});
  }
  return out;
}

Result<std::vector<uint32_t>> ParseGpuIds(capnp::List<uint32_t>::Reader list,
                                          std::string_view field) {
  AIRT_RETURN_IF_ERROR(CheckListSize(list.size(), field));
  std::vector<uint32_t> out;
  out.reserve(list.size());
  std::set<uint32_t> seen;
  for (uint32_t id : list) {
    if (!seen.insert(id).second) {
      return InvalidArgument(std::string(field) + " lists GPU " + std::to_string(id) + " twice");
    }
    out.push_back(id);
  }
  return out;
}

Result<NodeInfo> ParseNodeInfo(proto::NodeInfo::Reader in, std::string_view field) {
  NodeInfo info;
  AIRT_ASSIGN_OR_RETURN(info.id, ParseNodeId(in.getNodeId(), Join(field, "nodeId")));
  AIRT_ASSIGN_OR_RETURN(info.address, ParseText(in.getAddress(), Join(field, "address"),
                                                kMaxAddressBytes, /*allow_empty=*/false));
  info.node_port = in.getNodePort();
  info.transfer_port = in.getTransferPort();
  AIRT_ASSIGN_OR_RETURN(info.store_socket,
                        ParseText(in.getStoreSocket(), Join(field, "storeSocket"), kMaxPathBytes,
                                  /*allow_empty=*/true));
  AIRT_ASSIGN_OR_RETURN(info.total, ParseResources(in.getTotal(), Join(field, "total")));
  auto labels = in.getLabels();
  AIRT_RETURN_IF_ERROR(CheckListSize(labels.size(), Join(field, "labels")));
  std::set<std::string, std::less<>> keys;
  for (size_t i = 0; i < labels.size(); ++i) {
    std::string at = Indexed(Join(field, "labels"), i);
    Label label;
    AIRT_ASSIGN_OR_RETURN(label.key,
                          ParseText(labels[i].getKey(), Join(at, "key"), kMaxNameBytes, false));
    AIRT_ASSIGN_OR_RETURN(label.value, ParseText(labels[i].getValue(), Join(at, "value"),
                                                 kMaxLabelValueBytes, /*allow_empty=*/true));
    if (!keys.insert(label.key).second) {
      return InvalidArgument(Join(field, "labels") + " lists '" + label.key + "' twice");
    }
    info.labels.push_back(std::move(label));
  }
  AIRT_ASSIGN_OR_RETURN(info.gpu_ids, ParseGpuIds(in.getGpuIds(), Join(field, "gpuIds")));
  AIRT_ASSIGN_OR_RETURN(info.temp_dir, ParseText(in.getTempDir(), Join(field, "tempDir"),
                                                 kMaxPathBytes, /*allow_empty=*/true));
  info.pid = in.getPid();
  return info;
}

Result<NodeLoad> ParseNodeLoad(proto::Head::HeartbeatParams::Reader params) {
  NodeLoad load;
  AIRT_ASSIGN_OR_RETURN(load.available, ParseResources(params.getAvailable(), "available"));
  AIRT_ASSIGN_OR_RETURN(load.gpu_ids_in_use, ParseGpuIds(params.getGpuIdsInUse(), "gpuIdsInUse"));
  AIRT_ASSIGN_OR_RETURN(load.quarantined_gpu_ids,
                        ParseGpuIds(params.getQuarantinedGpuIds(), "quarantinedGpuIds"));
  AIRT_ASSIGN_OR_RETURN(load.queued, ParseShapeCounts(params.getQueued(), "queued"));
  load.num_leases = params.getNumLeases();
  load.num_primary_objects = params.getNumPrimaryObjects();
  load.store_free_bytes = params.getStoreFreeBytes();
  return load;
}

Result<std::vector<ShapeCount>> ParseShapeCounts(capnp::List<proto::ShapeCount>::Reader list,
                                                 std::string_view field) {
  AIRT_RETURN_IF_ERROR(CheckListSize(list.size(), field));
  std::vector<ShapeCount> shapes;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = Indexed(field, i);
    ShapeCount shape;
    AIRT_ASSIGN_OR_RETURN(shape.resources,
                          ParseResources(list[i].getResources(), Join(at, "resources")));
    AIRT_ASSIGN_OR_RETURN(shape.accelerator_type,
                          ParseText(list[i].getAcceleratorType(), Join(at, "acceleratorType"),
                                    kMaxLabelValueBytes, /*allow_empty=*/true));
    shape.count = list[i].getCount();
    if (shape.count == 0) return InvalidArgument(Join(at, "count") + " must be above 0");
    shapes.push_back(std::move(shape));
  }
  return shapes;
}


namespace {

// The fields of an actor that its owner's updates change; `out` keeps the rest.
Status ParseActorNews(proto::ActorInfo::Reader in, std::string_view field, ActorRecord& out) {
  auto state = static_cast<uint16_t>(in.getState());
  if (state > static_cast<uint16_t>(proto::ActorState::DEAD)) {
    return InvalidArgument(Join(field, "state") + " has the unknown value " +
                           std::to_string(state));
  }
  out.state = static_cast<ActorState>(state);
  AIRT_ASSIGN_OR_RETURN(out.worker_address,
                        ParseText(in.getWorkerAddress(), Join(field, "workerAddress"),
                                  kMaxAddressBytes, /*allow_empty=*/true));
  AIRT_ASSIGN_OR_RETURN(out.node_address, ParseText(in.getNodeAddress(), Join(field, "nodeAddress"),
                                                    kMaxAddressBytes, /*allow_empty=*/true));
  out.worker_id.reset();
  if (in.getWorkerId().size() != 0) {
    AIRT_ASSIGN_OR_RETURN(out.worker_id,
                          ParseId<WorkerId>(in.getWorkerId(), Join(field, "workerId")));
  }
  if (in.getPid() < 0) {
    return InvalidArgument(Join(field, "pid") + " must be >= 0, got " +
                           std::to_string(in.getPid()));
  }
  out.pid = in.getPid();
  out.num_restarts = in.getNumRestarts();
  if (in.getMaxRestarts() < -1) {
    return InvalidArgument(Join(field, "maxRestarts") +
                           " must be -1 (without limit) or >= 0, got " +
                           std::to_string(in.getMaxRestarts()));
  }
  out.max_restarts = in.getMaxRestarts();
  AIRT_ASSIGN_OR_RETURN(out.death_cause, ParseText(in.getDeathCause(), Join(field, "deathCause"),
                                                   kMaxDeathCauseBytes, /*allow_empty=*/true));
  if (in.getLanguage() > static_cast<uint8_t>(proto::Language::PYTHON)) {
    return InvalidArgument(Join(field, "language") + " has the unknown value " +
                           std::to_string(in.getLanguage()));
  }
  out.language = in.getLanguage();
  if (in.getCreationTask().size() > kMaxCreationTaskBytes) {
    return InvalidArgument(Join(field, "creationTask") + " has " +
                           std::to_string(in.getCreationTask().size()) + " bytes, more than the " +
                           std::to_string(kMaxCreationTaskBytes) + " allowed");
  }
  if (in.getCreationTask().size() % sizeof(capnp::word) != 0) {
    return InvalidArgument(Join(field, "creationTask") + " is not a whole Cap'n Proto message");
  }
  auto task = in.getCreationTask();
  out.creation_task.assign(reinterpret_cast<const char*>(task.begin()), task.size());
  return Status::Ok();
}

}  // namespace

Result<ActorRecord> ParseActorInfo(proto::ActorInfo::Reader in, std::string_view field) {
  ActorRecord actor;
  AIRT_ASSIGN_OR_RETURN(actor.id, ParseActorId(in.getActorId(), Join(field, "actorId")));
  AIRT_ASSIGN_OR_RETURN(actor.job, ParseJobId(in.getJobId(), Join(field, "jobId")));
  if (actor.id.Job() != actor.job) {
    return InvalidArgument(Join(field, "actorId") + " " + actor.id.Hex() + " does not end with " +
                           Join(field, "jobId") + " " + actor.job.Hex());
  }
  AIRT_ASSIGN_OR_RETURN(actor.name, ParseText(in.getName(), Join(field, "name"), kMaxNameBytes,
                                              /*allow_empty=*/true));
  AIRT_ASSIGN_OR_RETURN(actor.ns, ParseText(in.getNamespace(), Join(field, "namespace"),
                                            kMaxNameBytes, /*allow_empty=*/true));
  AIRT_ASSIGN_OR_RETURN(actor.class_name, ParseText(in.getClassName(), Join(field, "className"),
                                                    kMaxClassNameBytes, /*allow_empty=*/false));
  AIRT_RETURN_IF_ERROR(ParseActorNews(in, field, actor));
  actor.detached = in.getDetached();
  if (actor.detached && actor.name.empty()) {
    // As Ray: a detached actor outlives its creator, so only its name can find it again.
    return InvalidArgument(Join(field, "detached") + " is set but " + Join(field, "name") +
                           " is empty: a detached actor must be named");
  }
  if (in.getMaxTaskRetries() < -1) {
    return InvalidArgument(Join(field, "maxTaskRetries") +
                           " must be -1 (without limit) or >= 0, got " +
                           std::to_string(in.getMaxTaskRetries()));
  }
  actor.max_task_retries = in.getMaxTaskRetries();
  AIRT_ASSIGN_OR_RETURN(actor.resources,
                        ParseResources(in.getResources(), Join(field, "resources")));
  AIRT_ASSIGN_OR_RETURN(actor.accelerator_type,
                        ParseText(in.getAcceleratorType(), Join(field, "acceleratorType"),
                                  kMaxLabelValueBytes, /*allow_empty=*/true));
  if (in.getNodeId().size() != 0) {
    AIRT_ASSIGN_OR_RETURN(actor.node, ParseNodeId(in.getNodeId(), Join(field, "nodeId")));
  }
  if (in.hasStrategy()) {
    AIRT_ASSIGN_OR_RETURN(actor.strategy, ReadStrategy(in.getStrategy(), Join(field, "strategy")));
  }
  return actor;
}

Result<ActorRecord> ParseActorUpdate(proto::ActorInfo::Reader in, std::string_view field) {
  ActorRecord actor;
  AIRT_ASSIGN_OR_RETURN(actor.id, ParseActorId(in.getActorId(), Join(field, "actorId")));
  actor.job = actor.id.Job();
  AIRT_RETURN_IF_ERROR(ParseActorNews(in, field, actor));
  return actor;
}

const char* ActorStateName(ActorState state) {
  switch (state) {
    case ActorState::kPending: return "PENDING";
    case ActorState::kAlive: return "ALIVE";
    case ActorState::kRestarting: return "RESTARTING";
    case ActorState::kDead: return "DEAD";
  }
  return "UNKNOWN";
}

namespace {

void FillResources(const std::vector<Resource>& in, capnp::List<proto::Resource>::Builder out) {
  for (size_t i = 0; i < in.size(); ++i) {
    out[i].setName(AsText(in[i].name));
    out[i].setAmount(in[i].amount);
  }
}

void FillIds(const std::vector<uint32_t>& in, capnp::List<uint32_t>::Builder out) {
  for (size_t i = 0; i < in.size(); ++i) out.set(i, in[i]);
}

}  // namespace

void FillNodeInfo(const NodeInfo& info, proto::NodeInfo::Builder out) {
  out.setNodeId(AsData(info.id.data(), NodeId::kSize));
  out.setAddress(AsText(info.address));
  out.setNodePort(info.node_port);
  out.setTransferPort(info.transfer_port);
  out.setStoreSocket(AsText(info.store_socket));
  FillResources(info.total, out.initTotal(info.total.size()));
  auto labels = out.initLabels(info.labels.size());
  for (size_t i = 0; i < info.labels.size(); ++i) {
    labels[i].setKey(AsText(info.labels[i].key));
    labels[i].setValue(AsText(info.labels[i].value));
  }
  FillIds(info.gpu_ids, out.initGpuIds(info.gpu_ids.size()));
  out.setTempDir(AsText(info.temp_dir));
  out.setPid(info.pid);
}

void FillShapeCounts(const std::vector<ShapeCount>& shapes,
                     capnp::List<proto::ShapeCount>::Builder out) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    FillResources(shapes[i].resources, out[i].initResources(shapes[i].resources.size()));
    out[i].setAcceleratorType(AsText(shapes[i].accelerator_type));
    out[i].setCount(shapes[i].count);
  }
}

void FillNodeStatus(const NodeView& view, proto::NodeStatus::Builder out) {
  FillNodeInfo(view.info, out.initInfo());
  out.setAlive(view.alive);
  FillResources(view.load.available, out.initAvailable(view.load.available.size()));
  FillIds(view.load.gpu_ids_in_use, out.initGpuIdsInUse(view.load.gpu_ids_in_use.size()));
  FillIds(view.load.quarantined_gpu_ids,
          out.initQuarantinedGpuIds(view.load.quarantined_gpu_ids.size()));
  out.setMsSinceHeartbeat(view.ms_since_heartbeat);
  out.setDeathCause(AsText(view.death_cause));
  out.setDeathTimeMs(view.death_time_ms);
  FillShapeCounts(view.load.queued, out.initQueued(view.load.queued.size()));
  out.setNumLeases(view.load.num_leases);
  out.setDraining(view.draining);
  out.setDrainReason(AsText(view.drain_reason));
  out.setDrainDeadlineMs(view.drain_deadline_ms);
  out.setNumPrimaryObjects(view.load.num_primary_objects);
  out.setStoreFreeBytes(view.load.store_free_bytes);
}

void FillJobInfo(const JobRecord& job, proto::JobInfo::Builder out) {
  out.setJobId(AsData(job.id.data(), JobId::kSize));
  out.setDriverPid(job.driver_pid);
  out.setDriverAddress(AsText(job.driver_address));
  out.setCodeSearchPath(AsText(job.code_search_path));
  out.setNamespace(AsText(job.ns));
  out.setStartMs(job.start_ms);
  out.setEndMs(job.end_ms);
  out.setAlive(job.alive);
}

void FillActorInfo(const ActorRecord& actor, proto::ActorInfo::Builder out,
                   bool with_creation_task) {
  out.setActorId(AsData(actor.id.data(), ActorId::kSize));
  out.setJobId(AsData(actor.job.data(), JobId::kSize));
  out.setName(AsText(actor.name));
  out.setNamespace(AsText(actor.ns));
  out.setClassName(AsText(actor.class_name));
  out.setState(static_cast<proto::ActorState>(actor.state));
  out.setWorkerAddress(AsText(actor.worker_address));
  out.setNodeAddress(AsText(actor.node_address));
  if (actor.worker_id) out.setWorkerId(AsData(actor.worker_id->data(), WorkerId::kSize));
  out.setPid(actor.pid);
  out.setNumRestarts(actor.num_restarts);
  out.setMaxRestarts(actor.max_restarts);
  out.setDeathCause(AsText(actor.death_cause));
  out.setDetached(actor.detached);
  out.setLanguage(actor.language);
  out.setMaxTaskRetries(actor.max_task_retries);
  FillResources(actor.resources, out.initResources(actor.resources.size()));
  out.setAcceleratorType(AsText(actor.accelerator_type));
  if (actor.node) out.setNodeId(AsData(actor.node->data(), NodeId::kSize));
  WriteStrategy(actor.strategy, out.initStrategy());
  if (with_creation_task && !actor.creation_task.empty()) {
    out.setCreationTask(AsData(reinterpret_cast<const uint8_t*>(actor.creation_task.data()),
                               actor.creation_task.size()));
  }
}

std::string EncodeNodeRow(const NodeRow& node) {
  capnp::MallocMessageBuilder message;
  auto row = message.initRoot<proto::NodeStatus>();
  FillNodeInfo(node.info, row.initInfo());
  row.setAlive(node.alive);
  row.setDeathCause(AsText(node.death_cause));
  row.setDeathTimeMs(node.death_time_ms);
  if (node.drain_reason) {
    row.setDraining(true);
    row.setDrainReason(AsText(*node.drain_reason));
    row.setDrainDeadlineMs(node.drain_deadline_ms);
  }
  return FlatBytes(message);
}

Result<NodeRow> DecodeNodeRow(std::string_view bytes) {
  return DecodeRow<NodeRow, proto::NodeStatus>(
      bytes, "node", [](proto::NodeStatus::Reader row) -> Result<NodeRow> {
        AIRT_ASSIGN_OR_RETURN(NodeInfo info, ParseNodeInfo(row.getInfo(), "info"));
        AIRT_ASSIGN_OR_RETURN(std::string cause, ParseText(row.getDeathCause(), "deathCause",
                                                           kMaxDeathCauseBytes, true));
        NodeRow out{.info = std::move(info),
                    .alive = row.getAlive(),
                    .death_cause = std::move(cause),
                    .death_time_ms = row.getDeathTimeMs()};
        if (row.getDraining()) {
          AIRT_ASSIGN_OR_RETURN(std::string reason, ParseText(row.getDrainReason(), "drainReason",
                                                              kMaxDeathCauseBytes, true));
          out.drain_reason = std::move(reason);
          out.drain_deadline_ms = row.getDrainDeadlineMs();
        }
        return out;
      });
}

std::string EncodeJobRow(const JobRecord& job) {
  capnp::MallocMessageBuilder message;
  FillJobInfo(job, message.initRoot<proto::JobInfo>());
  return FlatBytes(message);
}

Result<JobRecord> DecodeJobRow(std::string_view bytes) {
  return DecodeRow<JobRecord, proto::JobInfo>(
      bytes, "job", [](proto::JobInfo::Reader row) -> Result<JobRecord> {
        JobRecord job;
        AIRT_ASSIGN_OR_RETURN(job.id, ParseJobId(row.getJobId(), "jobId"));
        job.driver_pid = row.getDriverPid();
        AIRT_ASSIGN_OR_RETURN(job.driver_address, ParseText(row.getDriverAddress(), "driverAddress",
                                                            kMaxAddressBytes, true));
        AIRT_ASSIGN_OR_RETURN(
            job.code_search_path,
            ParseText(row.getCodeSearchPath(), "codeSearchPath", kMaxCodeSearchPathBytes, true));
        AIRT_ASSIGN_OR_RETURN(job.ns,
                              ParseText(row.getNamespace(), "namespace", kMaxNameBytes, true));
        job.start_ms = row.getStartMs();
        job.end_ms = row.getEndMs();
        job.alive = row.getAlive();
        return job;
      });
}

std::string EncodeActorRow(const ActorRecord& actor) {
  capnp::MallocMessageBuilder message;
  FillActorInfo(actor, message.initRoot<proto::ActorInfo>(), /*with_creation_task=*/true);
  return FlatBytes(message);
}

Result<ActorRecord> DecodeActorRow(std::string_view bytes) {
  return DecodeRow<ActorRecord, proto::ActorInfo>(
      bytes, "actor", [](proto::ActorInfo::Reader row) { return ParseActorInfo(row, "info"); });
}

}  // namespace airt::head::internal
