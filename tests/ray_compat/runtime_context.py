"""ray.get_runtime_context() in a driver, a task and an actor, as Ray's docs write it."""
import ray

ray.init(num_cpus=2)

context = ray.get_runtime_context()
job_id = context.get_job_id()
node_id = context.get_node_id()
assert job_id and node_id and context.get_worker_id()
assert context.get_task_id() is None and context.get_actor_id() is None
assert isinstance(context.namespace, str) and context.namespace
assert context.gcs_address
assert ray.util.get_node_ip_address()


@ray.remote
def task_context():
    c = ray.get_runtime_context()
    return c.get_job_id(), c.get_node_id(), c.get_task_id(), c.get_assigned_resources()


@ray.remote(num_cpus=0.5)
class Actor:
    def context(self):
        c = ray.get_runtime_context()
        return (c.get_actor_id(), c.get_actor_name(), c.get_assigned_resources(),
                c.was_current_actor_reconstructed, c.get_accelerator_ids()["GPU"])


job, node, task, resources = ray.get(task_context.remote())
assert (job, node) == (job_id, node_id)
assert task is not None
assert resources == {"CPU": 1.0}

actor = Actor.options(name="ctx_actor").remote()
actor_id, name, resources, restarted, gpus = ray.get(actor.context.remote())
assert actor_id and name == "ctx_actor"
assert resources == {"CPU": 0.5}
assert restarted is False and gpus == []
ray.shutdown()
print("runtime_context: ok")
