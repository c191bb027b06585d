# The node's contract: what submitters ask a node (worker leases), what the node's workers tell
# it, and what a submitter asks a leased worker (tasks). Validated at every edge; errors travel
# as kj::Exceptions carrying a Status (common/rpc_status.h).
@0xff98bd0271597677;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("airt::proto");

using Cluster = import "cluster.capnp";

enum Language {
  cpp @0;
  python @1;
}

# A resource shape, e.g. {CPU: 1, GPU: 0.5}, optionally requiring an accelerator_type label.
struct ResourceShape {
  resources @0 :List(Cluster.Resource);
  acceleratorType @1 :Text;   # "" when any
}

# Where a worker's service listens.
struct WorkerAddress {
  workerId @0 :Data;          # 28 bytes (WorkerId)
  host @1 :Text;
  port @2 :UInt16;
  pid @3 :Int32;
}

struct LeaseGrant {
  leaseId @0 :UInt64;
  worker @1 :WorkerAddress;
  gpuIds @2 :List(UInt32);    # the worker's CUDA_VISIBLE_DEVICES, set before user code runs
}

struct LeaseReply {
  union {
    granted @0 :LeaseGrant;
    spillback @1 :Text;       # "host:port" of a node to ask instead (it has room now)
    infeasible @2 :Text;      # no node can ever hold the shape: names the shape and the totals
  }
}

