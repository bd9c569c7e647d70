"""Delay-hiding DRAM energy management (Bi, Duan, Gniady; ``shared/seeds/001_9d21afc1ae43cbbe.txt``):
the buffer cache's DRAM ranks sleep in self refresh after every file-I/O call and predictors
wake the right rank at system-call entry.

Experiments are named ``delay-hiding-…`` (``wattio reproduce delay-hiding`` runs them all; the
system's prefix is ``delay``, the first word of the names). Every run goes through the
buffer-cache and rank model of ``crates/functions/src/memory/delay_hiding``
(docs/functions/delay-hiding.md) on the file-level captures of the workload library:
``glimpse`` (the paper's Glimpse), ``postmark-files`` (PostMark), ``tpch`` (TPC-H), ``pgbench``
(TPC-C: a database's random file access), and the paper's two multi-programmed mixes merged by
time: Multi1 = tpch + pgbench, Multi2 = glimpse + postmark-files. The paper's 4 GB buffer cache
is scaled to each stand-in: the cache holds the same share of the stand-in's footprint as 4 GB
of the paper's data set (Table 2), over the paper's four ranks. Traces are thousands of calls,
so ``--quick`` runs everything too (about a second).
"""

from __future__ import annotations

from functools import cache

from wattio import memory
from wattio.reproduce import library
from wattio.reproduce.experiment import Experiment, NotRunnable, Outcome, System
from wattio.reproduce.rules import Between, Exact, SameOrdering

PAPER = "Delay-Hiding Energy Management Mechanisms for DRAM (seed 001)"

#: Stand-in -> (captures merged, the paper's cache / data-set share it is scaled by).
STANDINS = {
    "glimpse": (("glimpse",), 4096 / 4237),  # Glimpse: 4 GB over 4,237 MB
    "postmark": (("postmark-files",), 4096 / 5047),  # Postmark: 5,047 MB
    "tpch": (("tpch",), 4096 / 7156),  # TPC-H: 7,156 MB
    "pgbench": (("pgbench",), 4096 / 4775),  # TPC-C: 4,775 MB
    "tpch+pgbench": (("tpch", "pgbench"), 4096 / 7247),  # Multi1 (TPC-H + TPC-C): 7,247 MB
    "glimpse+postmark": (("glimpse", "postmark-files"), 4096 / 8500),  # Multi2: 8,500 MB
}
RANKS = 4
BLOCK = 4096
SINGLE = ("mra", "f-mra", "f-mfa", "f-drd")
ADAPTIVE = ("af-mra", "af-mfa", "af-drd")

DIFFERS = (
    "The paper traced Glimpse, PostMark, TPC-H, TPC-C and two mixes (18-197 M calls) on Linux "
    "2.6.20 with a 4 GB buffer cache; wattio replays this machine's strace captures (thousands "
    "to tens of thousands of calls): glimpseindex/glimpse over /usr/lib/python3.11, PostMark "
    "1.51 (2,000 files, 10,000 transactions), five TPC-H queries on PostgreSQL over SQL-built "
    "tables of about scale 0.1, and pgbench's TPC-B-like load for TPC-C; the mixes merged by "
    "time; the cache scaled to the same share of each footprint (workloads/*/README.md). "
    "Blocks read from storage wake their rank behind the storage access and need no "
    "prediction (docs/functions/delay-hiding.md); calls run back to back, so energy is "
    "entry-to-exit only, as the paper's."
)


def _traces(names: tuple[str, ...]) -> list[str]:
    out = []
    for n in names:
        p = library.root() / n / "trace.parquet"
        if not p.exists():
            raise NotRunnable(f"stand-in {n!r}: no {p} (the workload library is not here)")
        out.append(str(p))
    return out


@cache
def _blocks_per_rank(standin: str) -> int:
    names, share = STANDINS[standin]
    return memory.blocks_per_rank(_traces(names), share, RANKS, BLOCK)


@cache
def run(standin: str, predictor: str) -> dict:
    """One stand-in through one predictor: the report (``wattio.memory.delay_hiding``: with
    slowdown % and prediction hit %), plus the cache's hit %."""
    names, _ = STANDINS[standin]
    r = memory.delay_hiding(_traces(names), predictor, ranks=RANKS, block_bytes=BLOCK,
                            blocks_per_rank=_blocks_per_rank(standin))
    r["cache_hit_pct"] = 100 * r["cache_hits"] / max(1, r["cache_hits"] + r["cache_misses"])
    return r


