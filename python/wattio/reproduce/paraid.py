"""PARAID (Weddle et al., *PARAID: A Gear-Shifting Power-Aware RAID*, ACM TOS 3(3), 2007).

Experiments are named ``paraid-…``. Add one by appending an :class:`Experiment` to
``EXPERIMENTS`` (simulation experiments run configs with `wattio.api.run`, as
``spindown.py`` does).
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

from wattio.reproduce import gear_power, library, workers
from wattio.reproduce.experiment import Experiment, Outcome, System
from wattio.reproduce.rules import Exact, SameOrdering, SameTrend, WithinPercent

PAPER = (
    "Weddle, Oldham, Qian, Wang, Reiher, Kuenning, 'PARAID: A Gear-Shifting Power-Aware "
    "RAID', ACM TOS 3(3), 2007"
)

#: Eq. (2) for the prototype's five disks; gear 1 of two disks is the web replay's RAID-0
#: {2,5} (Sec. 6.4: "the 33 to 42 % range based on Eq. (2)"), of three the Cello99 RAID-5
#: {3,5} (Sec. 7.2: "Eq. (2) suggests a power-saving range of 22 to 28 %").
EQ2_PAPER = {
    "G1=2, idle basis": 33,
    "G1=2, active basis": 42,
    "G1=3, idle basis": 22,
    "G1=3, active basis": 28,
}


def _eq2(quick: bool) -> Outcome:
    import pandas as pd

    disk = gear_power.FUJITSU_MAP3367
    d = gear_power.PROTOTYPE_DISKS
    rows = []
    for g1 in (2, 3):
        for basis, pct in gear_power.savings_range(d, g1, disk).items():
            rows.append({"key": f"G1={g1}, {basis}", "disks": d, "gear1": g1, "basis": basis,
                         "paper_percent": EQ2_PAPER[f"G1={g1}, {basis}"], "wattio_percent": pct})
    table = pd.DataFrame(rows)

    def figure(ax):
        x = range(len(table))
        ax.bar([i - 0.2 for i in x], table["paper_percent"], width=0.4, label="paper (printed)")
        ax.bar([i + 0.2 for i in x], table["wattio_percent"], width=0.4, label="wattio (Eq. 2)")
        ax.set_xticks(list(x), table["key"], rotation=15, fontsize=8)
        ax.set_ylabel("power saved in gear 1 (%)")
        ax.set_title("PARAID Eq. 2: lowest-gear savings, 5 Fujitsu MAP3367 disks")
        ax.legend(fontsize=8)

    return Outcome(
        values=dict(zip(table["key"], table["wattio_percent"])),
        table=table,
        figure=figure,
        notes=[f"disk powers: {disk.source}", f"D = {d} (the prototype's RAID disks)"],
    )


EQ2 = Experiment(
    name="paraid-eq2-gear-savings",
    title="Lowest-gear power savings of a 5-disk PARAID (Eq. 2)",
    paper=PAPER,
    reproduces="Eq. (2) with Table II's disk powers; the ranges of Sec. 6.4 and 7.2",
    paper_values=EQ2_PAPER,
    rule=Exact(decimals=0),
    quantity="power saved (%)",
    differs="Analytical: the same equation and the same disk powers as the paper, so no setup "
    "difference; the paper prints whole percent, so wattio is compared after rounding.",
    run=_eq2,
    sources=(
        "Sec. 4.1 Eq. (2); Table II: 9.6 W active, 6.5 W idle, 2.9 W standby",
        "Sec. 6.4: 'the 33 to 42% range based on Eq. (2)' (RAID-0 gears {2,5})",
        "Sec. 7.2: 'Eq. (2) suggests a power-saving range of 22 to 28%' (RAID-5 gears {3,5})",
    ),
)


# --- Trace replays (Tables III-VI): the prototype's five disks, RAID against PARAID ----------
#
# Rules and choices fixed before the first run (docs/functions/paraid.md, "Reproduction").
# The paper's tables are trends over replay speed on two workloads it does not publish; the
# stand-ins are the library's captured web server (workloads/webserver-paraid) and a generator
# calibrated to the Cello99 extract's published statistics. What is compared is therefore the
# *direction* of every step (SameTrend, flat within 2 %), and at the slowest replay the order
# of the two arrays' mean response times, never the printed values.

#: The catalogue's MAP3367 (Table II's powers; 10,025 RPM; since 2026-11-29 the paper's 5 MB
#: on-disk cache, 16 segments assumed: docs/catalogue.md).
DISK = "fujitsu-map3367"
DISKS = 5
#: The web replay: RAID-0, gears {2,5}; the paper's HTTP request rate at each speed-up
#: (Sec. 6.2: 241, 121 and 60 requests/s).
WEB_SPEEDS = {"256x": 241.0, "128x": 121.0, "64x": 60.0}
#: The web server's block trace: workloads/webserver's run on the paper's file system (ext2,
#: atime written at every read as by Linux 2.6.5, 2.6.5's write-back thresholds for 512 MB);
#: since session 54 (before: workloads/webserver, ext4 with relatime).
WEB_WORKLOAD = "webserver-paraid"
#: httperf's rate in that run (95,000 HTTP requests at 1,000/s): the captured block trace is
#: stretched by 1000 / rate so the HTTP load is the paper's at each speed-up.
WEB_CAPTURE_RATE = 1000.0
#: The Cello99 replay: RAID-5, gears {3,5}; speed-ups of the 50-hour extract (Sec. 7.1).
CELLO_SPEEDS = {"128x": 128.0, "64x": 64.0, "32x": 32.0}
#: Both replays start in the lowest gear with the gear content prepopulated (Sec. 6.1, 7.1).
START = "lowest"
#: Propagation copies at the host's device-queue priority (the function's default is −1,
#: below the host): the prototype ran on Linux 2.6.5 (Sec. 5) and its disk manager
#: "reissu[es] all outstanding writes", reading each block from the original gear and
#: writing it — ordinary block I/O on a kernel without I/O priorities (ioprio_set(2) came
#: with 2.6.13), so copies and host I/O shared one priority. Chosen 2026-11-29 after
#: PostMark's sensitivity at 0 was known (docs/functions/paraid.md, "Reproduction").
COPY_PRIORITY = 0

#: The Cello99 extract (Sec. 7): 50 h from 12 Sep 1999, ~1.5 M requests, 12 GB, 110 K unique
#: blocks, 58 % reads (Sec. 6). Choices (the paper publishes nothing else): the block is the
#: mean request, 12 GB / 1.5 M = 8 KiB, so the footprint is 110 K x 8 KiB; sizes lognormal
#: with a 4 KiB median and that 8 KiB mean (sigma = sqrt(2 ln 2)), at most 256 KiB; a daily
#: cycle (the paper chose the extract for its "cyclic behaviors"; diurnal Poisson, amplitude
#: 0.9, peak at 14:00, the trace starting at midnight); Zipf(1.0) popularity over the 8 KiB
#: blocks (its light hours touch 29 MB: a small hot set); half the requests continue one of 8
#: sequential streams. Every speed-up compresses the same 50 hours (period, peak, duration
#: divided, rate multiplied), as the paper's replay compressed the trace's timestamps.
CELLO = {
    "hours": 50.0,
    "requests": 1.5e6,
    "read_fraction": 0.58,
    "block_bytes": 8192,
    "unique_blocks": 110_000,
    "size_median": 4096,
    "size_sigma": 1.1774,
    "size_max": 262_144,
    "amplitude": 0.9,
    "peak_hour": 14.0,
    "zipf_s": 1.0,
    "sequential_fraction": 0.5,
    "streams": 8,
}
#: A quick run replays the first 12.5 hours of the Cello99 stand-in (a quarter: its first
#: trough and peak); the web trace is short and always replayed whole.
QUICK_CELLO_HOURS = 12.5


def _devices() -> str:
    return "".join(f'[[device]]\nname = "d{d}"\nmodel = "{DISK}"\n\n' for d in range(DISKS))


def _array(level: int, paraid: bool, start: str = START, upshift: str = "on-demand") -> str:
    members = ", ".join(f'"d{d}"' for d in range(DISKS))
    if not paraid:
        return f'[[function]]\nkind = "raid"\nlevel = {level}\ndevices = [{members}]\n\n'
    gears = "[2, 5]" if level == 0 else "[3, 5]"
    return (
        f'[[function]]\nkind = "paraid"\nlevel = {level}\ndevices = [{members}]\n'
        f'gears = {gears}\nstart = "{start}"\nupshift = "{upshift}"\n'
        f"propagation_priority = {COPY_PRIORITY}\n\n"
    )


def _cello_workload(speed: float, hours: float) -> str:
    c = CELLO
    rate = c["requests"] / (c["hours"] * 3600) * speed
    size = (f'{{dist = "lognormal", median = {c["size_median"]}, sigma = {c["size_sigma"]}, '
            f'max = {c["size_max"]}}}')
    return (
        "[workload]\n"
        'arrivals = "diurnal"\n'
        f"duration_s = {hours * 3600 / speed!r}\n"
        f"rate = {rate!r}\n"
        f"amplitude = {c['amplitude']}\n"
        f"peak_hour = {c['peak_hour'] / speed!r}\n"
        f"period_s = {86400 / speed!r}\n"
        f"read_fraction = {c['read_fraction']}\n"
        f"size = {size}\n"
        f"footprint_bytes = {c['unique_blocks'] * c['block_bytes']}\n"
        f"popularity = {{dist = \"zipf\", s = {c['zipf_s']}}}\n"
        f"region_bytes = {c['block_bytes']}\n"
        f"sequential_fraction = {c['sequential_fraction']}\n"
        f"streams = {c['streams']}\n"
    )


def config(level: int, paraid: bool, workload: str, until_s: float) -> str:
    """One run: five MAP3367s, a RAID (or PARAID) of ``level`` over them, the workload table."""
    name = ("paraid" if paraid else "raid") + str(level)
    return (
        f'[run]\nname = "{name}"\nseed = 1\nuntil_s = {until_s!r}\n\n{_devices()}'
        f"{_array(level, paraid)}{workload}\n"
        "[output]\nrequests = false\ntimeline = false\nreport = false\n"
    )


def _row(s: dict) -> dict:
    """The numbers the tables need from a run's summary."""
    counters = {k: v for f in s.get("functions", []) for k, v in f.get("counters", {}).items()}
    low = counters.get("time_in_gear0_s", 0.0)
    high = counters.get("time_in_gear1_s", 0.0)
    host = counters.get("host_ios", 0.0)
    copies = counters.get("propagation_copies", 0.0)
    return {
        "requests": s["requests"],
        "duration_s": s["duration_s"],
        "energy_j": s["energy_j"],
        "mean_latency_ms": s["mean_latency_ms"],
        "p99_latency_ms": s["p99_latency_ms"],
        "gear_switches": counters.get("upshifts", 0.0) + counters.get("downshifts", 0.0),
        "low_gear_percent": 100 * low / (low + high) if low + high else float("nan"),
        # Choice: each propagation copy is one chunk read and one chunk write at the array.
        "propagation_copies": copies,
        "extra_io_percent": 100 * 2 * copies / host if host else float("nan"),
    }


