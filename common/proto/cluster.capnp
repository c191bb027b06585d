# The cluster's control-plane contract: what nodes, drivers and the CLI ask the head.
# Every process validates what it receives at the edge (id sizes, names, finite amounts); a bad
# message gets an error (a kj::Exception whose description starts "airt:<code>:", translated back
# into the same Status by common/rpc_status.h), never a crash.
@0xc97cdd938f993d0d;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("airt::proto");

# A named amount: "CPU", "GPU", "memory" (bytes), or a custom resource name.
struct Resource {
  name @0 :Text;
  amount @1 :Float64;
}

struct Label {
  key @0 :Text;     # e.g. "accelerator_type"
  value @1 :Text;   # e.g. "A10"
}

# What a node tells the head about itself when it registers.
struct NodeInfo {
  nodeId @0 :Data;          # 28 bytes (NodeId)
  address @1 :Text;         # the host its services listen on
  nodePort @2 :UInt16;      # its Cap'n Proto service
  transferPort @3 :UInt16;  # its object transfer service
  storeSocket @4 :Text;     # its object store's Unix socket (for local clients)
  total @5 :List(Resource);
  labels @6 :List(Label);
  gpuIds @7 :List(UInt32);  # whole GPU ids it owns
  tempDir @8 :Text;         # its temp and log folder
  pid @9 :Int32;
}

# The head's view of one node.
struct NodeStatus {
  info @0 :NodeInfo;
  alive @1 :Bool;
  available @2 :List(Resource);
  gpuIdsInUse @3 :List(UInt32);
  quarantinedGpuIds @4 :List(UInt32);
  msSinceHeartbeat @5 :UInt64;
  # Why and when (wall clock, ms since the epoch) the head declared it dead; empty and 0 while
  # alive. Kept in the head's node table, so a restarted head still shows them.
  deathCause @6 :Text;
  deathTimeMs @7 :UInt64;
  # What its last heartbeat said: the lease requests queued there, by shape, and the leases it
  # holds (docs/autoscaler.md).
  queued @8 :List(ShapeCount);
  numLeases @9 :UInt32;
  # Draining (Head.drainNode, docs/cluster.md "Draining a node"): the node takes no new leases
  # and leaves once its work is done or at `drainDeadlineMs` (wall clock, ms since the epoch);
  # why, as the drain's caller said. false, "" and 0 when not draining.
  draining @10 :Bool;
  drainReason @11 :Text;
  drainDeadlineMs @12 :UInt64;
  # Its object store as its last heartbeat saw it: the primary copies it holds (objects made
  # there, not pulled; an idle node with any is evacuated before it stops), and the bytes free
  # in its arena (where an evacuating node sends its objects).
  numPrimaryObjects @13 :UInt64;
  storeFreeBytes @14 :UInt64;
}

# A resource shape and how many requests ask for it: the autoscaler's demand.
struct ShapeCount {
  resources @0 :List(Resource);
  acceleratorType @1 :Text;  # the accelerator_type label its node must have; "" when any
  count @2 :UInt32;
}

# One bundle's label selector (request_resources' bundle_label_selectors): the labels a node must
# carry to hold it. Empty: any node.
struct BundleLabels {
  labels @0 :List(Label);
}

# A placement group no set of alive nodes holds yet: asked for whole, with its strategy.
struct PendingGroup {
  groupId @0 :Data;
  strategy @1 :PlacementStrategy;
  bundles @2 :List(Bundle);
}

# What the cluster waits for (docs/autoscaler.md "Demand"): Head.waitDemand's answer. `version`
# grows with every change the head sees to any part of it.
struct Demand {
  version @0 :UInt64;
  queued @1 :List(ShapeCount);         # the alive nodes' queued lease requests, summed by shape
  pendingActors @2 :List(ShapeCount);  # actors no alive node can hold now (placeActor waiting)
  pendingGroups @3 :List(PendingGroup);
  requested @4 :List(Bundle);          # the standing request_resources call, one per bundle
  requestedSelectors @5 :List(BundleLabels);  # by bundle index; shorter: the rest any node
}

# Given by a node to the head when it registers: the head keeps one `hold` call pending on it, and
# when that call fails (the node's connection to the head dropped: the node died or was cut off)
# the head declares the node dead at once instead of waiting for its heartbeat timeout. The node
# never answers `hold`.
interface NodeSession {
  hold @0 () -> ();
}