interface Node {
  # Returns when a worker of `language` holding `shape` is ready for tasks of `jobId`, or when
  # the request is spilled back or found infeasible. A request that fits no node now waits in the
  # node's queue. Dropping the call cancels the request.
  # `codeSearchPath`: the job's own code (folders or libraries, ':'-separated, as the driver's
  # Config::code_search_path), which a worker started for it loads besides the node's.
  # `placed`: the head placed this request here (an actor's worker): it is granted or queued on
  # this node, never spilled back, and infeasible at once when this node can never hold it (the
  # submitter then asks the head for another node).
  # `detached`: the lease outlives its job (a detached actor's worker): when the job finishes, the
  # node leaves this lease and its worker running, and keeps the job's objects in its store until
  # that worker has exited.
  # `holder` (set when granted): the requester keeps it for as long as it holds the lease and
  # drops it only after returnWorkerLease has answered. When the node sees it dropped (released,
  # or the requester's connection broke: the process died) while the lease is still held, the
  # node returns the lease with disconnectWorker (the worker may be mid-task for a dead owner).
  # Detached leases are not returned that way: they outlive their creator.
  # `strategy`: how the node chooses where the lease runs (cluster.capnp SchedulingStrategy);
  # `spilled`: another node sent the requester here (a spillback), so a SPREAD or soft request
  # is granted here when it fits instead of being decided again.
  # `retriable`: the tasks run on it are retried, or its actor restarts, when its worker dies (the
  # node's memory monitor stops the newest retriable lease's worker first).
  requestWorkerLease @0 (shape :ResourceShape, jobId :Data, language :Language,
                         codeSearchPath :Text, placed :Bool, detached :Bool,
                         strategy :Cluster.SchedulingStrategy, spilled :Bool, retriable :Bool)
      -> (reply :LeaseReply, holder :LeaseHolder);
  # Gives the lease back. `disconnectWorker` true: the worker is unusable (its task crashed it,
  # or it was blocked too long); the node stops it instead of reusing it.
  returnWorkerLease @1 (leaseId :UInt64, disconnectWorker :Bool) -> ();
  # A worker the node started says where it serves. `workerId` is the one the node gave it.
  registerWorker @2 (worker :WorkerAddress) -> ();
  # Sends the output of this node's workers of `jobId` to `sink` from now on, a batch of lines
  # about every 100 ms, until a write to it fails. Several sinks per job are allowed.
  subscribeLogs @3 (jobId :Data, sink :LogSink) -> ();
  # Stops this node's worker `workerId` at once (SIGKILL; ray.kill of its actor) and gives its
  # lease back. `killed` false when the node has no such worker (it exited already).
  killWorker @4 (workerId :Data) -> (killed :Bool);
  # The task on worker `workerId` waits in Get or Wait (blocked true) or goes on (false). While it
  # waits, the node lends the CPUs of the worker's lease to other leases, and takes them back
  # after, even if that oversubscribes the node for a while (Ray's NotifyDirectCallTaskBlocked):
  # a task waiting for the tasks it submitted never starves them. GPUs and other resources stay
  # with the lease. Unknown workers are ignored.
  notifyWorkerBlocked @5 (workerId :Data, blocked :Bool) -> ();
  # The owner of these objects dropped its last reference: they leave this node's store (pinned
  # ones when their last pin goes, as StoreClient::Delete). Ids not here are ignored.
  freeObjects @6 (objectIds :List(Data)) -> ();
  # Placement groups, two-phase (the head calls these; docs/cluster.md "Placement groups").
  # prepareBundles takes each bundle's resources from this node's available ones, all or none:
  # kResourceExhausted naming the bundle when one does not fit now (nothing is then held). They
  # stay unusable until commitBundles turns them into the bundle's own resources, Ray's formatted
  # "<name>_group_<index>_<group hex>" and "<name>_group_<group hex>", which only leases asking
  # for those names get. cancelBundles stops the workers leased in the group's bundles here and
  # gives every prepared or committed bundle of the group back; unknown groups are ignored.
  # `indices` not empty: only those bundles of the group (a reservation of some bundles rolled
  # back, or released after the head restarted). prepareBundles of a group with bundles here
  # already adds the new ones (a bundle index held already is given back and prepared again);
  # commitBundles commits every prepared one not committed yet.
  # kFailedPrecondition: commitBundles of a group with nothing prepared here.
  prepareBundles @7 (groupId :Data, bundles :List(BundleSpec)) -> ();
  commitBundles @8 (groupId :Data) -> ();
  cancelBundles @9 (groupId :Data, indices :List(UInt32)) -> ();
  # The node's GPUs as its health checks see them (docs/gpu.md), and its cordon: `cordoned` names
  # why the node takes no new leases ("" when it does), since `cordonedSinceMs` (wall clock).
  gpuHealth @10 () -> (gpus :List(GpuHealth), cordoned :Text, cordonedSinceMs :UInt64);
  # `airt gpu return`: re-tests quarantined GPU `gpuId` and returns it to service if it passes.
  # Errors: kNotFound (no such GPU), kFailedPrecondition (not quarantined, or failed again: the
  # message says why).
  returnGpu @11 (gpuId :UInt32) -> ();
  # Why this node stopped worker `workerId` ("" when it did not: the worker exited by itself or
  # was killed on request): a quarantined GPU, or its GPU memory beyond its share, or the node's
  # memory use above its threshold (`outOfMemory`: the task fails with outOfMemory).
  workerExitReason @12 (workerId :Data) -> (reason :Text, outOfMemory :Bool);
  # The head drains this node (Head.drainNode): from now on it grants no new lease (requests
  # spill back to nodes with room, or wait for one), lets its leases run for at most `timeoutMs`,
  # then stops the workers still leased (their owners retry elsewhere, as for a node death) and
  # leaves the cluster (tells the head, exits). Drained again: the earlier deadline stands.
  # kInvalidArgument: timeoutMs 0.
  drain @13 (reason :Text, timeoutMs :UInt64) -> ();
  # Before this node leaves on purpose (idle scale-down, a drain): copies every primary copy it
  # holds to another alive node with room (the head's cluster view), which pulls it and keeps it
  # as the primary copy there, and tells each object's owner the new location (Owner.heldObjects
  # first: objects no owner references any more are not moved; then Owner.objectsMoved). Then the
  # copy here is deleted. Answers once every object is dealt with or `deadlineMs` passed (0: 60 s).
  # `moved`: objects now elsewhere; `unreferenced`: skipped, nothing references them; `failed`:
  # each object that could not be moved and why (no node with room, a dead destination or
  # owner, the deadline); those stay here, untouched. Several calls at once share one run.
  # `avoid`: Node service addresses (host:port) not to send objects to (other nodes leaving too).
  evacuateObjects @14 (deadlineMs :UInt64, avoid :List(Text))
      -> (moved :UInt64, unreferenced :UInt64, failed :List(EvacuationFailure));
  # Another node is leaving: pull each of `objects` from `fromTransfer` into this node's store
  # and keep it as the primary copy owned by `owners[i]` (owner address, host:port). `errors[i]`
  # "" when object i is here now as a primary copy, else why not (the puller's or the store's
  # words). kInvalidArgument: a malformed id, or owners not as long as objects.
  pullPrimaries @15 (fromTransfer :Text, objects :List(Data), owners :List(Text),
                     timeoutMs :UInt64) -> (errors :List(Text));
}