def _run(text: str) -> dict:
    from wattio.api import run

    return _row(run(text, progress=False, report=False).summary)


def _stretched_web(rate: float, scratch: Path) -> tuple[Path, float]:
    """The webserver capture at ``rate`` HTTP requests/s (its path, its span in seconds)."""
    from wattio import trace

    src = library.block_trace(WEB_WORKLOAD)
    dst = scratch / f"web-{rate:g}.parquet"
    trace.slice(src, dst, to_format="columnar", speedup=rate / WEB_CAPTURE_RATE)
    span = float(trace.read(dst)["arrival_ns"].max()) / 1e9
    return dst, span


#: Seconds of replay after the last arrival (both arrays), so every request completes.
TAIL_S = 5.0


@functools.cache
def _web_grid() -> dict:
    """{(speed, array): row} for the web replay (RAID-0 and PARAID-0 at each speed-up)."""
    with tempfile.TemporaryDirectory(prefix="wattio-paraid-") as d:
        tasks = []
        for speed, rate in WEB_SPEEDS.items():
            path, span = _stretched_web(rate, Path(d))
            table = f'[trace]\npath = "{path}"\nformat = "columnar"\n'
            for paraid in (False, True):
                tasks.append(((speed, paraid), config(0, paraid, table, span + TAIL_S)))
        rows = workers.map_runs(_run, [t for _, t in tasks])
    return {k: r for (k, _), r in zip(tasks, rows)}


