// airt._airt's placement-group functions (airt.util.placement_group sits on them): the C++
// placement-group API (airt/driver.h), GIL released while the head answers.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <vector>

#include "airt/api.h"
#include "python/_airt_gil.h"

namespace py = pybind11;

void BindPlacementGroups(py::module_& m) {
  m.def("create_placement_group",
        [](const std::string& name, const std::vector<std::map<std::string, double>>& bundles,
           int strategy, bool detached,
           const std::vector<std::map<std::string, std::string>>& bundle_label_selector) {
          airt::PlacementGroupCreationOptions options{
              name, bundles, static_cast<airt::PlacementStrategy>(strategy), detached,
              bundle_label_selector};
          airt::python::GilRelease unlocked;
          return airt::CreatePlacementGroup(options).ID();
        },
        py::arg("name"), py::arg("bundles"), py::arg("strategy"), py::arg("detached"),
        py::arg("bundle_label_selector") = std::vector<std::map<std::string, std::string>>());
  m.def("remove_placement_group", [](const std::string& id) {
    airt::python::GilRelease unlocked;
    airt::RemovePlacementGroup(id);
  });
  // True once every bundle is reserved; False after timeout_ms (< 0: no limit).
  m.def("wait_placement_group", [](const std::string& id, double timeout_s) {
    airt::python::GilRelease unlocked;
    return airt::internal::WaitPlacementGroupMs(
        id, timeout_s < 0 ? -1 : static_cast<int64_t>(timeout_s * 1000));
  });
  // Every group the head knows: dicts in the shape airt.util.placement_group_table builds on.
  m.def("placement_groups", [] {
    std::vector<airt::internal::PlacementGroupEntry> groups;
    {
      airt::python::GilRelease unlocked;
      groups = airt::internal::ListPlacementGroups();
    }
    py::list out;
    for (const auto& g : groups) {
      py::dict d;
      d["id"] = g.id;
      d["name"] = g.name;
      d["namespace"] = g.ns;
      d["job_id"] = g.job_id;
      d["strategy"] = g.strategy;
      d["bundles"] = g.bundles;
      d["state"] = g.state;
      d["bundle_nodes"] = g.bundle_nodes;
      d["detached"] = g.detached;
      d["pending_reason"] = g.pending_reason;
      d["infeasible"] = g.infeasible;
      out.append(d);
    }
    return out;
  });
  m.def("in_placement_group", &airt::internal::InPlacementGroup);
}
