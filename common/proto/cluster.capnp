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
}

struct JobInfo {
  jobId @0 :Data;           # 4 bytes (JobId)
  driverPid @1 :Int32;
  driverAddress @2 :Text;
  startMs @3 :UInt64;       # wall clock, ms since the epoch
  endMs @4 :UInt64;         # 0 while running
  alive @5 :Bool;
}

interface Head {
  # A node joins (or rejoins after the head forgot it). Re-registering an id replaces its entry.
  registerNode @0 (info :NodeInfo) -> (heartbeatIntervalMs :UInt32, nodeTimeoutMs :UInt32);
  # `known` false: the head does not know this node (it restarted, or declared the node dead):
  # the node registers again.
  heartbeat @1 (nodeId :Data, available :List(Resource), gpuIdsInUse :List(UInt32),
                quarantinedGpuIds :List(UInt32)) -> (known :Bool);
  # A node leaving cleanly (airt stop); it is shown dead at once.
  unregisterNode @2 (nodeId :Data) -> ();
  # Every node the head knows, alive or dead, in registration order.
  clusterView @3 () -> (nodes :List(NodeStatus));

  # The internal KV: named actors, the function table, collective rendezvous. Namespaced.
  kvPut @4 (namespace :Text, key :Text, value :Data, overwrite :Bool) -> (added :Bool);
  kvGet @5 (namespace :Text, key :Text) -> (found :Bool, value :Data);
  kvDelete @6 (namespace :Text, key :Text) -> (deleted :Bool);
  kvKeys @7 (namespace :Text, prefix :Text) -> (keys :List(Text));

  # One job per driver.
  registerJob @8 (driverPid :Int32, driverAddress :Text) -> (jobId :Data);
  finishJob @9 (jobId :Data) -> ();
  listJobs @10 () -> (jobs :List(JobInfo));
}
