"""FS2: replicas in free disk space, read by head position (Huang, Hung, Shin, SOSP 2005;
Huang's thesis, ch. 5).

Experiments are named ``fs2-…``. The thesis ran each workload on a WD 80 GB 7200 rpm disk
with and without FS2 and printed the improvements of FS2-dynamic (after a learning run) in
disk busy time, access time T_A and its seek T_s and rotation T_r parts, energy per access,
user-perceived time and total energy; FS2-static (``mkfs2``: the data replicated once to the
middle of the disk) on TPC-W; and what the first, learning run costs.

wattio replays the workload library's captured traces closed-loop (each request waits for
what it waited for in the capture, then the captured think time: ``trace_replay``), twice,
on the catalogue's mechanical model of the thesis's disk (``wd800-fs2-mechanical``) and on a
DiskSim-validated drive, with and without ``kind = "fs2"``, and compares the second runs.

Every choice the thesis leaves open, fixed before the first run (docs/functions/fs2.md,
"Reproduction"):

* **Free space** is what a block layer cannot know from a trace: the disk's 4 KiB blocks the
  trace never touches are declared free (a file system spanning the disk whose used blocks
  are the workload's). This overstates free space by the blocks of files the workload never
  touches; the thesis's own survey found 60 % of disks more than 30 % free.
* **Epoch** (the thesis gives none): a twentieth of the captured workload's span, so that
  every workload sees the same number of hot-region decisions (the captures are 1.5–94 s,
  the thesis's runs 23 s–20 min).
* **Runs**: two, 2 s apart (the replicas of the first serve the second).
* **Copies** at the host's priority (``copy_priority = 0``): the thesis leaves committing
  replicas to the default I/O scheduler, as any write (set 2026-11-29, after a run at -1).
* **Metrics** per disk access over the second run (host I/O and FS2's copies alike: both
  are the disk's accesses): T_A = seek + rotation + transfer, energy per access = the seek
  and active states' energy / accesses; disk busy = busy time / the run's span;
  user-perceived time = the run's span; total energy = the disk's energy over it.

The rules were written, and this module committed, before any of these experiments was
first run. On 2026-11-28 the CVS row moved to a real ``cvs -q update`` capture
(``workloads/cvs-update``, switched before FS2 ran on it) and FS2 learned to write replicas
from the reads' bytes, gathered (docs/functions/fs2.md, "Reproduction"); the rules did not
change. On 2026-11-29 the SURGE and TPC-W rows moved to ``workloads/webserver-volume`` (the
same web server on a 72 GiB image, its data spread over the volume, as on the thesis's 80 GB
disk, instead of the first gigabyte of a 1 GB image; pre-registered, the rules unchanged),
FS2's copies went at the host's priority, as the thesis's, and the WD model gained its
datasheet 2 MB buffer (both decided after runs without them, disclosed in
docs/functions/fs2.md).
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

from wattio.reproduce import library
from wattio.reproduce.experiment import Experiment, Outcome, System
from wattio.reproduce.rules import Between, SameOrdering

PAPER = (
    "Hai Huang, Wei Hung, Kang G. Shin, 'FS2: Dynamic Data Replication in Free Disk Space "
    "for Improving Disk Performance and Energy Consumption', SOSP 2005; Huang, PhD thesis, "
    "University of Michigan, 2006, ch. 5"
)

#: The thesis's disk (Table 5.1) as a mechanical model, and a DiskSim-validated drive.
DISK = "wd800-fs2-mechanical"
VALIDATED = "quantum-atlas-10k"

#: Thesis workload → the library's stand-in (each README says how it differs).
WORKLOADS = {
    "CVS update": "cvs-update",
    "startx + KDE": "launch-office",
    "SURGE web": "webserver-volume",
}
#: TPC-W (a web shop over a database) has no block-level stand-in of its own: the web
#: server's trace stands in for it too.
TPCW = "webserver-volume"

RUNS = 2
#: The thesis commits replicas through "the default I/O scheduler" (Sec. 5.4.1), as it does
#: any write: FS2's copies go at the host's priority here, not below it (the function's
#: default, -1, is the issue's "at lower priority than the host's I/O").
COPY_PRIORITY = 0
GAP_S = 2.0
EPOCH_FRACTION = 1 / 20
BLOCK = 4096
#: A launch trace's requests span the capture machine's whole root disk (240 GB): its
#: address space is compacted in chunks of this size, in order, to fit the drives.
CHUNK = 1 << 30
#: The smallest piece a trace is compacted in.
MIN_CHUNK = 1 << 20

#: The thesis's results (FS2-dynamic vs Ext2, % improvement; the digest's table). Disk busy
#: is the relative reduction of the printed utilisations (31 % → 17 % is 45 %).
RESULTS = {
    "TPC-W": {"disk busy": 45.2, "T_A": 50, "T_s": 72, "T_r": 31, "energy per access": 55,
              "user-perceived": 34, "total energy": 6.7},
    "CVS update": {"disk busy": 11.0, "T_A": 41, "T_s": 38, "T_r": 53, "energy per access": 40,
                   "user-perceived": 31, "total energy": 31},
    "startx + KDE": {"disk busy": 29.7, "T_A": 44, "T_s": 53, "T_r": 47,
                     "energy per access": 46, "user-perceived": 16, "total energy": 19},
    "SURGE web": {"disk busy": 67.7, "T_A": 69, "T_s": 78, "T_r": 68, "energy per access": 71,
                  "user-perceived": 18, "total energy": 1.9},
}
ACCESS = ("disk busy", "T_A", "T_s", "T_r", "energy per access")
OVERALL = ("user-perceived", "total energy")
STATIC = {"T_A": 24, "T_s": 53, "T_r": -1.6}
LEARNING = {"CVS update: time": 6.0, "CVS update: energy": 7.0,
            "TPC-W: time": 1.7, "TPC-W: energy": 0.8}


def _extents(pages) -> list[list[int]]:
    """Sorted distinct 4 KiB page numbers → [[offset, len], …] byte extents."""
    out: list[list[int]] = []
    for p in pages:
        if out and out[-1][0] + out[-1][1] == p * BLOCK:
            out[-1][1] += BLOCK
        else:
            out.append([p * BLOCK, BLOCK])
    return out


@functools.cache
def _scratch() -> tempfile.TemporaryDirectory:
    """This process's scratch directory for compacted traces, removed at exit."""
    return tempfile.TemporaryDirectory(prefix="wattio-fs2-")


