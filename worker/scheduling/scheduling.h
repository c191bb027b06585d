// The node daemon's scheduling core (DESIGN.md "Scheduling", level 1): resource amounts and
// shapes, the node's resources and GPU ids, and what the node decides for a lease request:
// grant it here, spill it back to a better node, queue it, or fail it as infeasible.
//
// Pure and deterministic: no RPC, no threads, no clock (time comes in as arguments). Decisions
// are values; the daemon applies them (Acquire, reply, send a spillback) and tests read them the
// same way. Nothing here is thread-safe: it all belongs to the node daemon's event loop.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <set>
#include <variant>
#include <vector>

#include "common/ids.h"
#include "common/scheduling_strategy.h"
#include "common/status.h"

namespace airt::worker::scheduling {

namespace internal {
class GpuIdPool;
}  // namespace internal

using sched::SchedulingStrategy;
using sched::StrategyKind;

inline constexpr std::string_view kCpu = "CPU";
inline constexpr std::string_view kGpu = "GPU";
inline constexpr std::string_view kMemory = "memory";  // bytes
// The node label a shape's accelerator_type must match, e.g. accelerator_type=A10.
inline constexpr std::string_view kAcceleratorType = "accelerator_type";
// Ray's node label key that a shape's accelerator_type is matched against.
inline constexpr std::string_view kAcceleratorTypeLabel = "ray.io/accelerator-type";

// An exact amount of one resource, in units of 1/10000 as Ray's FixedPoint, so that 0.1 + 0.2
// adds up to 0.3. Sums saturate instead of overflowing.
class Amount {
 public:
  static constexpr int64_t kUnitsPerWhole = 10000;
  static constexpr int64_t kMaxWhole = 100'000'000'000'000;  // 1e14: ~91 TiB of memory in bytes

  constexpr Amount() = default;
  static constexpr Amount Units(int64_t units) { return Amount(units); }
  static constexpr Amount Whole(int64_t n) { return Amount(n * kUnitsPerWhole); }

  constexpr int64_t units() const { return units_; }
  constexpr bool IsZero() const { return units_ == 0; }
  constexpr bool IsWhole() const { return units_ % kUnitsPerWhole == 0; }
  double ToDouble() const { return static_cast<double>(units_) / kUnitsPerWhole; }
  // "1", "0.5", "1073741824", "0.0001": no trailing zeros.
  std::string ToString() const;

  friend Amount operator+(Amount a, Amount b);
  friend Amount operator-(Amount a, Amount b);
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy misreads the defaulted comparison
  friend constexpr auto operator<=>(Amount a, Amount b) = default;

 private:
  constexpr explicit Amount(int64_t units) : units_(units) {}
  int64_t units_ = 0;
};

// Named, non-negative amounts: "CPU", "GPU", "memory" (bytes) and custom names. A zero amount is
// never stored, so two sets that hold the same amounts compare equal.
class ResourceSet {
 public:
  ResourceSet() = default;

  // Validated: kInvalidArgument naming the resource and the whole set when a name is empty or
  // holds a space, a control character or one of ",{}", or is "accelerator_type"; when an amount
  // is negative, NaN or infinite, above Amount::kMaxWhole, or positive but below 0.0001; when
  // memory is not a whole number of bytes; when GPU is above 1 and not whole (0.5 and 2 are
  // fine, 1.5 is not). Zero amounts are accepted and dropped, as Ray does for num_gpus=0.
  static Result<ResourceSet> FromDoubles(const std::map<std::string, double>& amounts);
  // The ToString form, braces optional: "{CPU: 1, GPU: 0.5}", "CPU: 1", "{}", "". Same checks.
  static Result<ResourceSet> Parse(std::string_view text);

  // 0 when absent.
  Amount Get(std::string_view name) const;
  bool empty() const { return amounts_.empty(); }
  const std::map<std::string, Amount, std::less<>>& amounts() const { return amounts_; }

  // Whether every amount here is at most the one in `capacity`.
  bool FitsIn(const ResourceSet& capacity) const;
  void Add(const ResourceSet& other);
  // kResourceExhausted, and no change, when `other` holds more of some resource than this.
  Status Subtract(const ResourceSet& other);

  // "{CPU: 1, GPU: 0.5, memory: 1073741824}": CPU, GPU, memory, then other names in order.
  std::string ToString() const;
  friend bool operator==(const ResourceSet&, const ResourceSet&) = default;

 private:
  friend class NodeResources;
  void SetUnchecked(std::string_view name, Amount amount);  // drops the name at zero

