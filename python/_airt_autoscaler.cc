// airt._airt's autoscaler call (airt.autoscaler.sdk.request_resources sits on it): the head's
// requestResources, over a connection of its own made on a thread of its own (so that it never
// meets the event loop of the calling thread), GIL released while the head answers.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "airt/api.h"
#include "common/proto/cluster.capnp.h"
#include "python/_airt_gil.h"
#include "python/_airt_head_call.h"

namespace py = pybind11;

namespace {

using Bundles = std::vector<std::map<std::string, double>>;
using Selectors = std::vector<std::map<std::string, std::string>>;

airt::Status RequestResources(const std::string& address, const Bundles& bundles,
                              const Selectors& selectors) {
  return airt::python::CallHead(address, [&](airt::proto::Head::Client& head,
                                             kj::WaitScope& wait) {
    auto request = head.requestResourcesRequest();
    auto out = request.initBundles(bundles.size());
    for (size_t i = 0; i < bundles.size(); ++i) {
      auto resources = out[i].initResources(bundles[i].size());
      size_t r = 0;
      for (const auto& [name, amount] : bundles[i]) {
        resources[r].setName(name);
        resources[r++].setAmount(amount);
      }
    }
    auto labels_out = request.initLabelSelectors(selectors.size());
    for (size_t i = 0; i < selectors.size(); ++i) {
      auto labels = labels_out[i].initLabels(selectors[i].size());
      size_t l = 0;
      for (const auto& [key, value] : selectors[i]) {
        labels[l].setKey(key);
        labels[l++].setValue(value);
      }
    }
    request.send().wait(wait);
  });
}

}  // namespace

void BindAutoscaler(py::module_& m) {
  // Replaces the head's standing request (docs/autoscaler.md); raises ValueError for a bad one.
  m.def("request_resources", [](const Bundles& bundles, const Selectors& selectors) {
    std::string address = airt::internal::HeadAddress();
    airt::Status status;
    {
      airt::python::GilRelease unlocked;
      status = RequestResources(address, bundles, selectors);
    }
    if (status.code() == airt::Code::kInvalidArgument) throw py::value_error(status.message());
    if (!status.ok()) throw std::runtime_error(status.ToString());
  });
}
