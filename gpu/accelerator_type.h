// Ray's accelerator type of a GPU from its marketing name, and the memory bandwidth a healthy
// device of that type reaches. Plain C++: the node uses them with or without the plugin.
//   AcceleratorTypeFromName("NVIDIA H100 80GB HBM3") == "H100"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace airt {

// Ray's label key and resource prefix for a node's accelerator type.
inline constexpr char kAcceleratorTypeLabel[] = "ray.io/accelerator-type";
inline constexpr char kAcceleratorTypeResourcePrefix[] = "accelerator_type:";

// "A10", "A10G", "L4", "L40S", "A100", "H100", "H200", "B200", "V100", "T4", ... for NVIDIA's
// names; a name of no known family keeps its marketing name with spaces made '-' and characters
// outside letters, digits and "-_.:" dropped ("" for an empty name).
std::string AcceleratorTypeFromName(std::string_view name);

// A healthy device's device-to-device copy bandwidth (read plus write), GB/s, for the
// bandwidth check; 0 when the type is not known (the check is then skipped). `total_memory`
// tells the A100 40GB from the 80GB.
double ExpectedBandwidthGbps(std::string_view accelerator_type, uint64_t total_memory);

}  // namespace airt
