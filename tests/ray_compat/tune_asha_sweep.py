"""A Ray Tune sweep with ASHA, as Ray's docs write it (function trainable, tune.report)."""
import tempfile

import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler

ray.init(num_cpus=2)


def objective(config):
    for step in range(1, 21):
        # Best at a = 3; lower with more steps, as a training loss would be.
        loss = (config["a"] - 3) ** 2 + config["b"] + 1.0 / step
        tune.report({"loss": loss, "step": step})


storage = tempfile.mkdtemp(prefix="tune_asha_")
tuner = tune.Tuner(
    objective,
    param_space={"a": tune.grid_search([1, 2, 3, 4, 5]), "b": tune.uniform(0.0, 0.1)},
    tune_config=tune.TuneConfig(
        metric="loss",
        mode="min",
        num_samples=3,
        max_concurrent_trials=2,
        scheduler=ASHAScheduler(max_t=20, grace_period=2, reduction_factor=2),
    ),
    run_config=tune.RunConfig(name="asha", storage_path=storage, verbose=0),
)
results = tuner.fit()

assert len(results) == 15, len(results)
assert results.num_errors == 0, results.errors
best = results.get_best_result()
assert best.config["a"] == 3, best.config
assert best.metrics["training_iteration"] == 20, best.metrics
iterations = [r.metrics["training_iteration"] for r in results]
assert min(iterations) < 20, iterations  # ASHA stopped some trials early
df = results.get_dataframe()
assert len(df) == 15 and "loss" in df.columns
print("best config", best.config, "stopped early", sum(i < 20 for i in iterations))