struct JobInfo {
  jobId @0 :Data;           # 4 bytes (JobId)
  driverPid @1 :Int32;
  driverAddress @2 :Text;
  startMs @3 :UInt64;       # wall clock, ms since the epoch
  endMs @4 :UInt64;         # 0 while running
  alive @5 :Bool;
  codeSearchPath @6 :Text;  # the libraries its workers load (':'-separated), besides the nodes'
  namespace @7 :Text;       # its driver's init(namespace=); "": the job's anonymous one
}

# An actor's life as the head's directory records it. PENDING until its constructor has run;
# RESTARTING after its process died while restarts are left; DEAD for good (killed, out of
# restarts, its constructor raised, or its job ended).
enum ActorState {
  pending @0;
  alive @1;
  restarting @2;
  dead @3;
}

# One actor in the head's directory. The head places it (placeActor: `nodeId`); the owner (the
# process that created it) leases a worker on that node, runs its constructor there and keeps this
# entry current; every other handle holder reads it to find the actor.
struct ActorInfo {
  actorId @0 :Data;          # 16 bytes (ActorId; its last 4 bytes are the job's id)
  jobId @1 :Data;            # 4 bytes
  name @2 :Text;             # "" for an unnamed actor; unique within its namespace while not DEAD
  namespace @3 :Text;
  className @4 :Text;        # the factory's registered name, e.g. "Counter::Create"
  state @5 :ActorState;
  workerAddress @6 :Text;    # "host:port" of the worker serving it, when ALIVE
  nodeAddress @7 :Text;      # "host:port" of that worker's node (its Node service)
  workerId @8 :Data;         # 28 bytes, when ALIVE
  pid @9 :Int32;             # the worker's process id, when ALIVE
  numRestarts @10 :UInt32;
  maxRestarts @11 :Int32;    # -1: without limit
  deathCause @12 :Text;      # why it is DEAD (or why it last died)
  detached @13 :Bool;        # outlives its job; only a named actor may be detached
  language @14 :UInt8;       # 0 C++, 1 Python (node.capnp's Language)
  maxTaskRetries @15 :Int32; # resends of a call in flight when its process died; -1: no limit
  resources @16 :List(Resource);  # what it holds for its life (none by default, as Ray)
  acceleratorType @17 :Text; # the accelerator_type label its node must have; "" when any
  nodeId @18 :Data;          # 28 bytes: the node placeActor chose last; empty before
  strategy @19 :SchedulingStrategy;  # how placeActor chooses its node (DEFAULT when unset)
  # The actor's creation task (node.capnp's TaskSpec as one flat Cap'n Proto message), sent by its
  # owner with the updateActor that records it ALIVE. The head keeps it (in the actor's row) to
  # restart the actor itself when its worker or node dies (docs/fault_tolerance.md "Actor
  # restarts"); getActor and listActors leave it out.
  creationTask @20 :Data;
}

# The node placeActor chose: the owner leases the actor's worker there and nowhere else.
struct ActorNode {
  nodeId @0 :Data;           # 28 bytes
  nodeAddress @1 :Text;      # "host:port" of its Node service
}

# placeActor's answer.
struct ActorPlacement {
  union {
    placed @0 :ActorNode;
    waiting @1 :Text;        # no alive node can hold it yet, but nodes may still join: ask again
    infeasible @2 :Text;     # no node can ever hold it: names the shape and each alive node's totals
  }
}

# Held by a driver for as long as its job runs: when the driver's connection drops (the driver
# exited or was killed), the head finishes the job as finishJob would.
interface JobLease {}