@functools.cache
def _cello_grid(hours: float) -> dict:
    tasks = []
    for speed, x in CELLO_SPEEDS.items():
        for paraid in (False, True):
            text = config(5, paraid, _cello_workload(x, hours), hours * 3600 / x + TAIL_S)
            tasks.append(((speed, paraid), text))
    rows = workers.map_runs(_run, [t for _, t in tasks])
    return {k: r for (k, _), r in zip(tasks, rows)}


def _table(grid: dict, workload: str, level: int):
    import pandas as pd

    rows = []
    for speed in dict.fromkeys(k[0] for k in grid):
        base, pa = grid[(speed, False)], grid[(speed, True)]
        for paraid, r in ((False, base), (True, pa)):
            rows.append({"workload": workload, "speed": speed,
                         "array": ("PARAID-" if paraid else "RAID-") + str(level), **r,
                         "energy_saved_percent": 100 * (1 - pa["energy_j"] / base["energy_j"])
                         if paraid else 0.0})
    return pd.DataFrame(rows)


def _grid(workload: str, quick: bool) -> tuple[dict, int, list[str]]:
    if workload == "web":
        return _web_grid(), 0, [
            f"workloads/{WEB_WORKLOAD} stretched to the paper's HTTP rates: x "
            + ", ".join(f"{WEB_CAPTURE_RATE / r:.2f}" for r in WEB_SPEEDS.values())]
    hours = QUICK_CELLO_HOURS if quick else CELLO["hours"]
    return _cello_grid(hours), 5, [f"Cello99 stand-in (generated): {hours:g} h of the 50 h"]