# One object an evacuation could not move (Node.evacuateObjects).
struct EvacuationFailure {
  objectId @0 :Data;
  reason @1 :Text;
}

# One bundle of a placement group as a node reserves it.
struct BundleSpec {
  index @0 :UInt32;
  resources @1 :List(Cluster.Resource);
}

struct GpuHealth {
  gpuId @0 :UInt32;
  uuid @1 :Text;          # "" for a declared GPU
  quarantined @2 :Bool;
  reason @3 :Text;        # the failed check, while quarantined
  sinceMs @4 :UInt64;     # wall clock of the quarantine
  checks @5 :UInt64;      # checks made so far
}

# One granted lease, tied to its requester's connection (requestWorkerLease). No methods: only
# its lifetime matters.
interface LeaseHolder {}

# Where a node sends its workers' output (a driver prints it). Each line is one line a worker
# wrote, without its newline, prefixed "(pid=<worker pid>, node=<first 8 hex of node id>) ".
interface LogSink {
  write @0 (lines :List(Text)) -> ();
}

# An argument: a value inline, an object in some node's store, or a list of such (refs nested in a
# vector): the worker passes the list as one msgpack array of the elements' values.
struct TaskArg {
  union {
    inline @0 :Data;           # msgpack (C++) or pickle (Python) bytes
    object @1 :ObjectLocation;
    list @2 :List(TaskArg);    # elements are inline or object, not lists
  }
}

struct ObjectLocation {
  objectId @0 :Data;           # 28 bytes
  transferAddress @1 :Text;    # "host:port" of the node holding it (pull from there)
  size @2 :UInt64;
  nodeAddress @3 :Text;        # "host:port" of that node's Node service (its owner frees it there)
}

struct TaskSpec {
  taskId @0 :Data;             # 24 bytes
  jobId @1 :Data;              # 4 bytes
  functionName @2 :Text;       # as registered with AIRT_REMOTE
  args @3 :List(TaskArg);
  numReturns @4 :UInt32;
  name @5 :Text;               # the user's SetName, for logs and errors
  kind @6 :TaskKind;
  actorId @7 :Data;            # 16 bytes for actor creation and actor methods; empty otherwise
  maxConcurrency @8 :UInt32;   # actor creation: methods run on this many threads (0 means 1)
  resources @9 :List(Cluster.Resource);  # what the task holds while it runs (a normal task's
                               # request; an actor creation: what the actor holds for its life)
  actorRestarts @10 :UInt32;   # actor creation: how often the actor was restarted before this
  # A streaming generator's task (a generator function or method): the worker sends each item it
  # yields to this sink as it is made, in order, and its pushTask answers one return (nil: the
  # generator finished) or the error the generator raised after the items it sent. Null: an
  # ordinary task.
  generatorSink @11 :GeneratorSink;
  # The submitter's proto::Owner service (host:port): the owner of the task's returns, which the
  # worker names when it stores them (a node that leaves tells it where they went). "" when the
  # submitter serves none (its returns then cannot be moved off a leaving node).
  ownerAddress @12 :Text;
}

