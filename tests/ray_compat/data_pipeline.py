"""A Ray Data pipeline, as Ray's docs write it: transforms, an actor-pool map, aggregates,
parquet out and back, and batches for a training loop."""
import tempfile

import numpy as np
import ray

ray.init(num_cpus=4)  # the actor pool below takes 2; the read keeps the others

ds = ray.data.range(10_000)
ds = ds.map_batches(lambda batch: {"id": batch["id"], "square": batch["id"] ** 2})
ds = ds.filter(lambda row: row["id"] % 2 == 0)
assert ds.count() == 5_000
assert ds.sum("square") == sum(i * i for i in range(0, 10_000, 2))


class AddOne:
    def __init__(self):
        self.offset = 1  # where a model would be loaded, once per actor

    def __call__(self, batch):
        batch["pred"] = batch["id"] + self.offset
        return batch


predictions = ds.map_batches(AddOne, concurrency=2, batch_size=256)
rows = predictions.take_all()
assert len(rows) == 5_000
assert all(r["pred"] == r["id"] + 1 for r in rows)

folder = tempfile.mkdtemp(prefix="data_pipeline_")
predictions.write_parquet(folder)
back = ray.data.read_parquet(folder)
assert back.count() == 5_000
assert sorted(back.columns()) == ["id", "pred", "square"]

items = ray.data.from_items([{"k": i % 3, "v": i} for i in range(30)])
counts = {r["k"]: r["count()"] for r in items.groupby("k").count().take_all()}
assert counts == {0: 10, 1: 10, 2: 10}, counts

seen = 0
for batch in back.iter_batches(batch_size=512, batch_format="numpy"):
    assert isinstance(batch["id"], np.ndarray)
    seen += len(batch["id"])
assert seen == 5_000

train, test = back.train_test_split(test_size=0.2)
assert train.count() == 4_000 and test.count() == 1_000
print("ok", seen)