def _savings(workload: str):
    def run(quick: bool) -> Outcome:
        grid, level, notes = _grid(workload, quick)
        table = _table(grid, workload, level)
        pa = table[table["array"].str.startswith("PARAID")]
        values = dict(zip(pa["speed"], pa["energy_saved_percent"]))

        def figure(ax):
            ax.plot(list(values), list(values.values()), "o-", label="wattio")
            paper = WEB_SAVINGS if workload == "web" else CELLO_SAVINGS
            ax.plot(list(paper), list(paper.values()), "s--", label="paper")
            ax.set_xlabel("replay speed-up")
            ax.set_ylabel("energy saved (%)")
            ax.legend(fontsize=8)

        return Outcome(values=values, table=table, figure=figure, notes=notes)

    return run


def _gear_stats(workload: str):
    def run(quick: bool) -> Outcome:
        grid, level, notes = _grid(workload, quick)
        table = _table(grid, workload, level)
        pa = table[table["array"].str.startswith("PARAID")]
        values = {}
        for col, label in GEAR_COLUMNS.items():
            for speed, v in zip(pa["speed"], pa[col]):
                values[f"{label}/{speed}"] = v
        return Outcome(values=values, table=table, notes=notes)

    return run


GEAR_COLUMNS = {"low_gear_percent": "time in low gear %", "gear_switches": "gear switches",
                "extra_io_percent": "extra I/O %"}


