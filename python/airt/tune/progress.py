"""What people watch: the live progress table (redrawn in place on a terminal, printed as
plain periodic blocks otherwise), the closing summary, and the PNG plot of the metric."""

import json
import os
import shutil
import sys
import time

from airt.tune.experiment import ERROR, PAUSED, PENDING, RUNNING, TERMINATED, flatten


def _fmt(value):
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, bool) or value is None:
        return str(value)
    return str(value)


class ProgressTable:
    """Prints the trials' table: name, status, varying parameters, the metric, iterations, time.
    `out`: a stream (stdout); `tty`: None to ask the stream; `interval_s`: between plain prints
    (default 0.5 on a terminal, 10 s otherwise)."""

    def __init__(self, metric=None, mode=None, out=None, tty=None, interval_s=None,
                 max_rows=20):
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self.metric, self.mode = metric, mode
        self.interval_s = interval_s if interval_s is not None else (0.5 if self.tty else 10.0)
        self.max_rows = max_rows
        self._last = 0.0
        self._drawn_lines = 0
        self._started = time.time()

    def maybe_print(self, trials, force=False):
        now = time.time()
        if not force and now - self._last < self.interval_s:
            return False
        self._last = now
        lines = self.render(trials)
        if self.tty:
            if self._drawn_lines:
                self.out.write(f"\x1b[{self._drawn_lines}F\x1b[J")
            self._drawn_lines = len(lines)
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()
        return True

    def render(self, trials):
        counts = {}
        for t in trials:
            counts[t.status] = counts.get(t.status, 0) + 1
        elapsed = time.time() - self._started
        head = (f"== Tune status: {len(trials)} trials, " +
                ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) +
                f" | {elapsed:.1f} s elapsed ==")
        params = _varying_params(trials)
        metric_cols = [self.metric] if self.metric else []
        cols = ["trial", "status"] + params + metric_cols + ["iter", "total time (s)"]
        rows = []
        order = {RUNNING: 0, PAUSED: 1, PENDING: 2, TERMINATED: 3, ERROR: 4}
        shown = sorted(trials, key=lambda t: (order.get(t.status, 5), t.index))
        for t in shown[:self.max_rows]:
            flat = flatten(t.config)
            r = t.last_result or {}
            status = t.status + (" (stopped early)" if cut_short(t, trials) else "")
            rows.append([t.name, status] + [_fmt(flat.get(p)) for p in params] +
                        [_fmt(r.get(m, "")) for m in metric_cols] +
                        [_fmt(r.get("training_iteration", "")),
                         _fmt(r.get("time_total_s", ""))])
        widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c)
                  for i, c in enumerate(cols)]
        width = shutil.get_terminal_size((120, 20)).columns if self.tty else 1000
        line = lambda cells: " | ".join(c.ljust(w) for c, w in zip(cells, widths))[:width]
        out = [head, line(cols), "-+-".join("-" * w for w in widths)[:width]]
        out += [line(row) for row in rows]
        if len(shown) > self.max_rows:
            out.append(f"... {len(shown) - self.max_rows} more trials")
        return out


def cut_short(trial, trials):
    """Stopped (by the scheduler or the stop criteria) before the longest run of the sweep."""
    if not (trial.status == TERMINATED and trial.stopped_early):
        return False
    longest = max((t.last_result.get("training_iteration", 0) for t in trials), default=0)
    return trial.last_result.get("training_iteration", 0) < longest


def _varying_params(trials):
    values = {}
    for t in trials:
        for k, v in flatten(t.config).items():
            values.setdefault(k, set()).add(repr(v))
    varying = [k for k, v in values.items() if len(v) > 1]
    return varying or list(values)[:4]


def summary(trials, best, metric, plot_path, elapsed):
    counts = {}
    for t in trials:
        counts[t.status] = counts.get(t.status, 0) + 1
    lines = [f"Tune finished in {elapsed:.1f} s: {len(trials)} trials, " +
             ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))]
    stopped = sum(1 for t in trials if cut_short(t, trials))
    if stopped:
        lines.append(f"  {stopped} trials stopped early by the scheduler or the stop criteria")
    if best is not None and metric:
        lines.append(f"Best trial: {best.name} {metric}={_fmt(best.last_result.get(metric))} "
                     f"after {best.last_result.get('training_iteration')} iterations")
        lines.append(f"  config: {best.config}")
    if plot_path:
        lines.append(f"Plot of {metric} over iterations: {plot_path}")
    return "\n".join(lines)


def plot(trials, metric, path):
    """A PNG of `metric` over training_iteration for every trial; trials stopped early end with
    an x, errored ones in red. Returns the path, or None without matplotlib or data."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure  # not pyplot: no global state, faster to import
    except ImportError:
        return None
    fig = Figure(figsize=(9, 5.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    drew = False
    for t in trials:
        points = [(r.get("training_iteration"), r.get(metric)) for r in t.results
                  if isinstance(r.get(metric), (int, float))]
        if not points:
            continue
        xs, ys = zip(*points)
        color = "red" if t.status == ERROR else None
        (line,) = ax.plot(xs, ys, linewidth=1.2, alpha=0.85, color=color, label=t.name)
        if cut_short(t, trials) or t.status == ERROR:
            ax.plot(xs[-1], ys[-1], marker="x", markersize=8, color=line.get_color())
        drew = True
    if not drew:
        return None
    ax.set_xlabel("training_iteration")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} per trial (x: stopped early)")
    if len(trials) <= 16:
        ax.legend(fontsize=6, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path)
    return path


class _SavedTrial:
    """A trial read back from an experiment folder (for plot_experiment)."""

    def __init__(self, state, results):
        self.name = "trial_" + str(state.get("trial_id", "?"))
        self.status = state.get("status", PENDING)
        self.stopped_early = bool(state.get("stopped_early", False))
        self.results = results
        self.last_result = results[-1] if results else {}


def plot_experiment(path, metric, out=None):
    """The PNG of `metric` for the experiment folder `path` as written by a C++ sweep
    (experiment_state.json with each trial's `local_path`, and its result.json lines); the
    same plot as a Python sweep's. Returns the PNG's path, or None without matplotlib or data."""
    with open(os.path.join(path, "experiment_state.json")) as f:
        saved = json.load(f).get("trials", [])
    trials = []
    for state in saved:
        results = []
        result_file = os.path.join(state.get("local_path", ""), "result.json")
        if os.path.exists(result_file):
            with open(result_file) as f:
                results = [json.loads(line) for line in f if line.strip()]
        trials.append(_SavedTrial(state, results))
    return plot(trials, metric, out or os.path.join(path, f"{metric}.png"))


def _main(argv):
    """`python -m airt.tune.progress EXPERIMENT_DIR METRIC`: writes the plot, prints its path."""
    if len(argv) != 2:
        print("usage: python -m airt.tune.progress EXPERIMENT_DIR METRIC", file=sys.stderr)
        return 2
    try:
        written = plot_experiment(argv[0], argv[1])
    except (OSError, ValueError) as e:
        print(f"cannot plot {argv[0]}: {e}", file=sys.stderr)
        return 1
    if written is None:
        print("no plot: matplotlib is not installed or no trial reported "
              f"'{argv[1]}'", file=sys.stderr)
        return 1
    print(written)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
