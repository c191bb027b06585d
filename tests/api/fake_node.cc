#include "tests/api/fake_node.h"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>

#include <capnp/ez-rpc.h>
#include <kj/async-io.h>

#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"

namespace airt::testing {
namespace {

class FakeNode final : public proto::Node::Server {
 public:
  explicit FakeNode(std::shared_ptr<FakeNodeState> state) : state_(std::move(state)) {}

 protected:
  kj::Promise<void> registerWorker(RegisterWorkerContext context) override {
    auto worker = context.getParams().getWorker();
    auto id_bytes = worker.getWorkerId();
    auto id = WorkerId::FromBinary(
        std::string_view(reinterpret_cast<const char*>(id_bytes.begin()), id_bytes.size()));
    if (!id.ok()) throw ToKjException(id.status().WithContext("workerId"));
    state_->Record({*id, worker.getHost(), worker.getPort(), worker.getPid()});
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<FakeNodeState> state_;
};

}  // namespace

std::vector<RegisteredWorker> FakeNodeState::Registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}

void FakeNodeState::Record(RegisteredWorker worker) {
  std::lock_guard<std::mutex> lock(mu_);
  registrations_.push_back(std::move(worker));
}

FakeNodeThread::FakeNodeThread(std::shared_ptr<FakeNodeState> state)
    : server_([state] { return capnp::Capability::Client(kj::heap<FakeNode>(state)); }) {}

}  // namespace airt::testing