def _latency(quick: bool) -> Outcome:
    import pandas as pd

    web, _, n1 = _grid("web", quick)
    cello, _, n2 = _grid("cello", quick)
    slow_web, slow_cello = list(WEB_SPEEDS)[-1], list(CELLO_SPEEDS)[-1]
    values = {
        f"web {slow_web}/RAID-0": web[(slow_web, False)]["mean_latency_ms"],
        f"web {slow_web}/PARAID-0": web[(slow_web, True)]["mean_latency_ms"],
        f"Cello99 {slow_cello}/RAID-5": cello[(slow_cello, False)]["mean_latency_ms"],
        f"Cello99 {slow_cello}/PARAID-5": cello[(slow_cello, True)]["mean_latency_ms"],
    }
    table = pd.DataFrame([{"key": k, "mean_latency_ms": v} for k, v in values.items()])
    return Outcome(values=values, table=table, notes=n1 + n2)


WEB_SAVINGS = {"256x": 10.0, "128x": 28.0, "64x": 34.0}
CELLO_SAVINGS = {"128x": 3.5, "64x": 8.2, "32x": 13.0}

STAND_INS = (
    "Stand-ins, not the paper's traces: the web replay is workloads/webserver-paraid (apache2 + "
    "httperf, 95,000 requests over a 255 MB Zipf file set, on ext2 with atime written at every "
    "read as the paper's Linux 2.6.5 server; the page cache's misses), stretched "
    "so its HTTP rate is the paper's; the Cello99 replay is a generated workload calibrated to "
    "the extract's published statistics (requests, bytes, unique blocks, reads, 50 h) with a "
    "daily cycle. The disks are the catalogue's MAP3367: an average seek for any move, the "
    "paper's 5 MB on-disk cache (16 segments assumed, write-through); energy is the "
    "five disks' over the replay plus 5 s, RAID and PARAID alike. Trends are compared, not values."
)

WEB_TABLE3 = Experiment(
    name="paraid-web-savings",
    title="Web replay, RAID-0 {2,5}: energy saved grows as the replay slows (Table III)",
    paper=PAPER,
    reproduces="Table III (energy saved at 256x, 128x, 64x)",
    paper_values=WEB_SAVINGS,
    rule=SameTrend(tolerance_percent=2.0, same_sign=True),
    quantity="energy saved (%)",
    differs=STAND_INS,
    run=_savings("web"),
    functions=("raid", "paraid"),
    sources=("Table III: 10 %, 28 %, 34 % at 241, 121, 60 requests/s",),
)

WEB_TABLE4 = Experiment(
    name="paraid-web-gear-statistics",
    title="Web replay: time in low gear grows, switches and extra I/O fall as it slows (Table IV)",
    paper=PAPER,
    reproduces="Table IV (time in low gear, gear switches, extra propagation I/O)",
    paper_values={
        **{f"time in low gear %/{s}": v for s, v in zip(WEB_SPEEDS, (52.0, 88.0, 98.0))},
        **{f"gear switches/{s}": v for s, v in zip(WEB_SPEEDS, (15.2, 8.0, 2.0))},
        **{f"extra I/O %/{s}": v for s, v in zip(WEB_SPEEDS, (0.63, 0.37, 0.21))},
    },
    rule=SameTrend(tolerance_percent=2.0, group_separator="/"),
    quantity="per statistic",
    differs=STAND_INS + " Extra I/O counts two I/Os (a chunk read and write) per propagation "
    "copy, against the host's requests to the array.",
    run=_gear_stats("web"),
    functions=("raid", "paraid"),
)

CELLO_TABLE5 = Experiment(
    name="paraid-cello-savings",
    title="Cello99 replay, RAID-5 {3,5}: energy saved grows as the replay slows (Table V)",
    paper=PAPER,
    reproduces="Table V (energy saved at 128x, 64x, 32x)",
    paper_values=CELLO_SAVINGS,
    rule=SameTrend(tolerance_percent=2.0, same_sign=True),
    quantity="energy saved (%)",
    differs=STAND_INS,
    run=_savings("cello"),
    functions=("raid", "paraid"),
    sources=("Table V: 3.5 %, 8.2 %, 13 % at 1024, 548, 274 requests/s",),
)

