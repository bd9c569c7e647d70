"""Faster application launch: IOLab's prefetcher, FAST's two-phase SSD prefetcher and
hybrid-disk pinning, on the workload library's real launches (``workloads/launch-*``).

Experiments are named ``launch-…``. Each replays a captured cold launch through the launch
model (docs/launch.md: a request waits for what it waited for in the capture, plus the CPU
time in between) on catalogue devices, twice: a learning launch, then the relaunch a
prefetcher may speed up, which is the one measured. Pinning evaluates the launch's requests
on a hybrid disk (docs/functions/pinning.md). The verdict rules were written before the experiments
were first run; every replay takes well under a second, so --quick runs them all, and only
the pinning ILP's branch and bound stops sooner (QUICK_NODES).
"""

from __future__ import annotations

import json
from functools import cache

from wattio.reproduce import library
from wattio.reproduce.experiment import Experiment, Outcome, System
from wattio.reproduce.rules import SameOrdering, WithinPercent

IOLAB = "IOLab, case study 1: the application prefetcher (seed 003)"
FAST = (
    "Exploiting SSD parallelism to accelerate application launch on SSDs; FAST: Quick "
    "Application Launch on Solid-State Drives (seed 003)"
)
HYBRID = "Improving Application Launch Times with Hybrid Disks (seed 003)"

#: The paper's HDD (WD6400AAKS, 7200 rpm 3.5") is not in the catalogue: the closest entry.
HDD = "seagate-constellation-es3-4tb"
#: A SATA SSD with NCQ (FAST used a SATA-2 SSD, queue depth 31).
SSD = "samsung-870-evo-1tb"
#: The hybrid disk's flash: a CompactFlash card of the paper's era.
FLASH = "sandisk-ultra-cf-2gb"
WORKLOADS = ("launch-python", "launch-gcc", "launch-office")
#: Two launches 2 s apart: the first teaches the prefetcher, the second is measured.
GAP_S = 2.0
#: Guest idleness that ends a launch for the prefetchers (shorter than GAP_S).
IDLE = "gap_s = 0.5\n"

HDD_SCHEMES = {
    "cold": "",
    "file-order": f'[[function]]\nkind = "iolab-prefetch"\norder = "file"\n{IDLE}',
    "lba-order": f'[[function]]\nkind = "iolab-prefetch"\norder = "lba"\n{IDLE}',
}
#: FAST's baseline: a prefetcher that reads the launch's blocks one at a time in LBA order,
#: the launch paused meanwhile (IOLab's, depth 1); FAST fills the queue (depth 31).
SSD_SCHEMES = {
    "cold": "",
    "sequential": f'[[function]]\nkind = "iolab-prefetch"\norder = "lba"\ndepth = 1\n{IDLE}',
    "fast": f'[[function]]\nkind = "fast-prefetch"\n{IDLE}',
}


@cache
def _replay(workload: str, device: str, function: str) -> dict:
    """The relaunch (second of two runs) of ``workload`` on ``device`` under ``function``."""
    from wattio import _core

    config = f'[[device]]\nname = "d0"\nmodel = "{device}"\n\n{function}'
    trace = str(library.block_trace(workload))
    r = json.loads(_core.launch_replay(trace, config, 2, GAP_S))
    c = r["counters"]
    return {
        "captured_s": r["captured_s"],
        "learning_s": r["durations_s"][0],
        "launch_s": r["durations_s"][1],
        "hit_ratio": c.get("hit_ratio", 0.0),
        "prefetch_s": c.get("prefetch_time_s", 0.0),
        "queue_depth": c.get("effective_queue_depth", 0.0),
        "errors": r["errors"],
    }


def _table(device: str, schemes: dict[str, str]):
    import pandas as pd

    rows = [
        {"workload": w, "scheme": s, **_replay(w, device, fn)} for w in WORKLOADS for s, fn in schemes.items()
    ]
    return rows, pd.DataFrame(rows)


# ---- IOLab on an HDD: cold, file order (the Windows prefetcher), LBA order (IOLab's) ----

def _run_hdd_order(quick: bool) -> Outcome:
    rows, df = _table(HDD, HDD_SCHEMES)
    return Outcome(
        values={f"{r['workload']}: {r['scheme']}": r["launch_s"] for r in rows},
        table=df,
        notes=[f"HDD: {HDD}; launches: {', '.join(WORKLOADS)} (workloads/)"],
    )


def _run_hit_ratio(quick: bool) -> Outcome:
    rows, df = _table(HDD, HDD_SCHEMES)
    return Outcome(
        values={r["workload"]: 100 * r["hit_ratio"] for r in rows if r["scheme"] == "lba-order"},
        table=df,
        notes=[f"HDD: {HDD}; IOLab in LBA order, detection after 3 matching requests"],
    )


