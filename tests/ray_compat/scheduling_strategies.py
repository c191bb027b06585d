"""Scheduling strategies, as Ray's docs write them (ray.util.scheduling_strategies, label_selector,
placement_group_capture_child_tasks), on one local node."""
import ray
from ray.util.placement_group import get_current_placement_group, placement_group
from ray.util.scheduling_strategies import (In, NodeAffinitySchedulingStrategy,
                                            NodeLabelSchedulingStrategy,
                                            PlacementGroupSchedulingStrategy)

ray.init(num_cpus=4)
node = ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=1)
def where():
    return ray.get_runtime_context().get_node_id()


@ray.remote
class Actor:
    def where(self):
        return ray.get_runtime_context().get_node_id()


assert ray.get([where.options(scheduling_strategy="SPREAD").remote() for _ in range(4)]) == [node] * 4
hard = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
assert ray.get(where.options(scheduling_strategy=hard).remote()) == node
soft = NodeAffinitySchedulingStrategy(node_id="ab" * 28, soft=True)  # no such node: falls back
assert ray.get(where.options(scheduling_strategy=soft).remote()) == node
actor = Actor.options(scheduling_strategy=hard).remote()
assert ray.get(actor.where.remote()) == node

# Every node carries its id as the label ray.io/node-id.
assert ray.get(where.options(label_selector={"ray.io/node-id": node}).remote()) == node
by_label = NodeLabelSchedulingStrategy(hard={"ray.io/node-id": In(node)})
assert ray.get(where.options(scheduling_strategy=by_label).remote()) == node


@ray.remote(num_cpus=1)
def child():
    return get_current_placement_group() is not None


@ray.remote(num_cpus=1)
def parent():
    return ray.get(child.remote())


pg = placement_group([{"CPU": 1}, {"CPU": 1}])
ray.get(pg.ready(), timeout=60)
captured = PlacementGroupSchedulingStrategy(pg, placement_group_capture_child_tasks=True)
assert ray.get(parent.options(scheduling_strategy=captured).remote()) is True
assert ray.get(parent.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg)).remote()) is False
print("scheduling strategies: ok")
ray.shutdown()