CELLO_TABLE6 = Experiment(
    name="paraid-cello-gear-statistics",
    title="Cello99 replay: more time in low gear, fewer switches, more extra I/O as it slows "
    "(Table VI)",
    paper=PAPER,
    reproduces="Table VI (time in low gear, gear switches, extra propagation I/O)",
    paper_values={
        **{f"time in low gear %/{s}": v for s, v in zip(CELLO_SPEEDS, (47.0, 74.0, 88.0))},
        **{f"gear switches/{s}": v for s, v in zip(CELLO_SPEEDS, (6.0, 5.6, 5.4))},
        **{f"extra I/O %/{s}": v for s, v in zip(CELLO_SPEEDS, (8.0, 15.0, 21.0))},
    },
    rule=SameTrend(tolerance_percent=2.0, group_separator="/"),
    quantity="per statistic",
    differs=STAND_INS + " Extra I/O as in paraid-web-gear-statistics.",
    run=_gear_stats("cello"),
    functions=("raid", "paraid"),
)

LATENCY = Experiment(
    name="paraid-slow-replay-latency",
    title="At the slowest replay PARAID answers slower than the RAID (Sec. 6.3, 7.3)",
    paper=PAPER,
    reproduces="Sec. 6.3 (web 64x: 80 ms against 33 ms) and Sec. 7.3 (Cello99 32x: 1.8 ms "
    "against 1.4 ms)",
    paper_values={"web 64x/RAID-0": 1, "web 64x/PARAID-0": 2,
                  "Cello99 32x/RAID-5": 1, "Cello99 32x/PARAID-5": 2},
    rule=SameOrdering(group_separator="/"),
    quantity="mean response time (ms); the paper's ranks",
    differs=STAND_INS + " The paper's web latency is the client's (request sent to first "
    "byte); wattio's is the block request's response time at the array, as the paper's Cello99 "
    "completion time.",
    run=_latency,
    functions=("raid", "paraid"),
)

# --- PostMark (Sec. 8, Figs. 14 and 15): RAID-5 against PARAID-5 {3,5} started high or low ----
#
# Rules fixed before the runs they judge (the highest-gear replay had run once, while the
# hang fixed in 174ee08 was being found: 1.02 x RAID-5's time and energy, inside the rule
# already chosen). The paper prints no elapsed times or joules for Figs. 14/15, only "similar
# performance", "does not save energy at the highest gear" and "about 13 %"; its runs'
# standard deviations are "within 5 % of the measured values" (Sec. 6), which is the
# tolerance used. The workload is workloads/postmark-20k (the paper's 20K files and 100K
# transactions, captured at the block level), replayed closed-loop once on the five MAP3367s:
# its elapsed time is the replay's (first request to last completion, writes waiting for the
# array as PostMark's write-back did). The first runs upshifted on demand, the only mode then
# built (lowest gear 1.041, failing); the paper's PostMark "propagated updates synchronously
# during gear shifts", so since 01ee079 PARAID upshifts by full synchronization here, the
# rules unchanged, and the on-demand run is kept in the table for comparison.

#: The library's PostMark at the paper's scale (block level, closed-loop).
POSTMARK = "postmark-20k"
#: The three arrays of Figs. 14/15: RAID-5, and PARAID-5 {3,5} started in either gear
#: (start, upshift[, more keys]), upshifting as the paper's (full synchronization); and, for
#: comparison, the lowest start with on-demand upshifts and with the synchronization's host
#: writes sent to the replica only (`sync_writes = "replica"`, the function's only mode before
#: session 54: each such write adds a chunk to copy).
POSTMARK_ARRAYS = {
    "RAID-5": None,
    "PARAID highest gear": ("highest", "full"),
    "PARAID lowest gear": ("lowest", "full"),
    "PARAID lowest gear, on-demand upshift": ("lowest", "on-demand"),
    "PARAID lowest gear, sync writes to the replica only": (
        "lowest",
        "full",
        'sync_writes = "replica"\n',
    ),
}


#: Propagation copies in flight (PARAID's `copies`; 4 by default) tried besides the default on
#: the lowest-gear run: the full synchronization ends at the first instant no arriving disk's
#: chunk is newer on its replica while the low gear keeps taking writes, so its length (and
#: the slowdown) is a first-passage time, which timing moves far (the notes show how far).
POSTMARK_COPIES = (2, 3, 5, 6, 8)


