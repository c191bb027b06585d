// The C++ sweep's closing plot, drawn by the Python package (one plot for both tuners).
#pragma once

#include <string>

#include "common/status.h"

namespace airt::tune::internal {

// Runs `$AIRT_PYTHON -m airt.tune.progress <experiment_path> <metric>` (python3 when AIRT_PYTHON
// is unset) and returns the PNG's path it printed. kUnavailable when no Python can run it (not
// found, no airt or matplotlib, no trial reported the metric), with its own words.
Result<std::string> PlotExperiment(const std::string& experiment_path, const std::string& metric);

}  // namespace airt::tune::internal