def _table(predictors):
    import pandas as pd

    cols = ("slowdown_pct", "hit_pct", "prediction_hit", "prediction_miss", "prediction_wrong",
            "wasted_wakeups", "cache_hit_pct", "energy_j", "energy_io_j", "energy_precharge_j",
            "energy_self_refresh_j", "energy_transitions_j")
    rows = [{"stand-in": s, "predictor": p, **{c: run(s, p)[c] for c in cols}}
            for s in STANDINS for p in predictors]
    return pd.DataFrame(rows)


def _outcome(values: dict, predictors, notes=()) -> Outcome:
    return Outcome(values=values, table=_table(predictors),
                   notes=[f"stand-ins: {', '.join(STANDINS)}; cache scaled per Table 2", *notes])


def _energy_vs(standin: str, p: str, base: str) -> float:
    return 100 * run(standin, p)["energy_j"] / run(standin, base)["energy_j"]


def _isr(quick: bool) -> Outcome:
    return _outcome({s: run(s, "isr")["slowdown_pct"] for s in STANDINS}, ("isr",))


def _all(quick: bool) -> Outcome:
    return _outcome({s: run(s, "all")["slowdown_pct"] for s in STANDINS}, ("all",))


def _drd_all(quick: bool) -> Outcome:
    return _outcome({s: run(s, "f-drd-all")["slowdown_pct"] for s in STANDINS}, ("f-drd-all",))


def _between(quick: bool) -> Outcome:
    ps = ("all", *SINGLE, "isr")
    return _outcome({f"{s}: {p}": run(s, p)["slowdown_pct"] for s in STANDINS for p in ps}, ps)


def _coverage(quick: bool) -> Outcome:
    return _outcome({f"{s}: {p}": run(s, p)["hit_pct"] for s in STANDINS for p in ADAPTIVE}, ADAPTIVE)


def _adaptive_slowdown(quick: bool) -> Outcome:
    return _outcome({f"{s}: {p}": run(s, p)["slowdown_pct"] for s in STANDINS for p in ADAPTIVE}, ADAPTIVE)


def _et_vs_isr(quick: bool) -> Outcome:
    values = {}
    for s in STANDINS:
        values[f"{s}: energy over ISR %"] = _energy_vs(s, "af-mra-et", "isr") - 100
        values[f"{s}: slowdown %"] = run(s, "af-mra-et")["slowdown_pct"]
    return _outcome(values, ("isr", "af-mra-et"))


def _energy_order(quick: bool) -> Outcome:
    ps = (*SINGLE, "all")
    return _outcome({f"{s}: {p}": _energy_vs(s, p, "all") for s in STANDINS for p in ps}, ps,
                    notes=["energy normalized to ALL's, %"])


def _early_off(quick: bool) -> Outcome:
    return _outcome({f"{s}: {p}": 100 - _energy_vs(s, f"{p}-et", p) for s in STANDINS for p in ADAPTIVE},
                    (*ADAPTIVE, *(f"{p}-et" for p in ADAPTIVE)), notes=["energy saved by -et, %"])


def _glimpse(quick: bool) -> Outcome:
    return _outcome({p: run("glimpse", p)["hit_pct"] for p in SINGLE}, SINGLE)


def _exp(name, title, reproduces, paper_values, rule, quantity, fn, sources) -> Experiment:
    return Experiment(name=f"delay-hiding-{name}", title=title, paper=PAPER, reproduces=reproduces,
                      paper_values=paper_values, rule=rule, quantity=quantity, differs=DIFFERS,
                      run=fn, sources=sources)


def _each(v) -> dict:
    return {s: v for s in STANDINS}


def _keys(predictors, v) -> dict:
    return {f"{s}: {p}": (v[p] if isinstance(v, dict) else v) for s in STANDINS for p in predictors}


