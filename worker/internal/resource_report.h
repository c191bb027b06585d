// The seam between the node's resource bookkeeping and what it tells the head. The node's
// LeaseManager (lease_manager.h) reports what its leases leave available; StaticResources, all of
// it available, serves tests of the head session.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "worker/internal/node_config.h"

namespace airt::worker {

// Lease requests queued on the node with one shape: the autoscaler's demand.
struct QueuedDemand {
  std::vector<ResourceAmount> resources;
  std::string accelerator_type;  // "": any
  uint32_t count = 0;
};

// The committed bundles of one placement group on this node.
struct HeldBundles {
  PlacementGroupId group;
  std::vector<uint32_t> indices;
};

// What one heartbeat carries (held_bundles: what a registration carries too).
struct ResourceReport {
  std::vector<ResourceAmount> available;
  std::vector<uint32_t> gpu_ids_in_use;
  std::vector<uint32_t> quarantined_gpu_ids;
  std::vector<QueuedDemand> queued;  // by shape
  uint32_t num_leases = 0;
  uint64_t num_primary_objects = 0;  // primary copies in the node's store
  uint64_t store_free_bytes = 0;     // free in its store's arena
  std::vector<HeldBundles> held_bundles;
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
  ResourceReport Report() const override {
    ResourceReport report;
    report.available = total_;
    return report;
  }

 private:
  std::vector<ResourceAmount> total_;
};

}  // namespace airt::worker
