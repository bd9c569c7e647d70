"""A progress line for long runs: requests done, rate, simulated time, ETA."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int | None = None, label: str = "", stream=None, min_interval=0.2):
        self.total = total
        self.label = label
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.last = 0.0
        self.min_interval = min_interval
        self.shown = False

    def __call__(self, done: int, sim_ns: int) -> None:
        now = time.monotonic()
        if now - self.last < self.min_interval:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        parts = [self.label, f"{done:,} req", f"{rate / 1e6:.2f} M req/s", f"sim {sim_ns / 1e9:,.0f} s"]
        if self.total:
            frac = min(done / self.total, 1.0)
            eta = (self.total - done) / rate if rate > 0 else 0.0
            bar = "#" * int(frac * 20)
            parts.insert(1, f"[{bar:<20}] {frac * 100:5.1f}%")
            parts.append(f"ETA {eta:5.1f} s")
        self.stream.write("\r" + "  ".join(p for p in parts if p) + "\x1b[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
