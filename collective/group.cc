// airt/collective.h's Group: a Communicator over the cluster's services, its Status turned into
// airt's exceptions.
#include "airt/collective.h"

#include "api/internal/error_kinds.h"
#include "collective/communicator.h"
#include "collective/services.h"

namespace airt::collective {
namespace {

void Check(const Status& status) {
  if (status.ok()) return;
  if (status.code() == Code::kDeadlineExceeded) throw TimeoutError(status.message());
  internal::ThrowStatus(status);
}

}  // namespace

Group::Group(std::unique_ptr<Communicator> communicator)
    : communicator_(std::move(communicator)) {}
Group::~Group() = default;

std::unique_ptr<Group> Group::Init(const GroupOptions& options) {
  static_assert(sizeof(Float16) == 2);
  // Stateless views of the process's core worker (which holds the state), so one serves all.
  static HeadKv kv;
  static CoreWorkerProgress progress;
  Result<CommunicatorServices> services = ClusterServices(kv, progress);
  Check(services.status());
  Result<std::unique_ptr<Communicator>> c = Communicator::Create(options, std::move(*services));
  Check(c.status());
  return std::unique_ptr<Group>(new Group(std::move(*c)));
}

std::unique_ptr<Group> Group::Init(int world_size, int rank, const std::string& backend,
                                   const std::string& group_name) {
  GroupOptions o;
  o.world_size = world_size;
  o.rank = rank;
  o.backend = backend;
  o.group_name = group_name;
  return Init(o);
}

int Group::rank() const { return communicator_->options().rank; }
int Group::world_size() const { return communicator_->options().world_size; }
const std::string& Group::name() const { return communicator_->options().group_name; }
const std::string& Group::backend() const { return communicator_->options().backend; }
std::optional<Stall> Group::stall() const { return communicator_->stall(); }

void Group::Allreduce(Buffer data, ReduceOp op) { Check(communicator_->Allreduce(data, op)); }
void Group::Broadcast(Buffer data, int root) { Check(communicator_->Broadcast(data, root)); }
void Group::Allgather(Buffer input, Buffer output) {
  Check(communicator_->Allgather(input, output));
}
void Group::Reducescatter(Buffer input, Buffer output, ReduceOp op) {
  Check(communicator_->Reducescatter(input, output, op));
}
void Group::Reduce(Buffer data, int root, ReduceOp op) {
  Check(communicator_->Reduce(data, root, op));
}
void Group::Send(Buffer data, int peer) { Check(communicator_->Send(data, peer)); }
void Group::Recv(Buffer data, int peer) { Check(communicator_->Recv(data, peer)); }
void Group::Barrier() { Check(communicator_->Barrier()); }

}  // namespace airt::collective
