"""`wattio reproduce`: published tables and figures of the seed papers, beside wattio's own.

One module per seed system (``spindown.py``, ``exces.py``, ``paraid.py``, …) declares its experiments
(:class:`~wattio.reproduce.experiment.Experiment`) and a :class:`System`; ``SYSTEMS`` lists
them. An experiment's name starts with its system's prefix, so ``wattio reproduce paraid``
runs all of PARAID's. See docs/reproduce.md.
"""

from __future__ import annotations

import time

from wattio.reproduce import (
    delay_hiding,
    exces,
    failures,
    fs2,
    geometry,
    launch,
    memory,
    nvm,
    paraid,
    spindown,
)
from wattio.reproduce.experiment import Experiment, NotRunnable, Result, System
from wattio.reproduce.rules import FAILS, NOT_RUN, Check

#: Every seed system with experiments, in the order they are run and listed.
SYSTEMS: tuple[System, ...] = (spindown.SYSTEM, exces.SYSTEM, paraid.SYSTEM, fs2.SYSTEM,
                               geometry.SYSTEM, failures.SYSTEM, nvm.SYSTEM, memory.SYSTEM, launch.SYSTEM,
                               delay_hiding.SYSTEM)

EXPERIMENTS: tuple[Experiment, ...] = tuple(e for s in SYSTEMS for e in s.experiments)


def select(names: list[str] | None = None) -> list[Experiment]:
    """The experiments named, in registry order: a full name, or a prefix of names (``paraid``
    selects every ``paraid-…``). No names: all. An unknown name is a ValueError listing them."""
    if not names:
        return list(EXPERIMENTS)
    chosen = []
    for n in names:
        hit = [e for e in EXPERIMENTS if e.name == n or e.name.startswith(n.rstrip("-") + "-")]
        if not hit:
            known = ", ".join(e.name for e in EXPERIMENTS)
            raise ValueError(f"no experiment named or prefixed {n!r} (known: {known})")
        chosen += [e for e in hit if e not in chosen]
    return [e for e in EXPERIMENTS if e in chosen]


def _registered_kinds() -> set[str]:
    from wattio import _core

    return {k[0] for k in _core.functions()}


def run_one(e: Experiment, quick: bool, kinds: set[str] | None = None) -> Result:
    """Run one experiment and apply its rule. A missing workload or function kind gives
    not-run; an error inside the experiment gives fails, with the error as the reason."""
    kinds = _registered_kinds() if kinds is None else kinds
    t0 = time.monotonic()
    missing = [k for k in e.functions if k not in kinds]
    if missing:
        return Result(e, None, Check(NOT_RUN, ()), 0.0, f"function kind(s) not registered: {', '.join(missing)}")
    try:
        outcome = e.run(quick)
    except NotRunnable as err:
        return Result(e, None, Check(NOT_RUN, ()), time.monotonic() - t0, str(err))
    # Any error inside an experiment is a failed reproduction, reported with the error.
    except Exception as err:  # noqa: BLE001
        return Result(e, None, Check(FAILS, ()), time.monotonic() - t0, f"error: {err!r}")
    return Result(e, outcome, e.rule.check(e.paper_values, outcome.values), time.monotonic() - t0)


def run(names: list[str] | None = None, quick: bool = False) -> list[Result]:
    kinds = _registered_kinds()
    return [run_one(e, quick, kinds) for e in select(names)]


def demo_footer() -> str:
    """The end of `wattio demo`: where the reproductions are, and each system's headline."""
    lines = [
        ("The seed papers' results beside wattio's: `wattio reproduce` (verdicts, tables, "
        "figures; docs/reproduce.md). Headlines, from quick runs:")
    ]
    lines += [f"  {s.prefix:<9} {s.headline()}" for s in SYSTEMS]
    return "\n".join(lines)


__all__ = ["EXPERIMENTS", "SYSTEMS", "Experiment", "NotRunnable", "Result", "System", "demo_footer", "run", "run_one", "select"]
