// airt._tune_core: the sweep schedulers' decisions (api/include/airt/tune/schedulers.h) for the
// Python tuner (airt.tune.schedulers), so both tuners stop the same trials. Decisions are the
// strings "CONTINUE", "PAUSE", "STOP" (Ray's TrialScheduler constants); bad options raise
// ValueError.
#include <memory>
#include <optional>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "airt/exceptions.h"
#include "airt/tune/schedulers.h"

namespace py = pybind11;
using namespace airt::tune;

namespace {

const char* DecisionName(Decision d) {
  switch (d) {
    case Decision::kContinue: return "CONTINUE";
    case Decision::kPause: return "PAUSE";
    case Decision::kStop: return "STOP";
  }
  return "CONTINUE";
}

Mode ModeOf(const std::string& mode) {
  if (mode == "min") return Mode::kMin;
  if (mode == "max") return Mode::kMax;
  throw py::value_error("mode must be 'min' or 'max', not '" + mode + "'");
}

template <typename Make>
std::unique_ptr<TrialScheduler> Checked(Make make) {
  try {
    return make();
  } catch (const airt::InvalidArgumentError& e) {
    throw py::value_error(e.what());
  }
}

}  // namespace

PYBIND11_MODULE(_tune_core, m) {
  py::class_<TrialScheduler>(m, "Scheduler")
      .def("on_trial_add", &TrialScheduler::OnTrialAdd)
      .def("on_trial_result",
           [](TrialScheduler& s, const std::string& trial, double time,
              std::optional<double> metric) {
             return DecisionName(s.OnTrialResult(trial, time, metric));
           })
      .def("on_trial_complete", &TrialScheduler::OnTrialComplete)
      .def("on_trial_remove", &TrialScheduler::OnTrialRemove)
      .def("on_search_finished", &TrialScheduler::OnSearchFinished)
      .def("set_waiting", &TrialScheduler::SetWaiting)
      .def("take_actions",
           [](TrialScheduler& s) {
             py::list out;
             for (const Action& a : s.TakeActions()) {
               out.append(py::make_tuple(a.trial, DecisionName(a.decision)));
             }
             return out;
           })
      .def_property_readonly("name", &TrialScheduler::Name);

  m.def("fifo", [] { return MakeFifoScheduler(); });
  m.def(
      "asha",
      [](const std::string& mode, double max_t, double grace_period, double reduction_factor,
         int brackets, bool stop_last_trials, uint64_t seed) {
        AshaOptions o{ModeOf(mode),     max_t, grace_period, reduction_factor, brackets,
                      stop_last_trials, seed};
        return Checked([&] { return MakeAshaScheduler(o); });
      },
      py::arg("mode"), py::arg("max_t"), py::arg("grace_period"), py::arg("reduction_factor"),
      py::arg("brackets"), py::arg("stop_last_trials"), py::arg("seed"));
  m.def(
      "hyperband",
      [](const std::string& mode, double max_t, double reduction_factor, bool stop_last_trials) {
        HyperBandOptions o{ModeOf(mode), max_t, reduction_factor, stop_last_trials};
        return Checked([&] { return MakeHyperBandScheduler(o); });
      },
      py::arg("mode"), py::arg("max_t"), py::arg("reduction_factor"), py::arg("stop_last_trials"));
  m.def(
      "median_stopping",
      [](const std::string& mode, double grace_period, int min_samples_required,
         double min_time_slice) {
        MedianStoppingOptions o{ModeOf(mode), grace_period, min_samples_required, min_time_slice};
        return Checked([&] { return MakeMedianStoppingRule(o); });
      },
      py::arg("mode"), py::arg("grace_period"), py::arg("min_samples_required"),
      py::arg("min_time_slice"));
}
