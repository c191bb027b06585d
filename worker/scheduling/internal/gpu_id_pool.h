// Which of a node's whole GPU ids each lease holds. Part of NodeResources; tested on its own.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling::internal {

// A node's GPU ids and the share of each that is held. A whole request (GPU n, n >= 1) takes n
// ids nobody holds any part of; a fractional request (0 < g < 1) takes a share of one id that no
// whole request holds, as long as the shares on that id sum to at most 1. So an id is held
// either by one whole request or by fractional shares, never both. A quarantined id is given to
// nobody until it is restored; shares already held on it stay held until released.
// Not thread-safe: owned by one event loop.
class GpuIdPool {
 public:
  struct IdState {
    GpuId id = 0;
    Amount used;         // 1 when held whole; else the sum of fractional shares
    bool whole = false;  // held by one whole request
    bool quarantined = false;
  };

  GpuIdPool() = default;
  // `ids` are distinct (the caller checked); kept in ascending order.
  explicit GpuIdPool(std::vector<GpuId> ids);

  // Whether Assign(gpu) would succeed now.
  bool CanAssign(Amount gpu) const;
  // The ids for a request of `gpu` GPUs, ascending; {} for 0. The caller checked that `gpu` is
  // 0 < gpu < 1 or whole. Whole requests take the lowest free ids; a fractional one takes the
  // fullest id it still fits on (lowest id on a tie), which keeps whole ids free.
  // kResourceExhausted (and no change) when the ids are not free now.
  Result<std::vector<GpuId>> Assign(Amount gpu);
  // Gives back what Assign(gpu) returned. kInvalidArgument, and no change, when `ids` are not
  // held that way (a double release).
  Status Release(const std::vector<GpuId>& ids, Amount gpu);

  // Takes `id` out of (or puts it back into) the schedulable set. kNotFound: no such id.
  Status Quarantine(GpuId id);
  Status Restore(GpuId id);

  Amount Schedulable() const;  // ids not quarantined, as whole GPUs
  Amount Available() const;    // unheld shares of the ids not quarantined
  const std::vector<IdState>& ids() const { return ids_; }

 private:
  IdState* Find(GpuId id);

  std::vector<IdState> ids_;  // ascending by id
};

}  // namespace airt::worker::scheduling::internal
