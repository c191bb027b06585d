// `airt up CLUSTER.yaml`: checks the config (a bad one fails naming the key and the reason),
// starts the head, a node of head_node_type and airt-autoscaler (which starts each type's
// min_workers and scales from there), recorded in the session like `airt start`.
// `airt down CLUSTER.yaml`: stops the autoscaler (which stops the nodes it launched), the nodes
// and the head started here. Both take --temp-dir.
#pragma once

namespace airt::cli {

int UpCommand(int argc, char** argv);
int DownCommand(int argc, char** argv);

}  // namespace airt::cli