HDD_ORDER = Experiment(
    name="launch-hdd-prefetch-order",
    title="On an HDD: a cold launch is slower than with file-order prefetching, which is slower than LBA order",
    paper=IOLAB,
    reproduces="Fig. 2: Word 2007 on a WD6400AAKS, 8.3 s cold, 5.7 s Windows prefetcher, 4.4 s IOLab",
    paper_values={f"{w}: {s}": r for w in WORKLOADS for s, r in (("cold", 3), ("file-order", 2), ("lba-order", 1))},
    rule=SameOrdering(group_separator=": "),
    quantity="simulated launch time of the relaunch (s); the paper's column is ranks",
    differs="Linux launches (python3, gcc, LibreOffice headless) captured from a VM's disk replace "
    f"Word 2007 on Windows XP; the HDD is {HDD} (7200 rpm) for the WD6400AAKS; the Windows "
    "prefetcher is modelled by its sort key (file, then offset in the file) in IOLab's dispatcher.",
    run=_run_hdd_order,
    functions=("iolab-prefetch",),
    sources=("Case study 1: 'the launch time was measured to be 8.3s ... reduced to 5.7s ... reduced to 4.4s'",),
)

HIT_RATIO = Experiment(
    name="launch-hdd-hit-ratio",
    title="IOLab's prefetch hit ratio on the relaunch",
    paper=IOLAB,
    reproduces="Case study 1: 95.4 % of the VM's requests were prefetched",
    paper_values={w: 95.4 for w in WORKLOADS},
    rule=WithinPercent(percent=10),
    quantity="prefetch hit ratio (%): requests answered from prefetched data / the relaunch's requests",
    differs="The paper captured the sequence by hand; here the layer learns the first launch and "
    "detects the second after 3 matching requests (those 3 are not prefetched: misses).",
    run=_run_hit_ratio,
    functions=("iolab-prefetch",),
    sources=("Case study 1: 'The prefetch hit ratio was observed to be 95.4%'",),
)


# ---- FAST on an SSD: two phases, the queue full, against a sequential prefetcher ----

def _run_fast(quick: bool) -> Outcome:
    rows, df = _table(SSD, SSD_SCHEMES)
    values = {}
    for r in rows:
        if r["scheme"] != "cold":
            values[f"{r['workload']} prefetch: {r['scheme']}"] = r["prefetch_s"]
        values[f"{r['workload']} launch: {r['scheme']}"] = r["launch_s"]
    return Outcome(values=values, table=df, notes=[f"SSD: {SSD}"])


def _run_depth(quick: bool) -> Outcome:
    rows, df = _table(SSD, SSD_SCHEMES)
    return Outcome(
        values={r["workload"]: r["queue_depth"] for r in rows if r["scheme"] == "fast"},
        table=df,
        notes=[f"SSD: {SSD}; FAST issues up to 31 prefetch reads at once (SATA-2 NCQ)"],
    )


FAST_TIMES = Experiment(
    name="launch-ssd-fast",
    title="On an SSD: FAST's prefetch and launch are faster than a sequential prefetcher's, and the launch than a cold one",
    paper=FAST,
    reproduces="Fig. 3: prefetcher execution −37 % against the baseline prefetcher, launch −18 % against "
    "a cold start (FAST 2011: −28 % on average)",
    paper_values={
        f"{w} {k}": r
        for w in WORKLOADS
        for k, r in (
            ("prefetch: sequential", 2),
            ("prefetch: fast", 1),
            ("launch: cold", 3),
            ("launch: sequential", 2),
            ("launch: fast", 1),
        )
    },
    rule=SameOrdering(group_separator=": "),
    quantity="seconds (prefetch: detection to the last prefetched read; launch: the relaunch); the paper's column is ranks",
    differs=f"{SSD} (SATA, NCQ) for the paper's SATA-2 SSD; the baseline prefetcher is IOLab's (LBA "
    "order, one read at a time, the launch paused); metadata is what the launch model reads "
    "through the block device's own inode.",
    run=_run_fast,
    functions=("fast-prefetch", "iolab-prefetch"),
    sources=("Fig. 3 text: 'reduced the prefetcher execution by 37% ... reduced application launch time by 18%'",),
)

FAST_DEPTH = Experiment(
    name="launch-ssd-queue-depth",
    title="FAST keeps the SSD's queue nearly full",
    paper=FAST,
    reproduces="Fig. 2: effective queue depth 30.6 of the SATA-2 maximum 31 (Eclipse)",
    paper_values={w: 30.6 for w in WORKLOADS},
    rule=WithinPercent(percent=10),
    quantity="effective queue depth: prefetch reads in flight, averaged over the prefetch's duration",
    differs="The paper measured Eclipse's launch; here three Linux launches.",
    run=_run_depth,
    functions=("fast-prefetch",),
    sources=("Fig. 2 text: 'increased the effective queue depth to 30.6, quite close to the theoritical maximum value of 31'",),
)


# ---- Hybrid-disk pinning: the ILP against FCFP and SCF across flash budgets ----

#: Flash budgets as fractions of the launch's bytes: the paper's Fig. 1 (10 %) and its
#: headline (26 %), with a smaller and a larger point around them.
BUDGETS = (0.05, 0.1, 0.26, 0.5)
#: The ILP considers runs of at most this many consecutive pinned chunks (docs/functions/pinning.md).
WINDOW = 64
#: Branch-and-bound nodes per ILP solve (full length, and --quick): the search is seeded with
#: the better of FCFP and SCF and reports the gap to its proven bound where it stops.
NODES = 2000
QUICK_NODES = 200


