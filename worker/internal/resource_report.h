// The seam between the node's resource bookkeeping and what it tells the head. The node's
// LeaseManager (lease_manager.h) reports what its leases leave available; StaticResources, all of
// it available, serves tests of the head session.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "worker/internal/node_config.h"

namespace airt::worker {

// What one heartbeat carries.
struct ResourceReport {
  std::vector<ResourceAmount> available;
  std::vector<uint32_t> gpu_ids_in_use;
  std::vector<uint32_t> quarantined_gpu_ids;
};

// Read on the node's event loop thread, once per heartbeat.
class ResourceReporter {
 public:
  virtual ~ResourceReporter() = default;
  virtual ResourceReport Report() const = 0;
};

// Totals only: nothing is leased, nothing quarantined.
class StaticResources final : public ResourceReporter {
 public:
  explicit StaticResources(std::vector<ResourceAmount> total) : total_(std::move(total)) {}
  ResourceReport Report() const override { return {total_, {}, {}}; }

 private:
  std::vector<ResourceAmount> total_;
};

}  // namespace airt::worker
