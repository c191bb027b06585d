#include "collective/communicator.h"

#include <sstream>
#include <utility>

namespace airt::collective {
namespace {

// How long a rank that timed out waits for each other rank's progress.
constexpr std::chrono::milliseconds kProgressReadTimeout{5000};

std::string EncodeInfo(const RankInfo& r) {
  return r.node + "\n" + std::to_string(r.pid) + "\n" + r.progress_address;
}

Result<RankInfo> DecodeInfo(int rank, const std::string& text) {
  RankInfo r;
  r.rank = rank;
  std::istringstream in(text);
  std::string pid;
  if (!std::getline(in, r.node) || !std::getline(in, pid) ||
      !std::getline(in, r.progress_address)) {
    return Internal("rank " + std::to_string(rank) + "'s entry in the rendezvous is malformed");
  }
  r.pid = std::stoll(pid);
  return r;
}

}  // namespace

size_t ElementSize(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8: return 1;
    case DataType::kFloat16: return 2;
    case DataType::kInt32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kFloat64: return 8;
  }
  return 0;
}

const char* DataTypeName(DataType type) {
  switch (type) {
    case DataType::kInt8: return "int8";
    case DataType::kUint8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kFloat16: return "float16";
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
  }
  return "unknown";
}

const char* OpName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllreduce: return "allreduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kAllgather: return "allgather";
    case OpKind::kReducescatter: return "reducescatter";
    case OpKind::kReduce: return "reduce";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
    case OpKind::kBarrier: return "barrier";
  }
  return "operation";
}

Communicator::Communicator(GroupOptions options, CommunicatorServices services)
    : options_(std::move(options)), services_(std::move(services)) {}

Communicator::~Communicator() {
  if (services_.progress) services_.progress->Record(options_.group_name, std::nullopt);
}

Result<std::unique_ptr<Communicator>> Communicator::Create(const GroupOptions& options,
                                                           CommunicatorServices services) {
  const std::string& name = options.group_name;
  if (name.empty() || name.size() > 256) {
    return InvalidArgument("a collective group's name must have 1 to 256 characters");
  }
  if (options.world_size < 1) {
    return InvalidArgument("collective group '" + name + "': world_size " +
                           std::to_string(options.world_size) + " is not positive");
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("collective group '" + name + "': rank " +
                           std::to_string(options.rank) + " is outside [0, " +
                           std::to_string(options.world_size) + ")");
  }
  if (options.timeout_ms <= 0) {
    return InvalidArgument("collective group '" + name + "': timeout_ms " +
                           std::to_string(options.timeout_ms) + " is not positive");
  }
  if (!services.kv || !services.progress) return Internal("communicator services missing");
  if (!services.backend) {
    if (options.backend == "gloo") {
      services.backend = ConnectGloo;
    } else if (options.backend == "nccl") {
      services.backend = ConnectNccl;
    } else {
      return InvalidArgument("collective group '" + name + "': unknown backend '" +
                             options.backend + "' (gloo or nccl)");
    }
  }
  services.self.rank = options.rank;
  std::unique_ptr<Communicator> c(new Communicator(options, std::move(services)));
  RendezvousKv& kv = *c->services_.kv;
  const std::string prefix = c->services_.key_prefix + name + "/";
  auto fail = [&](Status status) {
    (void)kv.DeletePrefix(prefix);  // a failed join leaves nothing behind
    return status.WithContext("joining collective group '" + name + "' as rank " +
                              std::to_string(options.rank) + " of " +
                              std::to_string(options.world_size));
  };
  Status put = kv.Put(prefix + "info/" + std::to_string(options.rank),
                      EncodeInfo(c->services_.self));
  if (!put.ok()) return fail(put);
  Result<std::unique_ptr<Backend>> backend =
      c->services_.backend(options, kv, prefix + "backend/", c->services_.host);
  if (!backend.ok()) return fail(backend.status());
  c->backend_ = std::move(*backend);
  auto barrier = [&](uint64_t tag) {
    Operation op;
    op.kind = OpKind::kBarrier;
    op.tag = tag;
    op.timeout = std::chrono::milliseconds(options.timeout_ms);
    return c->backend_->Run(op);
  };
  // Every rank connected, so every rank's info is there.
  if (Status s = barrier(~uint64_t{0}); !s.ok()) return fail(s);
  for (int r = 0; r < options.world_size; ++r) {
    Result<std::optional<std::string>> got = kv.Get(prefix + "info/" + std::to_string(r));
    if (!got.ok()) return fail(got.status());
    if (!got->has_value()) return fail(Internal("rank " + std::to_string(r) + "'s entry is gone"));
    Result<RankInfo> info = DecodeInfo(r, **got);
    if (!info.ok()) return fail(info.status());
    c->ranks_.push_back(std::move(*info));
  }
  // Every rank has read everything: the rendezvous keys go.
  if (Status s = barrier(~uint64_t{0} - 1); !s.ok()) return fail(s);
  if (options.rank == 0) {
    Result<uint32_t> deleted = kv.DeletePrefix(prefix);
    if (!deleted.ok()) return fail(deleted.status());
  }
  c->services_.progress->Record(name, 0);
  return c;
}

