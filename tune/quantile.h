// Order statistics the schedulers share, computed as numpy's nanpercentile/median (linear
// interpolation between closest ranks), so airt's decisions match Ray's on the same numbers.
#pragma once

#include <optional>
#include <vector>

namespace airt::tune {

// The q-th percentile (0..100) of the non-NaN values; nullopt when there are none.
std::optional<double> NanPercentile(std::vector<double> values, double q);

}  // namespace airt::tune
