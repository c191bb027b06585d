"""Placement groups, as Ray's docs write them (ray.util.placement_group)."""
import ray
from ray.util.placement_group import (get_current_placement_group, placement_group,
                                      placement_group_table, remove_placement_group)
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

ray.init(num_cpus=4, resources={"accel": 2})

# Reserve two bundles on one node and wait until they are ready.
pg = placement_group([{"CPU": 1}, {"CPU": 1, "accel": 1}], strategy="STRICT_PACK")
ray.get(pg.ready(), timeout=60)
assert pg.wait(timeout_seconds=10)
print(placement_group_table(pg)["state"])


@ray.remote(num_cpus=1)
def where():
    return get_current_placement_group() is not None


@ray.remote(num_cpus=1, resources={"accel": 1})
class Worker:
    def ping(self):
        return "pong"


strategy = PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=0)
assert ray.get(where.options(scheduling_strategy=strategy).remote()) is True
assert ray.get(where.remote()) is False

worker = Worker.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
    placement_group=pg, placement_group_bundle_index=1)).remote()
assert ray.get(worker.ping.remote()) == "pong"

# A group that cannot be placed yet stays pending.
big = placement_group([{"CPU": 100}])
assert not big.wait(timeout_seconds=1)
remove_placement_group(big)

remove_placement_group(pg)
assert placement_group_table(pg)["state"] == "REMOVED"
print("placement groups OK")