  std::map<std::string, Amount, std::less<>> amounts_;
};

// What a lease asks for: amounts, and optionally the accelerator_type a node must be labelled
// with. Always valid (built only through the checks below).
class ResourceShape {
 public:
  ResourceShape() = default;  // {}: fits any node

  // ResourceSet's checks, and kInvalidArgument for an accelerator_type that is not a plain name
  // (letters, digits, "-_.:" only).
  static Result<ResourceShape> Make(ResourceSet amounts, std::string accelerator_type = "");
  static Result<ResourceShape> FromDoubles(const std::map<std::string, double>& amounts,
                                           std::string accelerator_type = "");
  // "{CPU: 1, GPU: 1, accelerator_type: A10}", braces optional.
  static Result<ResourceShape> Parse(std::string_view text);

  const ResourceSet& amounts() const { return amounts_; }
  const std::string& accelerator_type() const { return accelerator_type_; }  // "": any

  // ResourceSet's form, with ", accelerator_type: A10" before the closing brace when named.
  std::string ToString() const;
  friend bool operator==(const ResourceShape&, const ResourceShape&) = default;

 private:
  ResourceSet amounts_;
  std::string accelerator_type_;
};

using Labels = std::map<std::string, std::string, std::less<>>;

// A CUDA device index on one node, as CUDA_VISIBLE_DEVICES names it.
using GpuId = uint32_t;

// Resources a NodeResources handed out. Give it back with Release, once.
struct Allocation {
  uint64_t id = 0;             // unique within the NodeResources that made it
  ResourceSet resources;       // the shape's amounts
  std::vector<GpuId> gpu_ids;  // ascending; one id for a fractional GPU request

  // The value of CUDA_VISIBLE_DEVICES for the worker: "2,3"; "" without GPUs.
  std::string CudaVisibleDevices() const;
};

// One GPU id with a share held.
struct GpuIdUsage {
  GpuId id = 0;
  Amount used;  // 1 for a whole assignment, else the sum of the fractional shares
  friend bool operator==(const GpuIdUsage&, const GpuIdUsage&) = default;
};

// A node's resources at one moment, for `airt status`, the dashboard, the head and tests.
struct NodeResourcesSnapshot {
  ResourceSet total;      // schedulable: quarantined GPU ids are left out
  ResourceSet available;  // free now
  Labels labels;
  std::vector<GpuIdUsage> gpus_in_use;  // ascending by id
  std::vector<GpuId> quarantined_gpus;  // ascending
  size_t num_allocations = 0;
};

// One node's resources: totals, labels and GPU ids, and what is held. A value type: copying it
// copies the accounting (LeaseQueue tries its grants on a copy). A moved-from one may only be
// assigned to or destroyed.
class NodeResources {
 public:
  // `totals` holds CPU, memory and custom amounts, and GPU whole. GPU ids are `gpu_ids` when
  // given (distinct), else 0..GPU-1; when both are given their counts must agree.
  // kInvalidArgument otherwise, or for a label with an empty name.
  static Result<NodeResources> Create(ResourceSet totals, std::vector<GpuId> gpu_ids = {},
                                      Labels labels = {});

  NodeResources(const NodeResources& other);
  NodeResources& operator=(const NodeResources& other);
  NodeResources(NodeResources&&) noexcept;
  NodeResources& operator=(NodeResources&&) noexcept;
  ~NodeResources();

  // Whether Acquire(shape) would succeed now: the label matches, the amounts are free and the
  // GPU ids can be assigned.
  bool FitsNow(const ResourceShape& shape) const;
  // Whether the shape fits this node's schedulable totals (quarantined GPUs left out): it could
  // run here once enough is released.
  bool CouldEverFit(const ResourceShape& shape) const;

  // Takes the shape's resources and GPU ids. kResourceExhausted: not free now, wait for a
  // Release. kFailedPrecondition: it can never fit this node (label, or more than the totals).
  Result<Allocation> Acquire(const ResourceShape& shape);
  // Gives back everything `allocation` took. kNotFound when it is not held here (released
  // twice, or from another node); kInvalidArgument when it differs from what Acquire returned.
  Status Release(const Allocation& allocation);
  // While the worker holding allocation `id` waits in Get, its CPUs go back to the available
  // pool (lent true); they are taken back when it goes on (lent false). What is not available
  // then is owed, and repaid from the next CPUs released, before anything else may use them, so
  // that nothing reported ever goes negative. Lending twice, or taking back what is not lent,
  // changes nothing. kNotFound when `id` is not held.
  Status LendCpus(uint64_t id, bool lent);

