// airt._airt's drain calls (airt._private.drain sits on them): the head's drainNode, and each
// node's drain and liveness as the head's clusterView shows them, GIL released while the head
// answers (docs/cluster.md "Draining a node").
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "airt/api.h"
#include "common/ids.h"
#include "python/_airt_gil.h"
#include "python/_airt_head_call.h"

namespace py = pybind11;

namespace {

// One node's entry in the head's view, as drain_states returns it.
struct NodeDrainState {
  std::string node_id;  // hex
  bool alive = false;
  bool draining = false;
  std::string reason;
  uint64_t deadline_ms = 0;
  std::string death_cause;
};

void Raise(const airt::Status& status) {
  if (status.code() == airt::Code::kInvalidArgument) throw py::value_error(status.message());
  if (status.code() == airt::Code::kNotFound) throw py::key_error(status.message());
  throw std::runtime_error(status.ToString());
}

}  // namespace

void BindDrain(py::module_& m) {
  // Drains node `node_id` (hex); returns the deadline (wall ms since the epoch).
  m.def("drain_node", [](const std::string& node_id, const std::string& reason,
                         uint64_t timeout_ms) {
    airt::Result<airt::NodeId> id = airt::NodeId::FromHex(node_id);
    if (!id.ok()) throw py::value_error("node_id: " + id.status().message());
    std::string address = airt::internal::HeadAddress();
    uint64_t deadline = 0;
    airt::Status status;
    {
      airt::python::GilRelease unlocked;
      status = airt::python::CallHead(
          address, [&](airt::proto::Head::Client& head, kj::WaitScope& wait) {
            auto request = head.drainNodeRequest();
            request.setNodeId(capnp::Data::Reader(id->data(), airt::NodeId::kSize));
            request.setReason(reason);
            request.setTimeoutMs(timeout_ms);
            deadline = request.send().wait(wait).getDeadlineMs();
          });
    }
    if (!status.ok()) Raise(status);
    return deadline;
  });
  // Every node the head knows: (node id hex, alive, draining, reason, deadline ms, death cause).
  m.def("drain_states", [] {
    std::string address = airt::internal::HeadAddress();
    std::vector<NodeDrainState> states;
    airt::Status status;
    {
      airt::python::GilRelease unlocked;
      status = airt::python::CallHead(
          address, [&](airt::proto::Head::Client& head, kj::WaitScope& wait) {
            auto view = head.clusterViewRequest().send().wait(wait);
            for (auto n : view.getNodes()) {
              auto bytes = n.getInfo().getNodeId();
              if (bytes.size() != airt::NodeId::kSize) continue;
              states.push_back({airt::NodeId::FromRaw(bytes.begin()).Hex(), n.getAlive(),
                                n.getDraining(), n.getDrainReason().cStr(),
                                n.getDrainDeadlineMs(), n.getDeathCause().cStr()});
            }
          });
    }
    if (!status.ok()) Raise(status);
    py::list out;
    for (const NodeDrainState& s : states) {
      out.append(py::make_tuple(s.node_id, s.alive, s.draining, s.reason, s.deadline_ms,
                                s.death_cause));
    }
    return out;
  });
}
