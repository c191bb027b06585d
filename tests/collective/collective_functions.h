// The actor of the end-to-end collective tests (collective_functions.cc): one rank of a group
// per actor, so that each rank has a worker process of its own (tasks of one shape may be
// pipelined onto one leased worker, where the ranks would wait on each other).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "airt/collective.h"

class Rank {
 public:
  static Rank* Create();
  // Every operation, type and op up to 64 KiB: "" when all agreed, else the first error.
  std::string Sweep(int world, int rank, std::string group);
  // A float32 SUM allreduce of `mib` MiB through the public API: the first and last element.
  std::vector<float> BigAllreduce(int world, int rank, int mib);
  // One allreduce, then a second that rank `skipper` never calls (it keeps the group, so its
  // progress stays readable). The others return their error's message ("" if it succeeded).
  std::string Skip(int world, int rank, int skipper, int timeout_ms);

 private:
  std::vector<std::unique_ptr<airt::collective::Group>> kept_;
};