@functools.cache
def _capacity(drive: str) -> int:
    """The drive's capacity in bytes (from its catalogue entry)."""
    from wattio import _core

    return int(_core.device_capacity(drive))


#: (workload, drive) → the piece size its trace was compacted in, for the notes.
_CHUNKS: dict[tuple[str, str], int] = {}


@functools.cache
def _trace(workload: str, drive: str = DISK) -> tuple[str, tuple, tuple, float]:
    """The workload's trace ready to replay on ``drive`` (compacted to fit where it must),
    the pages its block requests touch and read, and its captured span in seconds."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = library.block_trace(workload)
    table = pq.read_table(path)
    df = table.to_pandas()
    block = df["dev"] == 0
    ends = (df.loc[block, "offset"] + df.loc[block, "len"]).to_numpy(dtype=np.int64)
    # A launch trace (captured on a whole root disk), or a block trace that reaches past
    # this drive's end: its address space is compacted in CHUNK-sized pieces, order kept;
    # where that still does not fit the drive, in pieces half the size, and so on.
    if df.loc[~block].shape[0] or (len(ends) and int(ends.max()) > _capacity(drive)):
        off = df.loc[block, "offset"].to_numpy(dtype=np.int64)
        lens = ends - off
        chunk = CHUNK
        while True:
            chunks = np.unique(off // chunk)
            rank = np.searchsorted(chunks, off // chunk)
            moved = rank * chunk + off % chunk
            if int((moved + lens).max()) <= _capacity(drive) or chunk <= MIN_CHUNK:
                break
            chunk //= 2
        df.loc[block, "offset"] = moved
        _CHUNKS[(workload, drive)] = chunk
        column = table.schema.get_field_index("offset")
        offsets = pa.array(df["offset"].to_numpy(), type=table.schema.field(column).type)
        fixed = table.set_column(column, table.schema.field(column), offsets)
        out = Path(_scratch().name) / f"{workload}-{drive}.parquet"
        pq.write_table(fixed.replace_schema_metadata(pq.read_metadata(path).metadata), out)
        path = out
    b = df[block & (df["len"] > 0)]
    touched, read = set(), set()
    for off, ln, op in zip(b["offset"], b["len"], b["op"], strict=True):
        pages = range(int(off) // BLOCK, (int(off) + int(ln) - 1) // BLOCK + 1)
        touched.update(pages)
        if op == 0:
            read.update(pages)
    arr = df.loc[block, "arrival_ns"]
    span = (arr.max() - arr.min()) / 1e9
    return str(path), tuple(sorted(touched)), tuple(sorted(read)), float(span)


#: Past the end of any drive: FS2 clips declared free space to its disk.
BEYOND = 1 << 50


def _free(touched) -> list[list[int]]:
    """The gaps between the extents of ``touched`` pages, up to :data:`BEYOND`."""
    free, at = [], 0
    for off, ln in _extents(touched):
        if off > at:
            free.append([at, off - at])
        at = off + ln
    free.append([at, BEYOND - at])
    return free


def _config(drive: str, workload: str, mode: str | None) -> str:
    """The run config: the drive, and FS2 (``mode`` dynamic or static) or nothing."""
    text = f'[run]\nseed = 1\n\n[[device]]\nname = "disk"\nmodel = "{drive}"\n'
    if mode is None:
        return text
    _, touched, read, span = _trace(workload, drive)
    text += (f'\n[[function]]\nkind = "fs2"\ndisk = "disk"\nmode = "{mode}"\n'
             f"epoch_s = {span * EPOCH_FRACTION:.6f}\ncopy_priority = {COPY_PRIORITY}\n"
             f"free = {json.dumps(_free(touched))}\n")
    if mode == "static":
        text += f"replicate = {json.dumps(_extents(read))}\n"
    return text


@functools.cache
def replay(drive: str, workload: str, mode: str | None) -> dict:
    """``trace_replay`` of the workload on the drive, with FS2 in ``mode`` or without."""
    from wattio import _core

    path = _trace(workload, drive)[0]
    return json.loads(_core.trace_replay(path, _config(drive, workload, mode), RUNS, GAP_S))


def _run_metrics(run: dict) -> dict:
    d = run["devices"]["disk"]
    n = max(d["ios"], 1)
    span = run["end_s"] - run["start_s"]
    e = d["energy_by_state_j"]
    return {
        "accesses": d["ios"],
        "disk busy": d["busy_s"] / span,
        "T_A": (d["seek_s"] + d["rotate_s"] + d["transfer_s"]) / n,
        "T_s": d["seek_s"] / n,
        "T_r": d["rotate_s"] / n,
        "energy per access": (e.get("seek", 0.0) + e.get("active", 0.0)) / n,
        "user-perceived": span,
        "total energy": d["energy_j"],
    }


def _improvement(base: float, fs2: float) -> float:
    return 100.0 * (base - fs2) / base if base else 0.0


def _compare(drive: str, workload: str, mode: str = "dynamic", run: int = 1) -> dict:
    """Per metric: without FS2, with it, and the improvement (%) in run ``run``."""
    b = _run_metrics(replay(drive, workload, None)["runs"][run])
    f = _run_metrics(replay(drive, workload, mode)["runs"][run])
    return {k: (b[k], f[k], _improvement(b[k], f[k])) for k in b if k != "accesses"} | {
        "accesses": (b["accesses"], f["accesses"], 0.0)}


def _table(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame(rows)


def _rows(drive: str, name: str, workload: str, mode: str = "dynamic") -> list[dict]:
    c = _compare(drive, workload, mode)
    counters = replay(drive, workload, mode)["counters"]
    return [{"drive": drive, "workload": name, "stand-in": workload, "mode": mode,
             "metric": k, "without FS2": v[0], "with FS2": v[1], "improvement %": v[2],
             "replicas_created": counters.get("replicas_created"),
             "reads_redirected": counters.get("reads_redirected")}
            for k, v in c.items()]


def _size(n: int) -> str:
    return f"{n >> 30} GiB" if n >= 1 << 30 else f"{n >> 20} MiB"


def _notes(drive: str, workloads) -> list[str]:
    compacted = [f"{w} in {_size(_CHUNKS[(w, drive)])} pieces" for w in workloads
                 if (w, drive) in _CHUNKS]
    return [
        (f"closed-loop replay, {RUNS} runs {GAP_S:g} s apart, the second compared; "
        f"epoch = {EPOCH_FRACTION:g} of the workload's captured span; free space = every "
        "4 KiB block of the disk the trace never touches"),
        ("the launch trace's block addresses, and any trace's that reach past the drive's end, "
        f"are compacted in {_size(CHUNK)} pieces (order kept) to fit the drive, in pieces "
        "half the size while they do not"
        + (f"; on {drive}: " + ", ".join(compacted) if compacted else "")),
    ]


def _dynamic(metrics: tuple[str, ...], drive: str = DISK, names=tuple(WORKLOADS)):
    def run(quick: bool) -> Outcome:
        rows, values = [], {}
        for name in names:
            w = WORKLOADS[name]
            rows += _rows(drive, name, w)
            c = _compare(drive, w)
            for m in metrics:
                values[f"{name}: {m}"] = c[m][2]
        return Outcome(values=values, table=_table(rows),
                       notes=_notes(drive, [WORKLOADS[n] for n in names]))

    return run


def _static(quick: bool) -> Outcome:
    values, rows = {}, []
    for mode in ("static", "dynamic"):
        c = _compare(DISK, TPCW, mode)
        for m in STATIC:
            values[f"{m}: {mode}"] = c[m][2]
        rows += _rows(DISK, "TPC-W", TPCW, mode)
    return Outcome(values=values, table=_table(rows), notes=_notes(DISK, [TPCW]))


def _learning(quick: bool) -> Outcome:
    values, rows = {}, []
    for name, w in (("CVS update", WORKLOADS["CVS update"]), ("TPC-W", TPCW)):
        c = _compare(DISK, w, "dynamic", run=0)
        # A cost: the first run's time and energy with FS2 over those without, in %.
        values[f"{name}: time"] = -c["user-perceived"][2]
        values[f"{name}: energy"] = -c["total energy"][2]
        for k, v in c.items():
            rows.append({"workload": name, "stand-in": w, "run": "learning (first)",
                         "metric": k, "without FS2": v[0], "with FS2": v[1],
                         "improvement %": v[2]})
    return Outcome(values=values, table=_table(rows),
                   notes=_notes(DISK, [WORKLOADS["CVS update"], TPCW]))


_SETUP = (
    "The thesis's workloads are not available: the library's captures (CVS update: a real "
    "`cvs -q update` of a ~8,700-file source tree on a 72 GiB ext4 image, where ext4 put the "
    "repository and the working copy 20 GiB apart, 17,462 requests in 3.7 s; startx + KDE: a "
    "cold LibreOffice launch, 776 block requests; SURGE and TPC-W: apache2 serving a 255 MB "
    "Zipf file set on a 72 GiB image, the site's directories at its top level, which ext4 "
    "spread over 70 GiB, 13,253 requests over 93 s), replayed closed-loop on the thesis's "
    "disk as a mechanical model rather than run on the disk. The replays keep the disk "
    "busier than the thesis's runs (CVS 98 %, SURGE 94 % without FS2), which leaves FS2's "
    "low-priority copies little idle time. The launch's pieces of the root disk, compacted, "
    "are far smaller than the thesis's file system, so its seeks are short (1 GB of this "
    "drive's outer zone spans about 560 cylinders: no seek within it exceeds 2.8 ms)."
)

DYNAMIC = Experiment(
    name="fs2-dynamic",
    title="FS2-dynamic cuts disk busy time, access time, seek, rotation and energy per access",
    paper=PAPER,
    reproduces="Sec. 5.5 results table (FS2-dynamic vs Ext2, % improvement)",
    paper_values={f"{n}: {m}": float(RESULTS[n][m]) for n in WORKLOADS for m in ACCESS},
    rule=Between(5.0, 100.0),
    quantity="improvement (%) in the second run",
    differs=_SETUP,
    run=_dynamic(ACCESS),
    functions=("fs2",),
)

OVERALL_EXP = Experiment(
    name="fs2-overall",
    title="User-perceived time and total energy do not get worse",
    paper=PAPER,
    reproduces="Sec. 5.5 results table: user-perceived time and total energy (16–34 %, "
    "1.9–31 %)",
    paper_values={f"{n}: {m}": float(RESULTS[n][m]) for n in WORKLOADS for m in OVERALL},
    rule=Between(0.0, 100.0),
    quantity="improvement (%) in the second run",
    differs=_SETUP + " Both figures are diluted by think time, which FS2 cannot shorten.",
    run=_dynamic(OVERALL),
    functions=("fs2",),
)

RANKS = Experiment(
    name="fs2-per-access-falls-most",
    title="T_A, T_s and energy per access fall more than user-perceived time and total energy",
    paper=PAPER,
    reproduces="Sec. 5.5 results table (on every workload, each of T_A, T_s, energy per "
    "access improves more than user-perceived time and total energy)",
    paper_values={f"{n}: {m}": (2.0 if m not in OVERALL else 1.0)
                  for n in WORKLOADS for m in ("T_A", "T_s", "energy per access", *OVERALL)},
    rule=SameOrdering(group_separator=": "),
    quantity="rank of the improvement (2 = per-access figures, 1 = overall)",
    differs=_SETUP,
    run=_dynamic(("T_A", "T_s", "energy per access", *OVERALL)),
    functions=("fs2",),
)

STATIC_EXP = Experiment(
    name="fs2-static-vs-dynamic",
    title="FS2-static (replicas once in the middle of the disk) gains less than FS2-dynamic",
    paper=PAPER,
    reproduces="Sec. 5.5: FS2-static on TPC-W, T_A 24 %, T_s 53 %, T_r -1.6 % (dynamic: 50, "
    "72, 31 %)",
    paper_values={f"{m}: {mode}": float(v) for m in STATIC
                  for mode, v in (("static", STATIC[m]), ("dynamic", RESULTS["TPC-W"][m]))},
    rule=SameOrdering(group_separator=": "),
    quantity="improvement (%) in the second run",
    differs=_SETUP + " Static mode replicates every block the trace reads to the region "
    "holding the middle of the disk at start (the thesis's mkfs2 of the data set).",
    run=_static,
    functions=("fs2",),
)

LEARNING_EXP = Experiment(
    name="fs2-learning-run",
    title="The first, learning run costs a little time and energy",
    paper=PAPER,
    reproduces="Sec. 5.5: first run +1.7 % response time and +0.8 % energy (TPC-W); CVS +6 % "
    "time, +7 % energy",
    paper_values=LEARNING,
    rule=Between(0.0, 10.0),
    quantity="cost (%) of the first run with FS2 over the same run without",
    differs=_SETUP,
    run=_learning,
    functions=("fs2",),
)

VALIDATED_NAMES = ("CVS update", "SURGE web")

VALIDATED_EXP = Experiment(
    name="fs2-validated-drive",
    title="FS2-dynamic on a DiskSim-validated drive (Quantum Atlas 10K)",
    paper=PAPER,
    reproduces="Sec. 5.5 results table, T_A, T_s and energy per access, on another drive",
    paper_values={f"{n}: {m}": float(RESULTS[n][m]) for n in VALIDATED_NAMES
                  for m in ("T_A", "T_s", "energy per access")},
    rule=Between(5.0, 100.0),
    quantity="improvement (%) in the second run",
    differs=_SETUP + " The drive is DiskSim's validated Atlas 10K (9.1 GB, 10,025 rpm), "
    "whose datasheet power has no seek state (energy per access then follows T_A); the "
    "launch trace's compacted span does not fit it; the CVS capture's is compacted to fit "
    "(repository and working copy then 2 GiB apart).",
    run=_dynamic(("T_A", "T_s", "energy per access"), VALIDATED, VALIDATED_NAMES),
    functions=("fs2",),
)


def headline() -> str:
    c = _compare(DISK, WORKLOADS["CVS update"])
    change = -c["T_A"][2]
    return (f"fs2: replicas in free space change a cvs update's disk access time by "
            f"{change:+.0f} % on the thesis's WD 80 GB (wattio reproduce fs2)")


SYSTEM = System(
    prefix="fs2",
    title="FS2: replicas in free disk space (SOSP 2005; thesis ch. 5)",
    experiments=(DYNAMIC, OVERALL_EXP, RANKS, STATIC_EXP, LEARNING_EXP, VALIDATED_EXP),
    headline=headline,
)
