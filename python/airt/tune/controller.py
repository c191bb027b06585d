"""The tuner's loop: asks the search algorithm for configs, runs each trial on an airt actor of
its own resources, hands every result to the scheduler and acts on its decision, retries failed
trials from their checkpoints, writes the experiment folder, and draws the progress table."""

import json
import math
import os
import sys
import time
import uuid

import airt
from airt.tune import experiment as ex
from airt.tune._runner import TrialRunner
from airt.tune.config import CheckpointConfig, FailureConfig, Stopper
from airt.tune.experiment import ERROR, PAUSED, PENDING, RUNNING, TERMINATED, Trial
from airt.tune.progress import ProgressTable, plot, summary
from airt.tune.result import ResultGrid, TuneError
from airt.tune.schedulers import FIFOScheduler, TrialScheduler
from airt.tune.search import BasicVariantGenerator, Searcher
from airt.tune.trainable import (Trainable, bundle_actor_options, pickle_trainable,
                                 placement_group_factory_of, resources_of)

_STATE_EVERY_S = 1.0


def trainable_name(trainable):
    return getattr(trainable, "__name__", type(trainable).__name__)


class TuneController:
    def __init__(self, trainable, param_space, tune_config, run_config, experiment_path,
                 searcher, scheduler, trials=(), out=None):
        self.trainable = trainable
        self.param_space = param_space or {}
        self.tc = tune_config
        self.rc = run_config
        self.path = experiment_path
        self.searcher = searcher
        self.scheduler = scheduler
        self.trials = list(trials)
        self.by_id = {t.trial_id: t for t in self.trials}
        self.failure = run_config.failure_config or FailureConfig()
        self.ckpt = run_config.checkpoint_config or CheckpointConfig()
        self.callbacks = list(run_config.callbacks or [])
        self.metric, self.mode = tune_config.metric, tune_config.mode
        self.is_class = isinstance(trainable, type) and issubclass(trainable, Trainable)
        reuse = tune_config.reuse_actors
        self.reuse = (not self.is_class) if reuse is None else (reuse and not self.is_class)
        self.basic = isinstance(searcher, BasicVariantGenerator)
        self.searcher_finished = False
        self.created = len(self.trials)
        self.pool = {}        # resource shape -> idle runner actors (reuse_actors)
        self.iteration = 0
        self.stop_all = False
        self.out = out or sys.stdout
        self.table = ProgressTable(self.metric, self.mode, out=self.out,
                                   interval_s=run_config.progress_interval_s)
        self._runner_class = airt.remote(TrialRunner)
        self._trainable_pickle = pickle_trainable(trainable)
        self._last_state = 0.0
        self._capacity = {}

    # ---- the loop ----------------------------------------------------------------------------
    def run(self):
        started = time.time()
        os.makedirs(self.path, exist_ok=True)
        for cb in self.callbacks:
            cb.setup(stop=self.rc.stop, num_samples=self.tc.num_samples)
        for t in self.trials:  # a restored sweep's unfinished trials
            if t.status in (PENDING, PAUSED):
                self.scheduler.on_trial_add(t)
        budget = self.tc.time_budget_s
        while True:
            self.iteration += 1
            if budget is not None and time.time() - started > budget and not self.stop_all:
                self._say(f"time_budget_s of {budget} s passed: stopping the sweep")
                self.stop_all = True
            if self.stop_all:
                for t in self.trials:
                    if t.status in (RUNNING, PAUSED):
                        self._stop(t, early=True)
                    elif t.status == PENDING:  # never started: ended with the sweep
                        t.status, t.stopped_early = TERMINATED, True
            else:
                self._add_trials()
                self._launch_pending()
            running = [t for t in self.trials if t.status == RUNNING and t.inflight is not None]
            if not running:
                if self._idle():
                    break
                continue
            refs = [t.inflight for t in running]
            ready, _ = airt.wait(refs, num_returns=1, timeout=0.25)
            if ready and len(refs) > 1:
                ready, _ = airt.wait(refs, num_returns=len(refs), timeout=0)
            ready = set(ready)
            for t in running:
                if t.inflight in ready:
                    self._collect(t)
            self._tick()
        self._save_state(force=True)
        plot_path = None
        if self.metric:
            name = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.metric)
            plot_path = plot(self.trials, self.metric, os.path.join(self.path, f"{name}.png"))
        self._kill_actors()
        for cb in self.callbacks:
            cb.on_experiment_end(trials=self.trials)
        grid = ResultGrid(self.trials, self.path, self.metric, self.mode)
        if self.rc.verbose:
            self.table.maybe_print(self.trials, force=True)
            best = None
            if self.metric and self.mode:
                try:
                    best = grid._trials[list(grid).index(grid.get_best_result())]
                except (RuntimeError, ValueError):
                    best = None
            self._say(summary(self.trials, best, self.metric, plot_path, time.time() - started))
        return grid

    def _idle(self):
        """Nothing in flight: done, or wake paused trials the scheduler left waiting."""
        self._apply_actions()  # a trial's end may have released paused ones
        live = [t for t in self.trials if t.status in (RUNNING, PENDING, PAUSED)]
        if not live and (self.searcher_finished or self.stop_all):
            return True
        if not any(t.status in (RUNNING, PENDING) for t in live) and live:
            if self.searcher_finished or self.stop_all:
                self.scheduler.on_search_finished()
                self._apply_actions()
                if not any(t.status == RUNNING for t in self.trials):
                    for t in live:  # a bracket that can no longer complete: let them run on
                        self._resume(t)
                    self.scheduler.on_search_finished()
        if not any(t.status in (RUNNING, PENDING, PAUSED) for t in self.trials):
            return self.searcher_finished or self.stop_all
        if not any(t.status == RUNNING and t.inflight is not None for t in self.trials):
            time.sleep(0.01)  # waiting on the searcher (e.g. a ConcurrencyLimiter)
        return False

    def _tick(self):
        if self.rc.verbose:
            self.table.maybe_print(self.trials)
        self._save_state()

    def _say(self, text):
        self.out.write(text + "\n")
        self.out.flush()

    # ---- trials ------------------------------------------------------------------------------
    def _live(self):
        return sum(1 for t in self.trials if t.status == RUNNING)

    def _limit(self, trial):
        cap = self.tc.max_concurrent_trials or math.inf
        options = resources_of(self.trainable, trial.config)
        key = _shape_key(options)
        if key not in self._capacity:
            self._capacity[key] = _fits(options, airt.cluster_resources())
        return min(cap, self._capacity[key])

    def _add_trials(self):
        if self.searcher_finished:
            return
        while True:
            pending = sum(1 for t in self.trials if t.status == PENDING)
            if not self.basic and pending:
                return
            if self.tc.num_samples != -1 and not self.basic and \
                    self.created >= self.tc.num_samples:
                self._finish_search()
                return
            if not self.basic and self.trials and self._live() >= self._limit(self.trials[-1]):
                return
            trial_id = f"{uuid.uuid4().hex[:5]}_{self.created + 1:05d}"
            config = self.searcher.suggest(trial_id)
            if config is None:
                return
            if config == Searcher.FINISHED:
                self._finish_search()
                return
            self.created += 1
            name = trainable_name(self.trainable)
            t = Trial(trial_id, name, config, self.path, self.created)
            if self.tc.trial_dirname_creator:
                t.local_path = os.path.join(self.path, str(self.tc.trial_dirname_creator(t)))
            self.trials.append(t)
            self.by_id[trial_id] = t
            self.scheduler.on_trial_add(t)

    def _finish_search(self):
        if not self.searcher_finished:
            self.searcher_finished = True
            self.scheduler.on_search_finished()

    def _launch_pending(self):
        for t in self.trials:
            if t.status != PENDING:
                continue
            if self._live() >= self._limit(t):
                return
            self._launch(t)

    def _launch(self, t):
        options = resources_of(self.trainable, t.config)
        factory = placement_group_factory_of(self.trainable, t.config)
        key = _shape_key(options)
        idle = None if factory else self.pool.get(key)
        if idle:
            runner = idle.pop()
        elif factory:
            runner = self._runner_in_group(t, factory)
        else:
            runner = self._runner_class.options(max_restarts=0, **options).remote(self._trainable_pickle)
        t.runner, t.runner_key = runner, key
        t.stop_requested = False
        resumed = t.checkpoint is not None
        info = {
            "trial_id": t.trial_id, "trial_name": t.name, "trial_dir": t.local_path,
            "experiment_name": os.path.basename(self.path), "config": t.config,
            "checkpoint": t.checkpoint.path if t.checkpoint else None,
            "iteration": t.checkpoint_iteration if resumed else 0,
            "time_total": t.checkpoint_time if resumed else 0.0,
            "checkpoint_index": t.checkpoint_index,
            "checkpoint_frequency": self.ckpt.checkpoint_frequency,
            "resources": {k: v for k, v in options.items() if k != "resources"},
        }
        runner.start.remote(info)
        t.inflight = runner.next.remote()
        t.status = RUNNING
        t.start_time = t.start_time or time.time()
        t.open()
        for cb in self.callbacks:
            cb.on_trial_start(iteration=self.iteration, trials=self.trials, trial=t)

    def _collect(self, t):
        ref, t.inflight = t.inflight, None
        try:
            item = airt.get(ref)
        except airt.exceptions.RayError as e:  # the worker or its node died
            self._failed(t, f"the trial's actor died: {type(e).__name__}: {e}", dead=True)
            return
        if t.stop_requested:
            self._end(t, TERMINATED, early=True)
            return
        kind = item[0]
        if kind == "done":
            self._end(t, TERMINATED)
        elif kind == "error":
            self._failed(t, item[1], dead=False)
        else:
            self._result(t, item[1], item[2])

    def _result(self, t, result, checkpoint_path):
        result["config"] = t.config
        result["experiment_tag"] = t.experiment_tag
        if checkpoint_path:
            t.checkpoint_index = int(os.path.basename(checkpoint_path).split("_")[-1])
            t.add_checkpoint(checkpoint_path, result, self.ckpt)
        t.results.append(result)
        t.last_result = result
        t.write_result(result)
        self.searcher.on_trial_result(t.trial_id, result)
        for cb in self.callbacks:
            cb.on_trial_result(iteration=self.iteration, trials=self.trials, trial=t,
                               result=result)
        if self.rc.verbose >= 2:
            shown = {k: result[k] for k in (self.metric, "training_iteration") if k in result}
            self._say(f"Trial {t.name} reported {shown}")
        if result.get("done"):
            decision, early = TrialScheduler.STOP, False
        elif self._should_stop(t, result):
            decision, early = TrialScheduler.STOP, True
        else:
            self._tell_waiting()
            decision = self.scheduler.on_trial_result(t, result)
            early = True
        for trial_id, config, donor in self.scheduler.take_exploits():
            self._exploit(self.by_id[trial_id], config, self.by_id[donor])
        if t.status != RUNNING or t.inflight is not None:
            pass  # exploited: restarted with the donor's config and checkpoint
        elif decision == TrialScheduler.CONTINUE:
            t.inflight = t.runner.next.remote()
        elif decision == TrialScheduler.PAUSE:
            self._pause(t)
        elif decision == TrialScheduler.STOP:
            self._stop(t, early=early)
        self._apply_actions()

    def _tell_waiting(self):
        tell = getattr(self.scheduler, "set_waiting", None)  # a user's scheduler may lack it
        if tell is not None:
            tell(sum(1 for t in self.trials if t.status == PENDING))

    def _apply_actions(self):
        for trial_id, config, donor in self.scheduler.take_exploits():
            self._exploit(self.by_id[trial_id], config, self.by_id[donor])
        self._tell_waiting()
        for trial_id, decision in self.scheduler.take_actions():
            t = self.by_id.get(trial_id)
            if t is None or t.status not in (RUNNING, PAUSED):
                continue
            if decision == TrialScheduler.STOP:
                self._stop(t, early=True)
            elif decision == TrialScheduler.CONTINUE and t.status == PAUSED:
                self._resume(t)

    def _pause(self, t):
        """Frees the trial's actor, as Ray does: a resumed trial starts again from its latest
        checkpoint (from the start without one)."""
        self._release(t, alive=True)
        t.close()
        t.status = PAUSED

    def _resume(self, t):
        if t.status == PAUSED:
            ex.rewind(t) if t.checkpoint else _reset(t)
            t.status = PENDING

    def _should_stop(self, t, result):
        stop = self.rc.stop
        if stop is None:
            return False
        if isinstance(stop, dict):
            return any(k in result and isinstance(result[k], (int, float)) and result[k] >= v
                       for k, v in stop.items())
        if isinstance(stop, Stopper):
            if stop.stop_all():
                self.stop_all = True
            return bool(stop(t.trial_id, result))
        return bool(stop(t.trial_id, result))

    def _stop(self, t, early):
        """Ends a running or paused trial: its report raises inside it, its actor is freed."""
        if t.inflight is not None:
            t.stop_requested = True  # ends when its in-flight step returns
            return
        self._end(t, TERMINATED, early=early)

    def _end(self, t, status, early=False):
        self._release(t, alive=True)
        t.status = status
        t.stopped_early = t.stopped_early or early
        t.close()
        self.scheduler.on_trial_complete(t, t.last_result)
        self.searcher.on_trial_complete(t.trial_id, t.last_result or None)
        for cb in self.callbacks:
            cb.on_trial_complete(iteration=self.iteration, trials=self.trials, trial=t)
        self._save_state()

    def _runner_in_group(self, t, factory):
        """The trial's actor in bundle 0 of a placement group of its own (Ray's
        PlacementGroupFactory); the actor starts once the head has reserved every bundle."""
        from airt.util.placement_group import placement_group
        from airt.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        t.placement_group = placement_group(factory.reserved_bundles, strategy=factory.strategy)
        strategy = PlacementGroupSchedulingStrategy(
            t.placement_group, placement_group_bundle_index=0,
            placement_group_capture_child_tasks=True)
        return self._runner_class.options(
            max_restarts=0, scheduling_strategy=strategy,
            **bundle_actor_options(factory)).remote(self._trainable_pickle)

    def _release(self, t, alive):
        runner, t.runner = t.runner, None
        group, t.placement_group = t.placement_group, None
        if group is not None:  # a group's actor is never pooled: it lives in the group
            from airt.util.placement_group import remove_placement_group
            try:
                airt.kill(runner)
            except Exception:  # noqa: BLE001 (already dead)
                pass
            remove_placement_group(group)
            return
        if runner is None:
            return
        if alive and self.reuse:
            runner.stop.remote()
            self.pool.setdefault(t.runner_key, []).append(runner)
        else:
            try:
                airt.kill(runner)
            except Exception:  # noqa: BLE001 (already dead)
                pass

    def _failed(self, t, text, dead):
        t.num_failures += 1
        t.write_error(f"Failure #{t.num_failures} (iteration "
                      f"{t.last_result.get('training_iteration', 0)}):\n{text}")
        self._release(t, alive=not dead)
        t.close()
        limit = self.failure.max_failures
        if limit == -1 or t.num_failures <= limit:
            where = (f"checkpoint {os.path.basename(t.checkpoint.path)}" if t.checkpoint
                     else "the start")
            if self.rc.verbose:
                self._say(f"Trial {t.name} failed (#{t.num_failures}); retrying from {where}")
            ex.rewind(t) if t.checkpoint else _reset(t)
            t.status = PENDING
            return
        t.status = ERROR
        t.error_msg = text
        if self.rc.verbose:
            self._say(f"Trial {t.name} errored after {t.num_failures} failure(s); its error: "
                      f"{os.path.join(t.local_path, 'error.txt')}")
        self.scheduler.on_trial_error(t)
        self.searcher.on_trial_complete(t.trial_id, None, error=True)
        for cb in self.callbacks:
            cb.on_trial_error(iteration=self.iteration, trials=self.trials, trial=t)
        self._save_state(force=True)
        if self.failure.fail_fast == "raise":
            for other in self.trials:  # the sweep ends here: its actors and groups go
                if other.status == RUNNING:
                    self._release(other, alive=False)
            self._kill_actors()
            raise TuneError(text)
        if self.failure.fail_fast:
            self.stop_all = True

    def _exploit(self, t, config, donor):
        """PBT: t takes donor's config (explored) and continues from donor's checkpoint (a
        paused t, synchronous PBT's, is launched with the others)."""
        if donor.checkpoint is None or t.status not in (RUNNING, PAUSED):
            return
        if t.status == RUNNING and t.runner is None:
            return
        t.config = config
        t.checkpoint = donor.checkpoint
        t.checkpoint_iteration = donor.checkpoint_iteration
        t.checkpoint_time = donor.checkpoint_time
        ex.atomic_write(os.path.join(t.local_path, "params.json"),
                        json.dumps(ex._jsonable(config), indent=2, sort_keys=True))
        if t.status == PAUSED:
            t.status = PENDING
            return
        t.runner.stop.remote()
        t.status = PENDING
        t.close()
        if t.placement_group is not None or not self.reuse:
            self._release(t, alive=False)
        else:
            runner, t.runner = t.runner, None
            self.pool.setdefault(t.runner_key, []).insert(0, runner)
        self._launch(t)

    def _kill_actors(self):
        for runners in self.pool.values():
            for r in runners:
                airt.kill(r)
        self.pool.clear()

    # ---- state -------------------------------------------------------------------------------
    def _save_state(self, force=False):
        now = time.time()
        if not force and now - self._last_state < _STATE_EVERY_S:
            return
        self._last_state = now
        state = {"trials": [t.state() for t in self.trials], "created": self.created,
                 "searcher_finished": self.searcher_finished, "timestamp": now}
        import cloudpickle
        for name, part in ((ex.SEARCHER_FILE, self.searcher), (ex.SCHEDULER_FILE,
                                                               self.scheduler)):
            try:
                data = cloudpickle.dumps(part)
            except Exception:  # noqa: BLE001 (one that does not pickle restarts afresh)
                continue
            ex.atomic_write(os.path.join(self.path, name), data, mode="wb")
        ex.atomic_write(os.path.join(self.path, ex.STATE_FILE), json.dumps(state))


def _reset(t):
    t.checkpoint_iteration = 0
    t.checkpoint_time = 0.0
    ex.rewind(t)


def _shape_key(options):
    return repr(sorted((k, sorted(v.items()) if isinstance(v, dict) else v)
                       for k, v in options.items()))


def _fits(options, total):
    """How many trials of this shape the cluster holds at once."""
    need = {"CPU": options.get("num_cpus", 0), "GPU": options.get("num_gpus", 0)}
    if "memory" in options:
        need["memory"] = options["memory"]
    need.update(options.get("resources", {}))
    count = math.inf
    for key, amount in need.items():
        if amount and amount > 0:
            count = min(count, math.floor(total.get(key, 0) / amount + 1e-9))
    return max(1, count) if count != math.inf else 64
