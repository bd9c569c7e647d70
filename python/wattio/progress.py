"""Progress bars for runs, reports, the demo and sweeps: tqdm's ``auto`` bars, which are
widgets in a Jupyter notebook and a line on a terminal.

Shown by default when someone is watching: stderr is a terminal, or the code runs in a
notebook kernel (where stderr is not a terminal but the bar renders in the cell).
"""

from __future__ import annotations

import contextlib
import sys


def watching() -> bool:
    """Whether a progress bar would be seen: a terminal, or a Jupyter kernel."""
    if sys.stderr is not None and hasattr(sys.stderr, "isatty") and sys.stderr.isatty():
        return True
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython() if hasattr(ipython, "get_ipython") else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def enabled(progress: bool | None) -> bool:
    return watching() if progress is None else bool(progress)


def bar(**kwargs):
    """A tqdm bar: the notebook widget where one can be drawn, else the terminal line
    (a notebook without ipywidgets gets the text bar instead of an error)."""
    try:
        from tqdm.auto import tqdm

        return tqdm(**kwargs)
    except ImportError:
        from tqdm.std import tqdm

        return tqdm(**kwargs)


class RunProgress:
    """The simulator's progress callback (called with requests done and simulated ns):
    a bar over simulated time when the horizon is known, else a running count."""

    def __init__(self, label: str = "", total_sim_ns: int | None = None):
        self.total_s = total_sim_ns / 1e9 if total_sim_ns else None
        self.bar = bar(
            total=self.total_s,
            desc=label or "run",
            unit="sim s",
            unit_scale=False,
            leave=False,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:,.0f}/{total:,.0f} sim s "
            "[{elapsed}<{remaining}{postfix}]"
            if self.total_s
            else "{desc}: {n:,.0f} sim s [{elapsed}{postfix}]",
            mininterval=0.2,
        )
        self.seen_s = 0.0

    def __call__(self, done: int, sim_ns: int) -> None:
        now_s = sim_ns / 1e9
        if self.total_s:
            now_s = min(now_s, self.total_s)
        self.bar.set_postfix_str(f"{done:,} requests", refresh=False)
        self.bar.update(now_s - self.seen_s)
        self.seen_s = now_s

    def close(self) -> None:
        """The run is over: show it complete (the callback comes every few thousand
        requests, so the last call may be well short of the end), then clear the line."""
        if self.total_s:
            self.bar.update(self.total_s - self.seen_s)
            self.bar.refresh()
        self.bar.close()


@contextlib.contextmanager
def steps(total: int, desc: str, progress: bool | None, leave: bool = True):
    """A bar over ``total`` steps of work; yields the function that marks one done (which
    does nothing when the bar is off)."""
    if not enabled(progress):
        yield lambda: None
        return
    b = bar(total=total, desc=desc, leave=leave, mininterval=0.1)
    try:
        yield lambda: b.update(1)
    finally:
        b.close()