def _postmark_replay(array: tuple | None) -> dict:
    from wattio import _core

    path = str(library.block_trace(POSTMARK))
    if array is None:
        function = _array(5, False)
    else:
        function = _array(5, True, array[0], array[1])
        for more in array[2:]:
            function += f"copies = {more}\n\n" if isinstance(more, int) else more + "\n"
    text = "[run]\nseed = 1\n\n" + _devices() + function
    r = json.loads(_core.trace_replay(path, text, 1, 0.0))
    run, c = r["runs"][0], r["counters"]
    return {
        "requests": r["requests"],
        "errors": r["errors"],
        "captured_s": r["captured_s"],
        "elapsed_s": run["end_s"] - run["start_s"],
        "energy_j": sum(d["energy_j"] for d in run["devices"].values()),
        "upshifts": c.get("upshifts", 0.0),
        "downshifts": c.get("downshifts", 0.0),
        "propagation_copies": c.get("propagation_copies", 0.0),
        "upshift_sync_s": c.get("upshift_sync_s", 0.0),
    }


@functools.cache
def _postmark() -> dict:
    """{array: row}: the PostMark replay on RAID-5 and on PARAID-5 started high and low."""
    rows = workers.map_runs(_postmark_replay, POSTMARK_ARRAYS.values())
    return dict(zip(POSTMARK_ARRAYS, rows))


@functools.cache
def _postmark_copies() -> dict:
    """{copies: row}: the lowest-gear PostMark replay with other numbers of copies in flight."""
    rows = workers.map_runs(_postmark_replay, [("lowest", "full", c) for c in POSTMARK_COPIES])
    return dict(zip(POSTMARK_COPIES, rows))


def _postmark_table():
    import pandas as pd

    runs = _postmark()
    base = runs["RAID-5"]
    return pd.DataFrame(
        [
            {
                "array": a,
                **r,
                "elapsed_vs_raid5": r["elapsed_s"] / base["elapsed_s"],
                "energy_vs_raid5": r["energy_j"] / base["energy_j"],
            }
            for a, r in runs.items()
        ]
    )


def _postmark_notes() -> list[str]:
    return [
        (
            f"workloads/{POSTMARK}, replayed closed-loop once (captured in "
            f"{_postmark()['RAID-5']['captured_s']:.1f} s on this VM's disk)"
        ),
        "energy: the five disks over each array's own elapsed time",
    ]


def _postmark_high(quick: bool) -> Outcome:
    table = _postmark_table()
    high = table[table["array"] == "PARAID highest gear"].iloc[0]
    values = {
        "elapsed time / RAID-5": high["elapsed_vs_raid5"],
        "energy / RAID-5": high["energy_vs_raid5"],
    }
    return Outcome(values=values, table=table, notes=_postmark_notes())


def _postmark_low(quick: bool) -> Outcome:
    table = _postmark_table()
    low = table[table["array"] == "PARAID lowest gear"].iloc[0]

    def figure(ax):
        ax.barh(table["array"], table["elapsed_s"], color=["0.6", "C0", "C1", "C2", "C3"])
        ax.set_xlabel("PostMark elapsed time (s)")
        ax.set_title("PostMark (20K files, 100K transactions) on five MAP3367s")

    base = _postmark()["RAID-5"]["elapsed_s"]
    # The judged row runs PARAID's own default (not restated here, so it cannot go stale).
    runs = {"default": _postmark()["PARAID lowest gear"], **_postmark_copies()}
    swing = ", ".join(
        f"{c}: {r['elapsed_s'] / base:.3f} ({r['upshift_sync_s']:.0f} s)" for c, r in runs.items()
    )
    return Outcome(
        values={"elapsed time / RAID-5": low["elapsed_vs_raid5"]},
        table=table,
        figure=figure,
        notes=_postmark_notes()
        + [
            (
                "copies in flight (the function's default is the row judged): elapsed / RAID-5 "
                f"(upshift synchronization) {swing}"
            )
        ],
    )


