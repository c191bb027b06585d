// airt._airt's references (docs/ownership.md): the Reference a Python ObjectRef holds, so that
// its object stays while one exists; the owner of a ref pickled into a value; a ref unpickled
// from one, borrowed from its owner; a streaming generator held open.
#include <memory>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "airt/api.h"
#include "python/_airt_gil.h"

namespace py = pybind11;
using airt::python::GilRelease;

namespace {

// A reference held by a Python ObjectRef: the object stays while one exists.
struct Reference {
  std::string id;
  std::shared_ptr<void> hold;
};

}  // namespace

void BindReferences(py::module_& m) {
  py::class_<Reference>(m, "Reference").def_property_readonly("id", [](const Reference& r) {
    return py::bytes(r.id);
  });
  // Counts a reference to `id` (a 28-byte object id) until the returned object goes.
  m.def("hold", [](py::bytes id) {
    std::string raw(id);
    return Reference{raw, airt::internal::HoldObject(raw)};
  });

  // A ref pickled into a value (docs/ownership.md): its owner, (host:port, worker id bytes).
  // `escrow`: nothing else holds the value's refs (a return, a put): an object this process owns
  // is kept until a process borrows it.
  m.def("owner_of", [](py::bytes id, bool escrow) {
    std::string raw(id);
    airt::internal::RefOwner owner;
    {
      GilRelease unlocked;
      if (escrow) {
        owner = airt::internal::OwnerOfRef(raw);
      } else {
        airt::internal::ContainedRefs ignored;  // the package collects the ids itself
        owner = airt::internal::OwnerOfRef(raw);
      }
    }
    return py::make_tuple(owner.address, py::bytes(owner.worker));
  });
  // A ref unpickled from a value: held (borrowed from its owner unless this process owns it)
  // until the returned object goes.
  m.def("borrow", [](py::bytes id, const std::string& address, py::bytes worker) {
    std::string raw(id);
    airt::internal::RefOwner owner{address, std::string(worker)};
    GilRelease unlocked;
    return Reference{raw, airt::internal::HoldBorrowed(raw, owner)};
  });

  // Where each object of `ids` lies, as its owner (this process) knows: the host:port of the
  // Node service holding it (nodes()' NodeManagerAddress), or "" (inline, not made yet, owned
  // elsewhere). airt.data places map tasks and actor calls near their input blocks with it.
  m.def("object_node_addresses", [](const std::vector<py::bytes>& ids) {
    std::vector<std::string> raw(ids.begin(), ids.end());
    GilRelease unlocked;
    return airt::internal::ObjectNodeAddresses(raw);
  });

  // Keeps the stream `completed` open until the returned object goes (then its untaken items
  // are freed and the generator runs on unheld).
  m.def("hold_generator", [](py::bytes completed) {
    std::string raw(completed);
    return Reference{raw, airt::internal::HoldGenerator(raw)};
  });
}