std::string Communicator::Where() const {
  return "collective group '" + options_.group_name + "' (rank " + std::to_string(options_.rank) +
         " of " + std::to_string(options_.world_size) + ")";
}

std::string Communicator::Describe(const RankInfo& r) const {
  return "rank " + std::to_string(r.rank) + " (node " + r.node + ", pid " +
         std::to_string(r.pid) + ")";
}

Status Communicator::CheckBuffer(const Buffer& b, const char* what) const {
  if (b.data == nullptr && b.count > 0) {
    return InvalidArgument(Where() + ": the " + std::string(what) + " buffer is null");
  }
  if (static_cast<uint8_t>(b.type) > static_cast<uint8_t>(DataType::kFloat64)) {
    return InvalidArgument(Where() + ": the " + std::string(what) + " buffer's type is unknown");
  }
  return Status::Ok();
}

Status Communicator::CheckRank(int r, const char* what, bool other) const {
  if (r < 0 || r >= options_.world_size) {
    return InvalidArgument(Where() + ": " + what + " " + std::to_string(r) + " is outside [0, " +
                           std::to_string(options_.world_size) + ")");
  }
  if (other && r == options_.rank) {
    return InvalidArgument(Where() + ": " + what + " " + std::to_string(r) + " is this rank");
  }
  return Status::Ok();
}

Status Communicator::Run(Operation op) {
  if (!failed_.ok()) {
    return FailedPrecondition(Where() + " failed earlier (" + failed_.message() +
                              "); destroy the group and create it again");
  }
  op.timeout = std::chrono::milliseconds(options_.timeout_ms);
  bool p2p = op.kind == OpKind::kSend || op.kind == OpKind::kRecv;
  uint64_t seq = 0;
  if (p2p) {
    auto& count = op.kind == OpKind::kSend ? sent_[op.peer] : received_[op.peer];
    op.tag = count++;
  } else {
    seq = ++seq_;
    op.tag = seq;
    services_.progress->Record(options_.group_name, seq);
  }
  if (op.input.count == 0 && op.output.count == 0 && op.kind != OpKind::kBarrier) {
    return Status::Ok();
  }
  Status ran = backend_->Run(op);
  if (ran.ok()) return ran;
  Stall stall{OpName(op.kind), seq, {}};
  std::string diagnosis = Diagnose(op, seq, ran, stall);
  failed_ = ran;
  Code code = ran.code() == Code::kDeadlineExceeded || !stall.never_reached.empty()
                  ? Code::kDeadlineExceeded
                  : ran.code();
  if (code == Code::kDeadlineExceeded) stall_ = std::move(stall);
  return Status(code, diagnosis);
}