EXPERIMENTS = (
    _exp("isr-slowdown", "Immediate self refresh exposes the wake-up: file I/O tens of percent slower",
         "§Results, ISR's file-I/O time over the ideal", _each(68.5), Between(10, 100),
         "file-I/O slowdown over the ideal, % (paper: 50-87 %, midpoint shown)", _isr,
         ("'ISR ... increases the file I/O time by 50% to 87%'",)),
    _exp("all-no-delay", "ALL wakes every rank at entry: no delay", "§Results, ALL's file-I/O time",
         _each(0.0), Exact(decimals=1), "file-I/O slowdown, %", _all, ("ALL: 'no delay'",)),
    _exp("f-drd-all-no-delay", "F-DRD-all (target 100 %) hides the wake-up", "§Results, F-DRD-all",
         _each(0.0), Between(0, 1), "file-I/O slowdown, %", _drd_all, ("F-DRD-all: 0 % slowdown",)),
    _exp("single-rank-between", "Single-rank predictors' slowdown lies between ALL's and ISR's",
         "§Results, MRA 19 %, F-MRA 14 %, F-MFA 30 %, F-DRD 29 %",
         {**_keys(("all",), 1), **_keys(SINGLE, 2), **_keys(("isr",), 3)},
         SameOrdering(group_separator=": "), "rank (paper) / slowdown % (wattio)", _between,
         ("slowdowns 19/14/30/29 % against ISR's 50-87 % and ALL's 0",)),
    _exp("adaptive-coverage", "Adaptive predictors reach their 95 % coverage target",
         "§Adaptive predictors, prediction hit rate", _keys(ADAPTIVE, 95.0), Between(95, 100),
         "prediction hits, % of calls needing a cached block's rank", _coverage,
         ("'the adaptive predictors reach the 95% target'",)),
    _exp("adaptive-slowdown", "Adaptive predictors slow file I/O by a few percent",
         "§Results, AF-* about 3 %", _keys(ADAPTIVE, 3.0), Between(0, 5), "file-I/O slowdown, %",
         _adaptive_slowdown, ("AF-MRA, AF-MFA, AF-DRD: about 3 % slowdown",)),
    _exp("af-mra-et-vs-isr", "AF-MRA-et: a few percent slower, within a few percent of ISR's energy",
         "§Results, AF-MRA-et against ISR",
         {k: 3.0 for s in STANDINS for k in (f"{s}: energy over ISR %", f"{s}: slowdown %")},
         Between(-10, 10), "energy over ISR's, % / slowdown, %", _et_vs_isr,
         ("'AF-MRA-et ... only 3% more energy than ISR' at about 3 % slowdown",)),
    _exp("energy-vs-all", "Energy against ALL: MRA and F-MRA well below, F-MFA and F-DRD less so",
         "§Results, energy vs ALL: MRA -33 %, F-MRA -37 %, F-MFA -21 %, F-DRD -21 %",
         {**_keys(("mra", "f-mra"), 1), **_keys(("f-mfa", "f-drd"), 2), **_keys(("all",), 3)},
         SameOrdering(tolerance_percent=2, group_separator=": "), "rank (paper) / energy % of ALL's",
         _energy_order, ("energy vs ALL -33/-37/-21/-21 %",)),
    _exp("early-turn-off", "Early turn-off cuts the adaptive predictors' energy",
         "§Early turn-off, -27 % on average", _keys(ADAPTIVE, 27.0), Between(0.001, 100),
         "energy saved by -et, %", _early_off, ("'-et ... reduces the total energy by 27% on average'",)),
    _exp("glimpse-near-perfect", "Glimpse: every predictor is nearly always right",
         "§Results, Glimpse prediction accuracy", dict.fromkeys(SINGLE, 100.0), Between(95, 100),
         "prediction hits, %", _glimpse, ("Glimpse: 'all predictors ... close to 100%'",)),
)


def headline() -> str:
    try:
        s = run("glimpse", "af-mra-et")["slowdown_pct"]
        e = _energy_vs("glimpse", "af-mra-et", "isr") - 100
        i = run("glimpse", "isr")["slowdown_pct"]
    except NotRunnable as err:
        return f"delay-hiding: not run ({err})"
    return (f"delay-hiding on glimpse: ISR {i:.0f} % slower; AF-MRA-et {s:.1f} % slower at "
            f"{e:+.1f} % of ISR's energy (paper: 50-87 %; 3 %, +3 %)")


SYSTEM = System(prefix="delay", title="Delay-hiding: buffer-cache DRAM ranks woken at system-call entry",
                experiments=EXPERIMENTS, headline=headline)

__all__ = ["EXPERIMENTS", "STANDINS", "SYSTEM", "run"]
