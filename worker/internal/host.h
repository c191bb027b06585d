// What this machine offers a node: hardware threads, physical memory and GPUs (through the
// dlopen'ed GPU plugin, so that airt-node starts where CUDA is absent).
#pragma once

#include <string>
#include <vector>

#include "worker/internal/node_config.h"

namespace airt::worker {

// Where the GPU plugin is looked for when --gpu-plugin is not given, relative to the running
// binary (never a checkout path): beside it, the build tree's gpu/ folder beside its own
// (build/worker/airt-node -> build/gpu/), and an install's lib/ (bin/airt-node -> lib/).
std::vector<std::string> DefaultGpuPluginPaths();

// Where the C++ worker (airt-worker) is looked for when --worker-binary is not given, relative to
// the running binary: beside it (an install's bin/), and the build tree's api/ folder beside its
// own (build/worker/airt-node -> build/api/airt-worker).
std::vector<std::string> DefaultWorkerBinaryPaths();
// The first of DefaultWorkerBinaryPaths that exists; else the first of them (starting a worker
// then fails naming it), with a log line saying where it looked.
std::string DefaultWorkerBinary();

// `path`, else the first of DefaultGpuPluginPaths that exists; "" (and a log line) when none.
std::string ChooseGpuPlugin(const std::string& path);
// The devices the plugin at `path` sees ("": ChooseGpuPlugin's), described by the driver API.
// None, and a log line saying why, when no plugin is found, it cannot be loaded, or it finds none.
std::vector<GpuDeviceInfo> DetectGpus(const std::string& path);

// The default interpreter of Python workers, as `ray start` uses the python that runs it: the
// first `python3` on $PATH (made absolute), if `python3 -c "import airt"` succeeds there within
// 30 s in this process's environment (the one workers inherit). kNotFound when there is none on
// PATH; kFailedPrecondition with its last line of output when it cannot import airt;
// kDeadlineExceeded when it does not finish.
Result<std::string> FindDefaultPython();

// The machine's facts: CPUs this process may run on (its affinity mask), physical memory,
// DetectGpus, CUDA_VISIBLE_DEVICES when set, and FindDefaultPython.
HostFacts DetectHost();

}  // namespace airt::worker