interface Head {
  # A node joins (or rejoins after the head restarted). Re-registering an alive id replaces its
  # entry. An id the head declared dead is refused (kFailedPrecondition naming the death's cause):
  # that node must restart clean, with a new id. `session` (may be null) lets the head see the
  # node's connection drop.
  # `heldBundles`: the placement-group bundles the node holds committed (a node re-registering
  # after the head restarted): the head releases those of groups it does not hold CREATED there,
  # and reserves again the bundles it records there that the node does not hold.
  registerNode @0 (info :NodeInfo, session :NodeSession, heldBundles :List(HeldBundles))
      -> (heartbeatIntervalMs :UInt32, nodeTimeoutMs :UInt32);
  # `known` false: the head does not know this node (it restarted, or declared the node dead):
  # the node registers again (and is refused when the head declared it dead). `jobsSeen` is the `finishedSeq` of the node's previous heartbeat
  # (0 at first); `finishedJobs` lists the jobs finished since then, whose workers the node stops.
  # The head numbers job finishes 1, 2, ... (`finishedSeq` is the last number) and answers with at
  # most the last 1024 finishes; a `jobsSeen` beyond `finishedSeq` (counted before the head
  # restarted) gets those 1024.
  heartbeat @1 (nodeId :Data, available :List(Resource), gpuIdsInUse :List(UInt32),
                quarantinedGpuIds :List(UInt32), jobsSeen :UInt64,
                queued :List(ShapeCount), numLeases :UInt32,
                numPrimaryObjects :UInt64, storeFreeBytes :UInt64)
      -> (known :Bool, finishedJobs :List(Data), finishedSeq :UInt64);
  # A node leaving cleanly (airt stop); it is shown dead at once.
  unregisterNode @2 (nodeId :Data) -> ();
  # Every node the head knows, alive or dead, in registration order. `nodeTypes`: when an
  # autoscaler runs, the node types it can launch (only `address`, the type's name, `total` and
  # `labels` set): a shape one of
  # them holds is pending demand, never infeasible (docs/autoscaler.md "Infeasible").
  clusterView @3 () -> (nodes :List(NodeStatus), nodeTypes :List(NodeInfo));

  # The internal KV: named actors, the function table, collective rendezvous. Namespaced.
  kvPut @4 (namespace :Text, key :Text, value :Data, overwrite :Bool) -> (added :Bool);
  kvGet @5 (namespace :Text, key :Text) -> (found :Bool, value :Data);
  kvDelete @6 (namespace :Text, key :Text) -> (deleted :Bool);
  kvKeys @7 (namespace :Text, prefix :Text) -> (keys :List(Text));

  # One job per driver. The job finishes at finishJob, or when the driver drops `lease` (its
  # connection closed). Finishing a job marks its non-detached actors DEAD.
  # `codeSearchPath`: the job's own code (the head's library table lists it with the job).
  # `namespace`: where the job's named actors live ("": an anonymous one); its workers read it
  # from listJobs, so that tasks and actors use their driver's namespace.
  registerJob @8 (driverPid :Int32, driverAddress :Text, codeSearchPath :Text, namespace :Text)
      -> (jobId :Data, lease :JobLease);
  finishJob @9 (jobId :Data) -> ();
  listJobs @10 () -> (jobs :List(JobInfo));

  # The actor directory. registerActor adds a PENDING actor (kAlreadyExists when its name is taken
  # in its namespace by an actor not DEAD; kFailedPrecondition when its job has finished).
  registerActor @11 (info :ActorInfo) -> ();
  # The owner's news: state, worker, restarts, death cause (id, job, name and class stay).
  # kFailedPrecondition when the actor is DEAD already (killed): the caller stops its worker.
  updateActor @12 (info :ActorInfo) -> ();
  # By id when `actorId` is set, else by name in `namespace` (only an actor not DEAD).
  # `jobAlive`: whether the actor's job still runs. The head restarts an actor whose process or
  # node died (within maxRestarts; a detached one also after its job finished), and a holder
  # waits for the directory to change.
  getActor @13 (actorId :Data, name :Text, namespace :Text)
      -> (found :Bool, info :ActorInfo, jobAlive :Bool);
  # Every actor the head knows, in registration order (those a restarted head read back from its
  # store first, by job, then actor id). A DEAD actor may be forgotten once many have died.
  listActors @14 () -> (actors :List(ActorInfo));
  # ray.kill: marks the actor DEAD with `cause` (its owner will not restart it) and returns its
  # entry, whose worker the caller then stops through that node's killWorker.
  killActor @15 (actorId :Data, cause :Text) -> (info :ActorInfo);
  # Actor placement: chooses the node for the actor's next worker (at creation and at each
  # restart) from the cluster view, records it as the actor's `nodeId`, and answers with it. Only
  # alive nodes whose totals hold the actor's resources and whose labels match its accelerator
  # type are candidates; among them those with the resources free now (the heartbeat's available,
  # less what the directory's other live actors there hold) come first, and the least loaded of
  # those wins (head/internal/actor_placement.h). `waiting`: no node fits yet, within the grace
  # period for joining nodes (counted from the actor's first placeActor); `infeasible` after it.
  # `avoidNodes`: nodes that refused this actor (unreachable, or their lease answered infeasible),
  # left out. kNotFound: no such actor. kFailedPrecondition: it is DEAD.
  placeActor @16 (actorId :Data, avoidNodes :List(Data)) -> (placement :ActorPlacement);