enum TaskKind {
  normal @0;                   # a remote function
  actorCreation @1;            # the actor's factory: the worker keeps what it returns
  actorMethod @2;              # a method of the worker's actor
}

struct TaskReturn {
  union {
    inline @0 :Data;           # small: the serialized value itself
    object @1 :ObjectLocation; # large: put in the worker node's store as ObjectId(task, i + 1)
  }
}

# The kinds of task and object failure: the one definition airt has (C++ mirrors it value for
# value in airt::ErrorKind, api/include/airt/exceptions.h; Python reads the names from here through
# airt._airt.error_kinds()). Each kind is one exception type, C++ and Python (docs/cpp_api.md,
# docs/python.md: the error table). Kinds marked "not produced yet" have their types and their
# place in the map, waiting for the path that detects them.
enum ErrorKind {
  userException @0;               # the function raised; TaskError.data carries the exception
  functionNotFound @1;            # no such function registered in the worker
  badArguments @2;                # the arguments did not deserialize to the function's types
  cancelled @3;                   # cancelTask dropped it before it ran, or interrupted it
  workerCrashed @4;               # the worker died more times than the task may be retried
  infeasible @5;                  # no node can ever hold the task's resource shape
  unavailable @6;                 # the head, a node or a worker could not be reached
  actorDied @7;                   # the actor died before or while running the call, or is DEAD
  actorUnavailable @8;            # the actor is restarting, or cannot be reached for now
  objectLost @9;                  # every copy of the object is gone (its node lost it or died)
  ownerDied @10;                  # a borrowed object's owner died (or cannot be reached)
  objectReconstructionFailed @11; # re-running the object's task failed (not produced yet: lineage)
  objectStoreFull @12;            # the object does not fit in its node's store even after spilling
  outOfMemory @13;                # the node's memory monitor stopped the task's worker
  timeout @14;                    # a deadline passed (a get, an argument's fetch)
  runtimeEnvSetup @15;            # the task's runtime_env could not be set up in its worker
  invalidArgument @16;            # the request is malformed (ValueError-like)
  unimplemented @17;              # what airt does not build yet; the message names it
  system @18;                     # airt's own failure (Ray's RaySystemError)
  # Lineage (docs/fault_tolerance.md): the lost object's task may be re-run no more (max_retries),
  # or its lineage was released past the owner's cap (max_lineage_bytes).
  objectReconstructionFailedMaxAttemptsExceeded @19;
  objectReconstructionFailedLineageEvicted @20;
}

struct TaskError {
  functionName @0 :Text;
  message @1 :Text;            # the exception's what() or remote traceback, or why it could not run
  kind @2 :ErrorKind;
  # userException: the exception itself, for the caller to raise as its own type (a Python
  # worker's pickled exception; a C++ one's what()). Empty for other kinds.
  data @3 :Data;
}

interface Worker {
  # Runs one task and answers with its returns or the error it raised. Calls on one connection
  # run in order.
  # `copies`: the task's object arguments (list elements too) that lay on other nodes and that
  # this worker's node now holds copies of (it pulled them for the task): each names this node
  # (its transfer and Node service addresses) and the object. The submitter records them with
  # the objects' owners (Owner.addObjectLocations), so that a copy outlives its primary's node.
  pushTask @0 (task :TaskSpec) -> (returns :List(TaskReturn), error :TaskError, failed :Bool,
                                   copies :List(ObjectLocation));
  # Finishes the current task, then exits the process.
  exit @1 () -> ();
  # Cancels task `taskId` (24 bytes) of this worker: a task still queued here is dropped (its
  # pushTask answers a CANCELLED TaskError); a running one is interrupted where its language
  # allows (a Python worker raises KeyboardInterrupt in it), else it runs on. With `recursive`
  # and the task running, the normal tasks this worker submitted and has not seen finish are
  # cancelled too, with `force`. `force`: the caller kills this worker next, so the task itself
  # is left alone; only its submitted tasks are cancelled (when `recursive`). A task this worker
  # does not have (finished, or never pushed) is ignored.
  cancelTask @2 (taskId :Data, force :Bool, recursive :Bool) -> ();
}

