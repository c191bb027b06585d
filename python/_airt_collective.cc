// airt._airt's collective groups (airt.util.collective sits on them): airt/collective.h's Group
// over Python buffers (numpy arrays, the arrays of CPU torch tensors), the GIL released while an
// operation runs; and the head KV's deletes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "airt/collective.h"
#include "airt/driver.h"
#include "airt/exceptions.h"
#include "python/_airt_gil.h"

namespace py = pybind11;
using airt::collective::Buffer;
using airt::collective::DataType;
using airt::collective::Group;
using airt::collective::ReduceOp;

namespace {

// A C-contiguous buffer of one of the element types (a host array), or a (device address,
// count, DataType value) tuple for device memory (a CUDA tensor of the nccl backend);
// InvalidArgumentError otherwise.
Buffer BufferOf(const py::object& object, bool writable) {
  if (py::isinstance<py::tuple>(object)) {
    auto t = object.cast<py::tuple>();
    int type = t[2].cast<int>();
    if (t.size() != 3 || type < 0 || type > static_cast<int>(DataType::kFloat64)) {
      throw airt::InvalidArgumentError("a device buffer is (address, count, type)");
    }
    return Buffer{reinterpret_cast<void*>(t[0].cast<uintptr_t>()), t[1].cast<size_t>(),
                  static_cast<DataType>(type)};
  }
  if (!PyObject_CheckBuffer(object.ptr())) {
    throw airt::InvalidArgumentError("collectives take arrays (numpy, or CPU torch tensors)");
  }
  py::buffer_info info = object.cast<py::buffer>().request(writable);
  ssize_t expected = info.itemsize;
  for (ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] > 1 && info.strides[d] != expected) {
      throw airt::InvalidArgumentError("collectives take C-contiguous arrays (copy it first)");
    }
    expected *= info.shape[d];
  }
  const std::string& f = info.format;
  char c = f.empty() ? '?' : f.back();
  DataType type;
  if (c == 'b' && info.itemsize == 1) type = DataType::kInt8;
  else if (c == 'B' && info.itemsize == 1) type = DataType::kUint8;
  else if ((c == 'i' || c == 'l') && info.itemsize == 4) type = DataType::kInt32;
  else if ((c == 'l' || c == 'q') && info.itemsize == 8) type = DataType::kInt64;
  else if (c == 'e' && info.itemsize == 2) type = DataType::kFloat16;
  else if (c == 'f' && info.itemsize == 4) type = DataType::kFloat32;
  else if (c == 'd' && info.itemsize == 8) type = DataType::kFloat64;
  else {
    throw airt::InvalidArgumentError("collectives take int8, uint8, int32, int64, float16, "
                                     "float32 or float64 elements, not format '" + f + "'");
  }
  return Buffer{info.ptr, static_cast<size_t>(info.size), type};
}

ReduceOp OpOf(int op) {
  if (op < 0 || op > static_cast<int>(ReduceOp::AVERAGE)) {
    throw airt::InvalidArgumentError("unknown ReduceOp " + std::to_string(op));
  }
  return static_cast<ReduceOp>(op);
}

}  // namespace

void BindCollective(py::module_& m) {
  py::class_<Group>(m, "CollectiveGroup")
      .def(py::init([](int world_size, int rank, const std::string& backend,
                       const std::string& group_name, int64_t timeout_ms) {
             airt::collective::GroupOptions o{world_size, rank, backend, group_name, timeout_ms};
             airt::python::GilRelease unlocked;
             return Group::Init(o);
           }),
           py::arg("world_size"), py::arg("rank"), py::arg("backend"), py::arg("group_name"),
           py::arg("timeout_ms"))
      .def_property_readonly("rank", &Group::rank)
      .def_property_readonly("world_size", &Group::world_size)
      .def_property_readonly("backend", [](const Group& g) { return g.backend(); })
      .def("stall",
           [](const Group& g) -> py::object {
             std::optional<airt::collective::Stall> stall = g.stall();
             if (!stall) return py::none();
             py::list ranks;
             for (const airt::collective::StalledRank& r : stall->never_reached) {
               ranks.append(py::dict(py::arg("rank") = r.rank, py::arg("node") = r.node,
                                     py::arg("pid") = r.pid));
             }
             return py::dict(py::arg("operation") = stall->operation,
                             py::arg("sequence") = stall->sequence,
                             py::arg("never_reached") = ranks);
           })
      .def("allreduce",
           [](Group& g, py::object data, int op) {
             Buffer b = BufferOf(data, true);
             airt::python::GilRelease unlocked;
             g.Allreduce(b, OpOf(op));
           })
      .def("broadcast",
           [](Group& g, py::object data, int root) {
             Buffer b = BufferOf(data, true);
             airt::python::GilRelease unlocked;
             g.Broadcast(b, root);
           })
      .def("allgather",
           [](Group& g, py::object input, py::object output) {
             Buffer in = BufferOf(input, false), out = BufferOf(output, true);
             airt::python::GilRelease unlocked;
             g.Allgather(in, out);
           })
      .def("reducescatter",
           [](Group& g, py::object input, py::object output, int op) {
             Buffer in = BufferOf(input, false), out = BufferOf(output, true);
             airt::python::GilRelease unlocked;
             g.Reducescatter(in, out, OpOf(op));
           })
      .def("reduce",
           [](Group& g, py::object data, int root, int op) {
             Buffer b = BufferOf(data, true);
             airt::python::GilRelease unlocked;
             g.Reduce(b, root, OpOf(op));
           })
      .def("send",
           [](Group& g, py::object data, int peer) {
             Buffer b = BufferOf(data, false);
             airt::python::GilRelease unlocked;
             g.Send(b, peer);
           })
      .def("recv",
           [](Group& g, py::object data, int peer) {
             Buffer b = BufferOf(data, true);
             airt::python::GilRelease unlocked;
             g.Recv(b, peer);
           })
      .def("barrier", [](Group& g) {
        airt::python::GilRelease unlocked;
        g.Barrier();
      });
  m.def("kv_delete", [](const std::string& ns, const std::string& key) {
    airt::python::GilRelease unlocked;
    return airt::internal::KvDelete(ns, key);
  });
  m.def("kv_delete_prefix", [](const std::string& ns, const std::string& prefix) {
    airt::python::GilRelease unlocked;
    return airt::internal::KvDeletePrefix(ns, prefix);
  });
}
