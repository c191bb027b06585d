// A worker process's core worker as its task receiver: joining without the head, serving
// proto::Worker on the core worker's loop, registering with the node over the node's connection
// and noticing when that connection breaks.
#include <unistd.h>

#include <string>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include "api/core_worker/capnp_util.h"
#include "api/core_worker/core_worker_impl.h"
#include "common/logging.h"
#include "common/proto/cluster.capnp.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"

namespace airt::core_worker {

void CoreWorker::Impl::JoinAsWorker() {
  job_id_ = options_.job;
  node_address_ = options_.node_address + ":" + std::to_string(options_.node_port);
  transfer_address_ = options_.transfer_address;
  store_socket_ = options_.store_socket;
  if (options_.head_address.empty()) {
    loop_->no_head = capnp::Capability::Client(ToKjException(Unavailable(
                                                   "this worker was started without the head's "
                                                   "address (airt-worker --head-address)")))
                         .castAs<proto::Head>();
  }
  MakeSubmitters();
}

kj::Promise<void> CoreWorker::Impl::ReadJobNamespace() {
  if (!options_.ns.empty() || options_.job.IsNil() || options_.head_address.empty()) {
    return kj::READY_NOW;
  }
  return Head().listJobsRequest()
      .send()
      .then([this](auto reply) {
        for (auto job : reply.getJobs()) {
          if (job.getJobId().size() == JobId::kSize &&
              JobId::FromRaw(job.getJobId().begin()) == job_id_) {
            namespace_ = job.getNamespace().cStr();  // "": the job's anonymous one
          }
        }
      })
      .catch_([this](kj::Exception&& e) {
        AIRT_LOG(WARNING) << "job " << job_id_.Hex() << "'s namespace could not be read from the "
                          << "head (" << FromKjException(e).ToString()
                          << "): this worker's tasks use the job's anonymous namespace";
      });
}

Result<uint16_t> CoreWorker::Impl::ServeWorker(WorkerServing serving) {
  if (options_.worker.IsNil()) {
    return FailedPrecondition("serving proto::Worker: this is a driver's core worker, not a "
                              "worker process's");
  }
  if (!serving.make_service) return InvalidArgument("serving proto::Worker: no service given");
  uint16_t port = 0;
  kj::Duration deadline = serving.register_timeout_ms * kj::MILLISECONDS;
  kj::Duration grace = serving.exit_grace_ms * kj::MILLISECONDS;
  Status served = CatchKj([&] {
    OnLoop([&]() -> kj::Promise<void> {
      if (loop_->server) throw ToKjException(FailedPrecondition("this worker serves already"));
      kj::Timer& timer = loop_->io.provider->getTimer();
      auto exited = kj::newPromiseAndFulfiller<void>();
      loop_->server = kj::heap<capnp::TwoPartyServer>(serving.make_service(
          kj::mv(exited.fulfiller), [this](bool force) {
            inbox_.RunPending();  // submissions of the cancelled task not yet on the loop
            CancelAll(force);
          }));
      return timer.timeoutAfter(deadline, connector_->Listen(loop_->io, options_.node_address))
          .then([this, &port, deadline](kj::Own<kj::ConnectionReceiver> listener) {
            port = static_cast<uint16_t>(listener->getPort());
            loop_->listener = kj::mv(listener);
            loop_->accepting =
                loop_->server->listen(*loop_->listener).eagerlyEvaluate([](kj::Exception&& e) {
                  AIRT_LOG(ERROR) << "the worker's port stopped accepting: "
                                  << FromKjException(e).ToString();
                });
            auto request = Connect(node_address_).castAs<proto::Node>().registerWorkerRequest();
            auto worker = request.initWorker();
            worker.setWorkerId(AsData(options_.worker.Binary()));
            worker.setHost(options_.node_address);
            worker.setPort(port);
            worker.setPid(static_cast<int32_t>(::getpid()));
            return loop_->io.provider->getTimer().timeoutAfter(deadline,
                                                               request.send().ignoreResult());
          })
          .then([this, grace, exited = kj::mv(exited.promise),
                 on_node_lost = std::move(serving.on_node_lost)]() mutable {
            // The call answered over the node's connection: its peer is connected.
            auto node = loop_->peers.find(node_address_);
            if (on_node_lost && node != loop_->peers.end() && node->second->rpc) {
              loop_->tasks.add(node->second->rpc->onDisconnect().then(
                  [on_node_lost = std::move(on_node_lost)] { on_node_lost(); }));
            }
            // exit() answered: stop accepting, let the answer be written and its callers hang
            // up, within the grace.
            loop_->tasks.add(
                exited
                    .then(
                        [this, grace]() -> kj::Promise<void> {
                          if (!loop_->server) return kj::READY_NOW;
                          loop_->accepting = nullptr;
                          loop_->listener = nullptr;
                          return loop_->server->drain().exclusiveJoin(
                              loop_->io.provider->getTimer().afterDelay(grace));
                        },
                        // The service went first (Stop), dropping the fulfiller.
                        [](kj::Exception&&) -> kj::Promise<void> { return kj::READY_NOW; })
                    .then([this] { EndServing(); }));
            std::lock_guard<std::mutex> lock(serving_mu_);
            serving_ = true;  // on the loop, so that EndServing comes after
          });
    });
  });
  if (!served.ok()) {
    OnLoop([&] { EndServing(); });
    return served.WithContext("serving worker " + options_.worker.Hex() + " and registering it " +
                              "with the node at " + node_address_);
  }
  return port;
}

void CoreWorker::Impl::EndServing() {
  loop_->accepting = nullptr;
  loop_->listener = nullptr;
  loop_->server = nullptr;
  std::lock_guard<std::mutex> lock(serving_mu_);
  serving_ = false;
  serving_cv_.notify_all();
}

void CoreWorker::Impl::WaitServingEnded() {
  std::unique_lock<std::mutex> lock(serving_mu_);
  serving_cv_.wait(lock, [this] { return !serving_; });
}

}  // namespace airt::core_worker