  # Placement groups (docs/cluster.md "Placement groups"). createPlacementGroup records the group
  # PENDING (groupId, state, bundleNodes and pendingReason are the head's: not read) and answers
  # its new id at once; the head then reserves every bundle or none, two-phase over the nodes
  # (Node.prepareBundles on each, then commitBundles; cancelBundles on every prepared one when a
  # node refuses or fails), one group at a time in creation order, and tries a pending group again
  # when a node joins, a heartbeat shows resources freed, or a group is removed.
  # kAlreadyExists: a group not REMOVED has this name in this namespace. kFailedPrecondition: the
  # job has finished.
  createPlacementGroup @17 (info :PlacementGroupInfo) -> (groupId :Data);
  # Cancels the group's bundles on their nodes (which stop the workers leased in them) and
  # records it REMOVED. kNotFound: no such group. Removing a REMOVED group does nothing.
  removePlacementGroup @18 (groupId :Data) -> ();
  # Every group the head knows, in creation order.
  listPlacementGroups @19 () -> (groups :List(PlacementGroupInfo));
  # Answers once the group is CREATED (at once when it is), with its entry; kFailedPrecondition
  # when it is or becomes REMOVED, kNotFound when unknown. Dropping the call stops the wait (the
  # client's timeout: pg.wait(timeout_seconds)).
  waitPlacementGroup @20 (groupId :Data) -> (info :PlacementGroupInfo);

  # Ray's autoscaler.sdk.request_resources: replaces the standing request (an empty one clears
  # it). Kept in the head's metadata store: a restarted head keeps it. Selector values take Ray's
  # label_selector forms ("v", "!v", "in(a,b)", "!in(a,b)"). kInvalidArgument for a bundle with a
  # negative or non-finite amount, more selectors than bundles, or a malformed selector.
  requestResources @21 (bundles :List(Bundle), labelSelectors :List(BundleLabels)) -> ();
  # The demand (docs/autoscaler.md), answered once its version is above `sinceVersion` (at once
  # when it is already; 0 always answers at once). Dropping the call stops the wait; the
  # autoscaler keeps one pending, so it hears of each change as it happens.
  waitDemand @22 (sinceVersion :UInt64) -> (demand :Demand);
  # Deletes every key of `namespace` starting with `prefix` (not empty) in one write: a collective
  # group's rendezvous keys. `deleted`: how many there were.
  kvDeletePrefix @23 (namespace :Text, prefix :Text) -> (deleted :UInt32);
  # Drains node `nodeId` (`airt drain`, a provider's preemption notice; docs/cluster.md "Draining
  # a node"): the head shows it draining with `reason` (clusterView) and places no actors or
  # bundles there, and tells the node (Node.drain), which takes no new leases, lets what runs
  # finish for at most `timeoutMs` (0: the default, 10 minutes), stops what still runs then, and
  # leaves (unregisterNode). A node drained again keeps the earlier deadline when it comes first.
  # Answers once the node took it, with the deadline (wall clock, ms since the epoch).
  # kNotFound: no such node; kFailedPrecondition: it is dead; kUnavailable: it cannot be reached
  # (then it is not shown draining).
  drainNode @24 (nodeId :Data, reason :Text, timeoutMs :UInt64) -> (deadlineMs :UInt64);
  # The cluster view's change feed (docs/cluster.md "Cluster changes"): answers once the view
  # changed after `sinceVersion` of the head incarnation `epoch`, with what changed. Every change
  # to a node's entry (it joined, died, left, its info, or what its heartbeat reports: available
  # resources, GPUs in use or quarantined, queued shapes, leases) and to the node types numbers
  # the view anew. `membershipOnly`: wake only for nodes joining, dying, leaving, starting or
  # ending a drain or changing their info, and for the node types (the answer still lists every node changed since).
  # `epoch` 0, an epoch not the head's (it restarted), or a version the head cannot answer with
  # a delta (nodes it forgot since): at once, with the full view. `maxWaitMs` (0: no limit):
  # answered with nothing changed (the same version, no nodes) once it passed, so that a client
  # tells a quiet head from a lost connection. Dropping the call stops the wait.
  waitClusterChange @25 (epoch :UInt64, sinceVersion :UInt64, membershipOnly :Bool,
                         maxWaitMs :UInt32) -> (change :ClusterChange);
}