  // A failed health check takes `gpu_id` out of the schedulable set; shares held on it stay held
  // until released and are then not reused. Restore puts it back. kNotFound: no such id.
  Status QuarantineGpu(GpuId gpu_id);
  Status RestoreGpu(GpuId gpu_id);

  // A placement-group bundle committed here: `extra` joins the totals and the free amounts.
  // kInvalidArgument for CPU, GPU or memory (a bundle's own names are formatted custom ones).
  Status AddResources(const ResourceSet& extra);
  // Takes what AddResources added back out of the totals and the free amounts (held shares of it
  // stay held until released, then vanish). kInvalidArgument as AddResources.
  Status RemoveResources(const ResourceSet& extra);

  ResourceSet Total() const;      // schedulable
  ResourceSet Available() const;  // free now
  const Labels& labels() const { return labels_; }
  NodeResourcesSnapshot Snapshot() const;

 private:
  NodeResources();

  ResourceSet totals_;     // all but GPU
  ResourceSet available_;  // all but GPU; GPU comes from gpus_
  Labels labels_;
  std::unique_ptr<internal::GpuIdPool> gpus_;
  // CPUs coming back to available_: the debt first.
  void ReturnCpus(Amount cpus);

  std::map<uint64_t, Allocation> held_;
  std::set<uint64_t> lent_;  // allocations whose CPUs are lent back (LendCpus)
  Amount cpu_debt_;          // CPUs taken back beyond what was available
  uint64_t next_allocation_id_ = 1;
};

// Another node as the head's resource view shows it.
struct NodeView {
  NodeId id;
  bool alive = true;
  ResourceSet total;
  ResourceSet available;
  Labels labels;
};

// Every registered node; it may include the local node, which the policy then skips in favour
// of its own NodeResources.
struct ClusterView {
  std::vector<NodeView> nodes;
  // The node types an autoscaler can launch (total and labels set): a shape one holds waits for
  // it, never infeasible (docs/autoscaler.md "Infeasible").
  std::vector<NodeView> node_types;
};

using TimePoint = std::chrono::steady_clock::time_point;
using Duration = std::chrono::steady_clock::duration;

struct LeaseRequest {
  uint64_t id = 0;  // the caller's; unique among queued requests
  ResourceShape shape;
  // When the infeasible grace period starts: the request's arrival, or the cluster's start when
  // the caller counts it from there.
  TimePoint waiting_since;
  // The head placed it on this node (an actor's worker): it is granted here or queued here, never
  // spilled back, and Infeasible at once when this node's totals can never hold it.
  bool placed = false;
  // How to choose its node (common/scheduling_strategy.h); LeasePolicy says what each kind does.
  SchedulingStrategy strategy{};
  // Another node spilled it here: granted here when it fits (no hybrid threshold, no new SPREAD
  // turn), else decided as usual.
  bool spilled = false;
};

// The decisions. Run it here now: the caller Acquires the shape (which then succeeds).
struct GrantLocally {};
// Ask `node`, which has it free now (the best such alive node in the view). The view is the
// head's, a little stale and without per-id GPU detail, so that node decides again.
struct SpillBack {
  NodeId node;
};
// Wait here. `feasible`: some node's totals fit it, so a release or a view change can start it;
// else no node can run it yet and the grace period for joining nodes has not ended.
struct QueueLocally {
  bool feasible = true;
  std::string reason;  // names the shape
};
// No node can ever run it: fail it. `message` names the shape and every alive node's totals.
struct Infeasible {
  std::string message;
};
using LeaseDecision = std::variant<GrantLocally, SpillBack, QueueLocally, Infeasible>;

// "grant", "spill back to 1a2b3c4d", "queue (...)", "infeasible (...)": for logs and tests.
std::string ToString(const LeaseDecision& decision);

struct LeasePolicyOptions {
  NodeId local_node;  // this node, skipped when it appears in the view
  // How long an unrunnable request waits, from its waiting_since, for a node that can run it to
  // register before it is Infeasible.
  Duration infeasible_grace = std::chrono::seconds(10);
  // DEFAULT's hybrid policy (Ray's scheduler_spread_threshold): the local node is preferred while
  // its utilization of the requested resources is below this; past it, the least utilized node
  // with the shape free wins (the local node on a tie).
  double spread_threshold = 0.5;
};

// What the node does with a lease request. Only nodes whose labels match the request's hard
// constraints are candidates (its accelerator_type, its label_selector, a NodeLabel strategy's
// hard expressions); the first of these steps that applies decides:
//  - placed by the head: granted here, else queued if this node's totals fit it, else Infeasible
//    (the head chose from a view that was wrong about this node).
//  - NodeAffinity to this node: granted, else queued (Infeasible at once with
//    fail_on_unavailable), Infeasible when this node can never hold it; soft: decided as DEFAULT
//    instead when this node can never hold it (or, with spill_on_unavailable, is full now).
//  - NodeAffinity to another node: spilled back to it when alive and its totals fit; a dead node
//    is Infeasible at once naming it, an unknown one after the grace period; soft: DEFAULT when
//    the node is dead, unknown or too small (or full now, with spill_on_unavailable).
//  - SPREAD (not spilled): the next candidate, round robin by node id, that has the shape free
//    now: granted when that is this node, else spilled back to it.
//  - DEFAULT (and NodeLabel, whose soft expressions' nodes come first): Ray's hybrid policy over
//    the candidates with the shape free now, this node first: a node's score is its utilization
//    of the requested resources (0 while below spread_threshold), the lowest wins; a spilled
//    request is granted here whenever it fits.
//  - Nothing free anywhere: queued if some alive candidate's totals fit it; else queued until
//    the grace period ends, and then Infeasible naming the shape, the constraints and the nodes.
class LeasePolicy {
 public:
  explicit LeasePolicy(const LeasePolicyOptions& options) : options_(options) {}