std::string Communicator::Diagnose(const Operation& op, uint64_t seq, const Status& failure,
                                   Stall& stall) {
  auto named = [](const RankInfo& r) { return StalledRank{r.rank, r.node, r.pid}; };
  bool p2p = op.kind == OpKind::kSend || op.kind == OpKind::kRecv;
  std::string what = std::string(OpName(op.kind)) +
                     (p2p ? (op.kind == OpKind::kSend ? " to rank " : " from rank ") +
                                std::to_string(op.peer)
                          : " #" + std::to_string(seq)) +
                     " of " + Where();
  std::string text = what + " did not finish within " + std::to_string(options_.timeout_ms) +
                     " ms (" + failure.message() + ")";
  if (p2p) {
    if (failure.code() == Code::kDeadlineExceeded) {
      stall.never_reached.push_back(named(ranks_[op.peer]));
    }
    return text + "; the peer is " + Describe(ranks_[op.peer]);
  }
  std::vector<std::string> missing, unreachable;
  for (const RankInfo& r : ranks_) {
    if (r.rank == options_.rank) continue;
    Result<std::optional<ProgressBoard::Progress>> got =
        services_.progress->Read(r, options_.group_name, kProgressReadTimeout);
    if (!got.ok()) {
      unreachable.push_back(Describe(r) + ": " + got.status().message());
    } else if (!got->has_value()) {
      missing.push_back(Describe(r) + ", which never joined the group");
      stall.never_reached.push_back(named(r));
    } else if ((*got)->entered < seq) {
      missing.push_back(Describe(r) + ", whose last operation was #" +
                        std::to_string((*got)->entered) +
                        ((*got)->left ? " (it has left the group since)" : ""));
      stall.never_reached.push_back(named(r));
    }
  }
  if (!missing.empty()) {
    text += "; never reached it: ";
    for (size_t i = 0; i < missing.size(); ++i) text += (i ? "; " : "") + missing[i];
  }
  if (!unreachable.empty()) {
    text += "; could not be asked: ";
    for (size_t i = 0; i < unreachable.size(); ++i) text += (i ? "; " : "") + unreachable[i];
  }
  if (missing.empty() && unreachable.empty()) text += "; every rank reached it";
  return text;
}

Status Communicator::Allreduce(Buffer data, ReduceOp op) {
  AIRT_RETURN_IF_ERROR(CheckBuffer(data, "data"));
  return Run(Operation{OpKind::kAllreduce, data, data, op, 0, 0, {}});
}

Status Communicator::Broadcast(Buffer data, int root) {
  AIRT_RETURN_IF_ERROR(CheckBuffer(data, "data"));
  AIRT_RETURN_IF_ERROR(CheckRank(root, "root", false));
  return Run(Operation{OpKind::kBroadcast, data, data, ReduceOp::SUM, root, 0, {}});
}

Status Communicator::Allgather(Buffer input, Buffer output) {
  AIRT_RETURN_IF_ERROR(CheckBuffer(input, "input"));
  AIRT_RETURN_IF_ERROR(CheckBuffer(output, "output"));
  if (input.type != output.type || output.count != input.count * options_.world_size) {
    return InvalidArgument(Where() + ": allgather of " + std::to_string(input.count) + " " +
                           DataTypeName(input.type) + " needs an output of " +
                           std::to_string(input.count * options_.world_size) + " " +
                           DataTypeName(input.type) + ", not " + std::to_string(output.count) +
                           " " + DataTypeName(output.type));
  }
  return Run(Operation{OpKind::kAllgather, input, output, ReduceOp::SUM, 0, 0, {}});
}

Status Communicator::Reducescatter(Buffer input, Buffer output, ReduceOp op) {
  AIRT_RETURN_IF_ERROR(CheckBuffer(input, "input"));
  AIRT_RETURN_IF_ERROR(CheckBuffer(output, "output"));
  if (input.type != output.type || input.count != output.count * options_.world_size) {
    return InvalidArgument(Where() + ": reducescatter into " + std::to_string(output.count) +
                           " " + DataTypeName(output.type) + " needs an input of " +
                           std::to_string(output.count * options_.world_size) + " " +
                           DataTypeName(output.type) + ", not " + std::to_string(input.count) +
                           " " + DataTypeName(input.type));
  }
  return Run(Operation{OpKind::kReducescatter, input, output, op, 0, 0, {}});
}

Status Communicator::Reduce(Buffer data, int root, ReduceOp op) {
  AIRT_RETURN_IF_ERROR(CheckBuffer(data, "data"));
  AIRT_RETURN_IF_ERROR(CheckRank(root, "root", false));
  return Run(Operation{OpKind::kReduce, data, data, op, root, 0, {}});
}

Status Communicator::Send(Buffer data, int peer) {
  AIRT_RETURN_IF_ERROR(CheckBuffer(data, "data"));
  AIRT_RETURN_IF_ERROR(CheckRank(peer, "peer", true));
  return Run(Operation{OpKind::kSend, data, data, ReduceOp::SUM, peer, 0, {}});
}

Status Communicator::Recv(Buffer data, int peer) {
  AIRT_RETURN_IF_ERROR(CheckBuffer(data, "data"));
  AIRT_RETURN_IF_ERROR(CheckRank(peer, "peer", true));
  return Run(Operation{OpKind::kRecv, data, data, ReduceOp::SUM, peer, 0, {}});
}

Status Communicator::Barrier() {
  return Run(Operation{OpKind::kBarrier, {}, {}, ReduceOp::SUM, 0, 0, {}});
}

}  // namespace airt::collective