# waitClusterChange's answer. `full`: `nodes` is the whole view (every node the head knows, in
# registration order): the client replaces its copy. Otherwise `nodes` are the entries changed
# after the asked version (in registration order; a node not in the client's copy joined since),
# and the rest of its copy stands. `msSinceHeartbeat` is as of each entry's change. `nodeTypes`
# as clusterView's, always whole. The next call passes `epoch` and `version`.
struct ClusterChange {
  epoch @0 :UInt64;
  version @1 :UInt64;
  full @2 :Bool;
  nodes @3 :List(NodeStatus);
  nodeTypes @4 :List(NodeInfo);
}

# Ray's placement strategies: PACK (as few nodes as possible, best effort), SPREAD (as many nodes
# as possible, best effort), STRICT_PACK (one node), STRICT_SPREAD (a node per bundle).
enum PlacementStrategy {
  pack @0;
  spread @1;
  strictPack @2;
  strictSpread @3;
}

# PENDING until every bundle is reserved; CREATED once all are; REMOVED for good. RESCHEDULING: a
# node holding some of its bundles died; those are reserved again (bundleNodes holds the nil id
# for each of them meanwhile), the others stay where they are.
enum PlacementGroupState {
  pending @0;
  created @1;
  removed @2;
  rescheduling @3;
}

struct Bundle {
  resources @0 :List(Resource);
}

struct PlacementGroupInfo {
  groupId @0 :Data;            # 18 bytes (PlacementGroupId)
  name @1 :Text;               # "" for an unnamed group; unique within its namespace while not REMOVED
  namespace @2 :Text;
  jobId @3 :Data;              # 4 bytes: the creator's job
  strategy @4 :PlacementStrategy;
  bundles @5 :List(Bundle);
  state @6 :PlacementGroupState;
  bundleNodes @7 :List(Data);  # CREATED: the node (28 bytes) of each bundle, by index
  detached @8 :Bool;           # lifetime="detached": outlives its job
  pendingReason @9 :Text;      # PENDING: why it is not placed yet
  infeasible @10 :Bool;        # PENDING and no set of alive nodes could ever hold it
  createMs @11 :UInt64;        # wall clock, ms since the epoch
  # Ray 2.60's bundle_label_selector: bundle i goes only on a node whose labels match entry i
  # (empty, or shorter than bundles: no constraint for the rest).
  bundleLabelSelector @12 :List(LabelSelector);
}

# A scheduling strategy (DESIGN.md "Scheduling" 3): a field of the lease requests (Node's
# requestWorkerLease) and of actors (ActorInfo), decided by the schedulers: the node's lease
# policy (worker/scheduling) for tasks, the head's actor placement for actors. A placement
# group's strategy travels as the bundle's formatted resource names (common/bundle_resources.h).
enum StrategyKind {
  default @0;       # pack onto the requester's node, then the best node with room
  spread @1;        # round robin over the nodes with room
  nodeAffinity @2;  # nodeId: hard (only there) or soft (there while it is alive and fits)
  nodeLabel @3;     # hardLabels must match; nodes that also match softLabels first
}

# Ray's label operators: In and NotIn a set of values, Exists and DoesNotExist (no values).
# NotIn and DoesNotExist match a node without the key.
enum LabelOperator {
  in @0;
  notIn @1;
  exists @2;
  doesNotExist @3;
}

struct LabelExpression {
  key @0 :Text;
  op @1 :LabelOperator;
  values @2 :List(Text);
}

# Expressions that must all hold.
struct LabelSelector {
  expressions @0 :List(LabelExpression);
}

struct SchedulingStrategy {
  kind @0 :StrategyKind;
  nodeId @1 :Data;                 # nodeAffinity: 28 bytes
  soft @2 :Bool;                   # nodeAffinity: fall back to DEFAULT when the node is gone
  spillOnUnavailable @3 :Bool;     # soft nodeAffinity: also fall back when it has no room now
  failOnUnavailable @4 :Bool;      # hard nodeAffinity: fail instead of waiting for room
  hardLabels @5 :List(LabelExpression);  # nodeLabel
  softLabels @6 :List(LabelExpression);  # nodeLabel
  # Ray 2.60's label_selector option: with any kind, only nodes whose labels match.
  labelSelector @7 :List(LabelExpression);
}

# A node's committed bundles of one placement group (Head.registerNode).
struct HeldBundles {
  groupId @0 :Data;             # 18 bytes
  indices @1 :List(UInt32);
}