  LeaseDecision Decide(const LeaseRequest& request, const NodeResources& local,
                       const ClusterView& view, TimePoint now) const;
  const LeasePolicyOptions& options() const { return options_; }

 private:
  LeaseDecision DecideAffinity(const LeaseRequest& request, const NodeResources& local,
                               const ClusterView& view, TimePoint now) const;
  LeaseDecision DecideAmong(const LeaseRequest& request, const NodeResources& local,
                            const ClusterView& view, TimePoint now) const;

  LeasePolicyOptions options_;
  // SPREAD's round-robin position; advances with every SPREAD decision.
  mutable uint64_t spread_next_ = 0;
};

// A queued request that has left the queue; `decision` is never QueueLocally.
struct DispatchedLease {
  LeaseRequest request;
  LeaseDecision decision;
};

// Queued shapes for `airt status`: one entry per shape, oldest first.
struct QueuedShape {
  ResourceShape shape;
  size_t count = 0;
  TimePoint oldest_waiting_since;
};

// The requests the policy queued, FIFO per shape: a request is never dispatched before an
// earlier one of the same shape. Shapes do not block each other, and requests the head placed
// here queue apart from those of the same shape that may spill back.
class LeaseQueue {
 public:
  explicit LeaseQueue(const LeasePolicy& policy) : policy_(policy) {}

  // Decides a new request and queues it when the decision is QueueLocally. Behind queued
  // requests of the same shape it is queued whatever the policy says (FIFO), unless it is
  // Infeasible. Call Dispatch after each release and view change, so that queued requests see
  // freed resources before new ones. kAlreadyExists when a request with this id is queued.
  Result<LeaseDecision> Submit(LeaseRequest request, const NodeResources& local,
                               const ClusterView& view, TimePoint now);
  // Queues a request the caller decided to queue. kAlreadyExists as Submit.
  Status Enqueue(LeaseRequest request);
  // kNotFound when no request with this id is queued.
  Status Cancel(uint64_t request_id);

  // Decides again, in arrival order, after a release, a view change or a grace period's end.
  // Returns the requests that leave the queue: granted, spilled or infeasible. It tries each
  // grant on a copy of `local` and each spillback against a copy of `view`, so applying the
  // grants in order with local.Acquire succeeds, and no node is sent more than it has free.
  std::vector<DispatchedLease> Dispatch(const NodeResources& local, const ClusterView& view,
                                        TimePoint now);
  // The earliest end of a grace period after `now`, when Dispatch may turn a request
  // Infeasible; nullopt when none is pending.
  std::optional<TimePoint> NextGraceEnd(TimePoint now) const;

  size_t size() const { return size_; }
  std::vector<QueuedShape> Snapshot() const;

 private:
  struct Entry {
    uint64_t seq = 0;  // arrival order
    LeaseRequest request;
  };
  LeasePolicy policy_;
  // Keyed by shape.ToString(), with "placed " before it for requests the head placed and the
  // strategy after it when it is not DEFAULT.
  std::map<std::string, std::deque<Entry>> by_shape_;
  uint64_t next_seq_ = 0;
  size_t size_ = 0;
};

}  // namespace airt::worker::scheduling