@cache
def _pinning(quick: bool) -> tuple:
    import pandas as pd

    from wattio import _core

    rows = []
    nodes = QUICK_NODES if quick else NODES
    for w in WORKLOADS:
        trace = str(library.block_trace(w))
        r = json.loads(_core.launch_pinning(trace, HDD, FLASH, list(BUDGETS), WINDOW, nodes))
        rows += [{"workload": w, "chunks": r["chunks"], **row} for row in r["rows"]]
    return rows, pd.DataFrame(rows)


def _reductions(rows: list[dict], w: str) -> tuple[float, float, dict]:
    none = next(r for r in rows if r["workload"] == w and r["scheme"] == "none")
    ilp = next(r for r in rows if r["workload"] == w and r["scheme"] == "ilp" and r["budget"] == 0.26)
    return 100 * (1 - ilp["disk_s"] / none["disk_s"]), 100 * (1 - ilp["launch_s"] / none["launch_s"]), ilp


def _solve_notes(rows: list[dict]) -> list[str]:
    notes = [f"hybrid disk: {HDD} + {FLASH}; budgets are fractions of the launch's bytes; ILP window {WINDOW} chunks"]
    for w in WORKLOADS:
        ilp = [r for r in rows if r["workload"] == w and r["scheme"] == "ilp"]
        notes.append(
            f"{w}: ILP solve time {max(r['solve_s'] for r in ilp):.2f} s at most, optimality gap "
            f"{100 * max(r['gap'] for r in ilp):.2f} % at most, optimum proven at "
            f"{sum(r['proven'] for r in ilp)} of {len(ilp)} budgets ({max(r['nodes'] for r in ilp)} nodes at most)"
        )
    return notes


def _run_pinning(quick: bool) -> Outcome:
    rows, df = _pinning(quick)
    values = {f"{r['workload']} {r['budget']:g}: {r['scheme']}": r["disk_s"] for r in rows if r["scheme"] != "none"}
    return Outcome(values=values, table=df, notes=_solve_notes(rows))


def _run_pinning_26(quick: bool) -> Outcome:
    rows, df = _pinning(quick)
    values = {}
    for w in WORKLOADS:
        disk, launch, ilp = _reductions(rows, w)
        values[f"{w}: disk access reduction"] = disk
        values[f"{w}: launch time reduction"] = launch
        values[f"{w}: pinned share"] = 100 * ilp["pinned_fraction"]
    return Outcome(values=values, table=df, notes=_solve_notes(rows))


PINNING = Experiment(
    name="launch-pinning-ilp",
    title="Hybrid-disk pinning: the ILP's disk access time is at most FCFP's and SCF's at every flash budget",
    paper=HYBRID,
    reproduces="Fig. 1 (10 % pinned: FCFP, SCF and the optimal subsequences) and the 26 % headline",
    paper_values={
        f"{w} {b:g}: {s}": r for w in WORKLOADS for b in BUDGETS for s, r in (("ilp", 1), ("fcfp", 2), ("scf", 2))
    },
    rule=SameOrdering(group_separator=": "),
    quantity="disk access time of the launch's requests on the hybrid disk (s); the paper's column is ranks",
    differs=f"Hybrid disk = {HDD} + {FLASH} from the catalogue; chunks are runs of requests sequential "
    f"on disk; the ILP considers runs of at most {WINDOW} pinned chunks.",
    run=_run_pinning,
    sources=("Abstract: 'our method pins subsequences on the flash memory that minimizes the seek time the most effectively'",),
)

PINNING_26 = Experiment(
    name="launch-pinning-26-percent",
    title="Pinning 26 % of the launch sequence: disk access −48 %, launch −31 %",
    paper=HYBRID,
    reproduces="Abstract: 'if we pin 26% of the application launch sequences into flash memory, our "
    "approach reduces hard disk access times and application launch times by 48% and 31%'",
    paper_values={
        f"{w}: {k}": v
        for w in WORKLOADS
        for k, v in (("disk access reduction", 48.0), ("launch time reduction", 31.0), ("pinned share", 26.0))
    },
    rule=WithinPercent(percent=25),
    quantity="% (reductions against no pinning; the ILP's pinned bytes as a share of the launch's)",
    differs="Launch time is the launch model's (think time replayed as captured) with each request "
    "served in its hybrid-disk latency, without queueing.",
    run=_run_pinning_26,
    sources=("Abstract: '...reduces hard disk access times and application launch times by 48% and 31%'",),
)


def headline() -> str:
    return "launch: IOLab, FAST and hybrid-disk pinning on three captured Linux launches"


SYSTEM = System(
    prefix="launch",
    title="Application launch: the IOLab prefetcher, FAST, hybrid-disk pinning",
    experiments=(HDD_ORDER, HIT_RATIO, FAST_TIMES, FAST_DEPTH, PINNING, PINNING_26),
    headline=headline,
)