POSTMARK_DIFFERS = (
    "The paper ran PostMark on the server over the array (ext2 presumably, 512 MB of RAM, "
    "Linux 2.6.5 md); wattio replays workloads/postmark-20k, PostMark with the paper's 20K "
    "files and 100K transactions captured at the block level on an ext2 image of this VM "
    "with 2.6.5's write-back thresholds for 512 MB (its README), closed-loop: each request "
    "waits for what it waited for in the capture. The disks are the catalogue's MAP3367 "
    "with the paper's 5 MB on-disk cache (16 segments assumed; write-through, no "
    "read-ahead), so the small random writes of PostMark's write-back take far longer on "
    "the array than the 8.4 s they took on this VM's disk."
)

POSTMARK_HIGH = Experiment(
    name="paraid-postmark-highest-gear",
    title="PostMark: PARAID started in the highest gear runs as RAID-5 and saves nothing "
    "(Figs. 14, 15)",
    paper=PAPER,
    reproduces="Sec. 8, Figs. 14 and 15: 'PARAID starting with the highest gear demonstrates "
    "performance similar to RAID 5' and 'does not save energy at the highest gear'",
    paper_values={"elapsed time / RAID-5": 1.0, "energy / RAID-5": 1.0},
    rule=WithinPercent(5.0),
    quantity="PARAID over RAID-5 (elapsed time, disk energy)",
    differs=POSTMARK_DIFFERS,
    run=_postmark_high,
    functions=("raid", "paraid"),
    sources=("Sec. 6: standard deviations 'within 5 % of the measured values'",),
)

POSTMARK_LOW = Experiment(
    name="paraid-postmark-lowest-gear-slowdown",
    title="PostMark: PARAID started in the lowest gear is about 13 % slower than RAID-5 (Fig. 14)",
    paper=PAPER,
    reproduces="Sec. 8, Fig. 14: 'The slowdown factor is about 13 % due to upshift overhead'",
    paper_values={"elapsed time / RAID-5": 1.13},
    rule=WithinPercent(5.0),
    quantity="PARAID's elapsed time over RAID-5's",
    differs=POSTMARK_DIFFERS + " The upshift comes at the first 1 s utilization sample over "
    "the threshold (Eq. 3) and synchronizes fully, as the paper's (the arriving disks spin up "
    "and get back the chunks written in the low gear while the low gear serves; then the gear "
    "switches). Host writes meanwhile to clean chunks of an arriving disk that is up go to "
    "both sides (PARAID's default `sync_writes`, chosen from Sec. 5's text before this "
    "experiment ran with it), so only chunks newer at the decision or written before the disk "
    "was up are copied. With those writes sent to the replica only (the table's last row; the "
    "function's only mode before session 54) each added a chunk to copy, and the switch came "
    "at a first instant with none left: 1.295, a 168 s synchronization, and 1.29-2.06 over "
    "the copies in flight. The run judged uses PARAID's default number of copies in flight; "
    "the notes give the sweep, which spreads about the rule's lower edge (1.074).",
    run=_postmark_low,
    functions=("raid", "paraid"),
    sources=("Sec. 6: standard deviations 'within 5 % of the measured values'",),
)

EXPERIMENTS = (
    EQ2,
    WEB_TABLE3,
    WEB_TABLE4,
    CELLO_TABLE5,
    CELLO_TABLE6,
    LATENCY,
    POSTMARK_HIGH,
    POSTMARK_LOW,
)


def headline() -> str:
    s = gear_power.savings_range(gear_power.PROTOTYPE_DISKS, 2, gear_power.FUJITSU_MAP3367)
    return (
        f"PARAID Eq. 2, 5 disks with 2 spinning: {s['idle basis']:.1f}-{s['active basis']:.1f} % "
        f"less power (paper: 33 to 42 %; its prototype measured 34 % at 64x)"
    )


SYSTEM = System(prefix="paraid", title="PARAID, gear-shifting power-aware RAID",
                experiments=EXPERIMENTS, headline=headline)
