"""One console line per operator while a dataset executes: rows done, rows/s, blocks queued.

On a terminal the lines are redrawn in place (at most 5 times a second); elsewhere each
operator's final line is printed once when the execution ends. Written to stderr.
"""

import sys
import time


class ProgressBars:
    def __init__(self, names, enabled):
        self.names = names
        self.enabled = enabled
        self.rows = [0] * len(names)
        self.queued = [0] * len(names)
        self.started = time.monotonic()
        self.last = 0.0
        self.drawn = 0
        self.tty = enabled and sys.stderr.isatty()

    def update(self, position, rows, queued):
        self.rows[position] = rows
        self.queued[position] = queued

    def lines(self):
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return [f"- {name}: {rows} rows, {rows / elapsed:,.0f} rows/s, {queued} blocks queued"
                for name, rows, queued in zip(self.names, self.rows, self.queued)]

    def render(self, force=False):
        if not self.tty:
            return
        now = time.monotonic()
        if not force and now - self.last < 0.2:
            return
        self.last = now
        out = sys.stderr
        if self.drawn:
            out.write(f"\x1b[{self.drawn}F")
        for line in self.lines():
            out.write("\x1b[2K" + line + "\n")
        out.write("\x1b[0J")
        out.flush()
        self.drawn = len(self.names)

    def close(self):
        if not self.enabled:
            return
        if self.tty:
            self.render(force=True)
            return
        for line in self.lines():
            print(line, file=sys.stderr)
