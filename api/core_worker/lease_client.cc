#include "api/core_worker/lease_client.h"

#include "api/core_worker/capnp_util.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"
#include "common/strategy_wire.h"

namespace airt::core_worker {
namespace {

constexpr int kMaxSpillbacks = 8;

kj::Promise<LeaseOutcome> RequestLeaseHop(const ConnectFn& connect, const std::string& node,
                                          const LeaseRequest& lease, const JobId& job, int hops) {
  auto request = connect(node).castAs<proto::Node>().requestWorkerLeaseRequest();
  auto shape = request.initShape();
  SetAmounts(shape.initResources(static_cast<uint>(lease.resources.size())), lease.resources);
  shape.setAcceleratorType(lease.accelerator_type);
  request.setJobId(AsData(job.Binary()));
  request.setLanguage(lease.python ? proto::Language::PYTHON : proto::Language::CPP);
  request.setCodeSearchPath(lease.code_search_path);
  request.setPlaced(lease.placed);
  request.setDetached(lease.detached);
  WriteStrategy(lease.strategy, request.initStrategy());
  request.setSpilled(hops > 0);
  request.setRetriable(lease.retriable);
  return request.send().then([&connect, node, lease, job,
                              hops](auto response) -> kj::Promise<LeaseOutcome> {
    auto reply = response.getReply();
    switch (reply.which()) {
      case proto::LeaseReply::GRANTED: {
        auto grant = reply.getGranted();
        auto worker = grant.getWorker();
        LeaseOutcome out;
        out.node = node;
        out.lease_id = grant.getLeaseId();
        out.worker = std::string(worker.getHost().cStr()) + ":" + std::to_string(worker.getPort());
        out.worker_id = ToString(worker.getWorkerId());
        out.pid = worker.getPid();
        out.holder = response.getHolder();
        return out;
      }
      case proto::LeaseReply::SPILLBACK:
        if (hops >= kMaxSpillbacks) {
          throw ToKjException(Unavailable("the lease was spilled back " + std::to_string(hops) +
                                          " times without a grant"));
        }
        {
          std::string next = reply.getSpillback().cStr();
          return RequestLeaseHop(connect, next, lease, job, hops + 1)
              .catch_([next](kj::Exception&& e) {
                if (FromKjException(e).code() != Code::kUnavailable) {
                  kj::throwFatalException(kj::mv(e));
                }
                LeaseOutcome out;
                out.node = next;
                out.spillback_unreachable = "node " + next + " (where the lease was spilled back) " +
                                            "cannot be reached: " + FromKjException(e).ToString();
                return out;
              });
        }
      case proto::LeaseReply::INFEASIBLE: {
        LeaseOutcome out;
        out.node = node;
        out.infeasible = reply.getInfeasible().cStr();
        return out;
      }
    }
    throw ToKjException(Internal("a lease reply of unknown kind from " + node));
  });
}

}  // namespace

kj::Promise<LeaseOutcome> RequestLease(const ConnectFn& connect, const std::string& node,
                                       const LeaseRequest& request, const JobId& job) {
  return RequestLeaseHop(connect, node, request, job, 0);
}

kj::Promise<void> ReturnLease(const ConnectFn& connect, const std::string& node, uint64_t lease_id,
                              bool disconnect, capnp::Capability::Client holder) {
  auto request = connect(node).castAs<proto::Node>().returnWorkerLeaseRequest();
  request.setLeaseId(lease_id);
  request.setDisconnectWorker(disconnect);
  // kNotFound: the node released the lease already, when its worker exited (a crash, a kill, a
  // forced cancel); giving it back is then done, not a failure to report.
  return request.send()
      .ignoreResult()
      .catch_([](kj::Exception&& e) {
        if (FromKjException(e).code() != Code::kNotFound) kj::throwFatalException(kj::mv(e));
      })
      .attach(kj::mv(holder));
}

}  // namespace airt::core_worker