# The owner's end of a streaming generator (TaskSpec.generatorSink). The worker sends item
# `index` (0, 1, 2, ... of one run; a retried task starts again at 0) and makes the next item only
# once the call has answered: the owner answers when the item is recorded and its consumer is
# close enough behind (the generator's back-pressure), so a slow consumer pauses the generator.
# `value` is inline, or an object put in the worker node's store as ObjectId(task, index + 2).
# An owner that already has `index` (a retry's re-run) drops the duplicate and answers at once.
# Errors: kCancelled when the stream was cancelled or ended (the worker stops the generator);
# kInvalidArgument for an index past the next one expected.
interface GeneratorSink {
  item @0 (index :UInt64, value :TaskReturn) -> ();
}

# What every core worker serves as the owner of the objects it made (its puts and its tasks'
# returns), at the owner address that travels with each reference inside a value (Ray's ownership
# protocol, docs/ownership.md). Served on the owner's core worker loop, on a port of its own.
interface Owner {
  # Worker `borrowerId` (28 bytes) holds references to `objectIds` (each a 28-byte id this owner
  # made): they are kept (in every store) until it calls removeBorrower for them or drops every
  # `lease` it got from this owner (its process died, or its connection to this owner broke).
  # `freed` lists, by index into objectIds, the objects this owner had freed already (nothing
  # holds them any more); borrowing them fails. Calls on one connection apply in order.
  addBorrower @0 (borrowerId :Data, objectIds :List(Data)) -> (lease :BorrowLease,
                                                               freed :List(UInt32));
  # The borrower lets go of `objectIds`; ids it does not borrow are ignored.
  removeBorrower @1 (borrowerId :Data, objectIds :List(Data)) -> ();
  # Where object `objectId` is, once its owner knows (waits for a task's return): its value inline
  # or its location, or the error it holds (`failed`). A freed or unknown object: `failed` with an
  # objectLost error naming it.
  getObject @2 (objectId :Data) -> (value :TaskReturn, error :TaskError, failed :Bool);
  # How far this process got in collective group `group` (collective/): the sequence number of
  # the last operation it entered (0: none yet); `left`: it has destroyed the group since.
  # `known`: false when the process never joined such a group. Read only when a rank's operation
  # passed its deadline.
  collectiveProgress @3 (group :Text) -> (known :Bool, entered :UInt64, left :Bool);
  # A node that is leaving asks which of `objectIds` (made by this owner) anything still
  # references (`held[i]`); the others it does not move.
  heldObjects @4 (objectIds :List(Data)) -> (held :List(Bool));
  # Node `fromNode` (its Node service, host:port) left or is leaving: its primary copies of
  # `objectIds` now live, as primary copies, in the store of the node whose Node service is at
  # `nodeAddress` and whose transfer service is at `transferAddress`. The owner records the new
  # location of each object it still holds whose location was `fromNode`; `held[i]` false for
  # the others (freed meanwhile, or lying elsewhere): the caller frees that copy again.
  objectsMoved @5 (fromNode :Text, objectIds :List(Data), nodeAddress :Text,
                   transferAddress :Text) -> (held :List(Bool));
  # The node whose Node service is at `nodeAddress` and whose transfer service is at
  # `transferAddress` holds secondary copies of `objectIds` (it pulled them for a reader). The
  # owner adds that node to each object's locations: readers may pull from it, and the object
  # counts as lost only once every node that held a copy died. A borrower that gets this call for
  # objects it borrows passes it on to their owner; other ids are ignored.
  # kInvalidArgument: a malformed id.
  addObjectLocations @6 (objectIds :List(Data), nodeAddress :Text, transferAddress :Text) -> ();
}

# A borrower's registration with one owner (Owner.addBorrower). No methods: when the owner sees
# the borrower's last lease dropped, it releases every object the borrower borrowed.
interface BorrowLease {}
