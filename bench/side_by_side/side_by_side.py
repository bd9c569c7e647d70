"""wattio side by side with DiskSim 4.0 and MQSim, on the same trace, in one run.

    python3 bench/side_by_side/side_by_side.py                 # 1 M requests each, 3 runs
    python3 bench/side_by_side/side_by_side.py --requests 2000 --repeat 1 --json out.json

Two comparisons (docs/benchmarks.md, "Side by side with DiskSim and MQSim"):

* **disksim**: open arrivals (exponential gaps, mean 20 ms), 4–64 KiB in 4 KiB steps,
  uniform 4 KiB-aligned offsets over the whole drive, 2/3 reads, through the Seagate
  cheetah4LP (ST34501N) — DiskSim runs `cheetah4LP.parv` from `shared/disksim-valid/` on a
  DiskSim ascii trace (in runs of `DISKSIM_CHUNK` requests: WD's DiskSim stops at 200,000),
  wattio the same drive imported with `wattio disk import` on the same file (`--format
  disksim`). The trace avoids the one track DiskSim hangs on (`DISKSIM_AVOID`).
* **mqsim**: one request every 100 µs, 4–64 KiB in 4 KiB steps, uniform 4 KiB-aligned
  offsets over the logical capacity, 70 % reads, through MQSim's default `ssdconfig.xml`
  (trace-based flow, 70 % initial occupancy, write cache) and wattio's
  `mqsim-default-ssd` catalogue entry, on the same MQSim trace (`--format mqsim`).

Both peers are built from `<checkout>/../shared/{disksim,mqsim}-src/` (or `$WATTIO_SHARED`)
with their own `build.sh`, into a cache (`--cache`, default `target/side_by_side/`) keyed by
the tarball's hash, so later runs reuse them (DiskSim builds in ~40 s at -j1, MQSim in
~2 min on two cores). A peer whose sources or build tools are absent is skipped with the
reason; wattio still runs. Traces are generated from `--seed` (Python's
`random.Random`, algorithm below) and cached too.

Each program runs `--repeat` times as a child process; the figures are its wall time
(process start to exit: for wattio, through `summary.json` written), its user + system CPU
time and its peak RSS (`wait4`'s rusage), median of the runs. wattio writes only
`summary.json` (`[output] requests/timeline/report = false`), as the peers write only their
summaries. The mean response times come from DiskSim's `.outv` (`IOdriver Response time
average`), MQSim's result XML (`End_to_End_Request_Delay` of the flow, µs) and wattio's
`summary.json` (`mean_latency_ms`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The cheetah4LP comparison's workload (issue 10).
DISK_GAP_MS = 20.0
DISK_READ_FRACTION = 2 / 3
# The MQSim comparison's workload (shared/mqsim-src/README.md's measurement).
SSD_GAP_NS = 100_000
SSD_READ_FRACTION = 0.7
SSD_OCCUPANCY_PERCENT = 70
# DiskSim 4.0 never finishes a read that touches this LBN range of cheetah4LP (found by
# bisection with one-request traces: a read of 8 blocks at 2,316,227 … 2,316,515 runs forever,
# one at 2,316,520 completes in milliseconds). It is the track of the drive's one remapped
# defect (cheetah4LP.model: `defects = [233375, 233375]`), which DiskSim's validation trace
# never reads. The generator draws the start again for a request that would overlap it.
DISKSIM_AVOID = (2_316_000, 2_317_000)
# Western Digital's DiskSim release logs every request in a fixed array of
# MAX_NUM_SIM_RESULTS = 200,000 entries (src/disksim_simresult.h) and aborts past it ("Need to
# increase size of Sim Results"), so it runs a longer trace as consecutive chunks of this
# many requests, each from an idle drive, time rebased to 0; its figure is the sum of the
# chunks' times and the request-weighted mean of their means.
DISKSIM_CHUNK = 100_000
# 4 KiB .. 64 KiB in 4 KiB steps, in 512-byte sectors.
SIZES = [8 * k for k in range(1, 17)]
# MQSim's logical capacity under its default ssdconfig.xml (and the mqsim-default-ssd
# entry's capacity_bytes): floor(67,108,864 pages x (1 - 0.07)) x 16 sectors.
MQSIM_SECTORS = 62_411_243 * 16


def shared_dir() -> Path:
    env = os.environ.get("WATTIO_SHARED")
    if env:
        return Path(env)
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return Path(top).parent / "shared"
    except (OSError, subprocess.CalledProcessError):
        return ROOT.parent / "shared"


class Skip(Exception):
    """A peer cannot run here (sources or tools absent); the message says why."""


# ---------------------------------------------------------------------------------------
# traces


def write_trace(path: Path, n: int, seed: int, kind: str, blocks: int) -> Path:
    """`n` requests, seeded. Per request, in this order: the gap (disksim: `expovariate`
    with mean 20 ms; mqsim: none, a fixed 100 µs), the size (`choice(SIZES)`), the start
    (`randrange` over the 4 KiB-aligned starts that fit in `blocks`; disksim: drawn again
    while the request overlaps `DISKSIM_AVOID`), the direction (`random() < read
    fraction`). disksim lines: `time_ms 0 blkno bcount 1|0` (6 decimals,
    ns resolution); mqsim lines: `time_ns 0 lba sectors 1|0`."""
    if path.exists():
        return path
    rng = random.Random(seed)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        t = 0.0
        for i in range(n):
            if kind == "disksim":
                t += rng.expovariate(1.0 / DISK_GAP_MS)
            size = rng.choice(SIZES)
            start = 8 * rng.randrange((blocks - size) // 8 + 1)
            while kind == "disksim" and start < DISKSIM_AVOID[1] and start + size > DISKSIM_AVOID[0]:
                start = 8 * rng.randrange((blocks - size) // 8 + 1)
            if kind == "disksim":
                read = rng.random() < DISK_READ_FRACTION
                f.write(f"{t:.6f} 0 {start} {size} {int(read)}\n")
            else:
                read = rng.random() < SSD_READ_FRACTION
                f.write(f"{(i + 1) * SSD_GAP_NS} 0 {start} {size} {int(read)}\n")
    tmp.rename(path)
    return path


# ---------------------------------------------------------------------------------------
# running and measuring a program


@dataclass
class Sample:
    wall_s: float
    cpu_s: float
    rss_mib: float


@dataclass
class Result:
    program: str
    samples: list[Sample] = field(default_factory=list)
    mean_ms: float | None = None
    note: str = ""

    def median(self, attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in self.samples)


def measure(cmd: list[str], cwd: Path, log: Path) -> Sample:
    """Runs `cmd` to completion; wall time around it, CPU time and peak RSS from wait4."""
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}:\n{tail}")
    return Sample(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024)


# ---------------------------------------------------------------------------------------
# the peers


def tarball_key(tar: Path) -> str:
    return hashlib.sha256(tar.read_bytes()).hexdigest()[:12]


# MQSim's Makefile compiles with -O3 -g: two minutes on two cores. A correctness check of the
# harness (tests/test_side_by_side.py, --quick-peers) needs its answers, not its speed: make
# takes command-line variables from MAKEFLAGS, so build.sh's `make` compiles at -O1 without
# debug information instead (about 40 s), into a cache directory of its own.
QUICK_MAKEFLAGS = {"mqsim": r"CC_FLAGS=-std=c++11\ -O1"}


def build_peer(name: str, shared: Path, cache: Path, tools: list[str], rel_binary: str,
               quick: bool = False) -> Path:
    """Builds `shared/<name>-src` with its build.sh into the cache once per tarball (and per
    build kind: `quick` is QUICK_MAKEFLAGS's, for correctness checks, never for timings)."""
    src = shared / f"{name}-src"
    script = src / "build.sh"
    tars = sorted(src.glob("*.tar.gz")) if src.is_dir() else []
    if not script.exists() or not tars:
        raise Skip(f"{name}: no sources in {src} (build.sh and the tarball)")
    env = None
    suffix = ""
    if quick and name in QUICK_MAKEFLAGS:
        env = {**os.environ, "MAKEFLAGS": QUICK_MAKEFLAGS[name]}
        suffix = "-quick"
    dest = cache / "peers" / f"{name}-{tarball_key(tars[0])}{suffix}"
    binary = dest / rel_binary
    if binary.exists():
        return binary
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise Skip(f"{name}: cannot build it, missing {', '.join(missing)} (scripts/apt-packages.txt)")
    if dest.exists():
        shutil.rmtree(dest)
    print(f"building {name} from {src} into {dest} ...", flush=True)
    t0 = time.perf_counter()
    p = subprocess.run(["bash", str(script), str(dest)], capture_output=True, text=True, check=False,
                       env=env)
    if p.returncode != 0 or not binary.exists():
        raise RuntimeError(f"building {name} failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    print(f"built {name} in {time.perf_counter() - t0:.0f} s", flush=True)
    return binary


def split_disksim(trace: Path, chunk: int) -> list[tuple[Path, int]]:
    """The trace as files of at most `chunk` requests, each rebased to start at time 0."""
    parts, lines = [], []

    def flush():
        t0 = float(lines[0].split(" ", 1)[0])
        part = trace.with_name(f"{trace.stem}.part{len(parts)}.disksim")
        if not part.exists():
            with open(part, "w") as f:
                for line in lines:
                    t, rest = line.split(" ", 1)
                    f.write(f"{float(t) - t0:.6f} {rest}")
        parts.append((part, len(lines)))
        lines.clear()

    with open(trace) as f:
        for line in f:
            lines.append(line)
            if len(lines) == chunk:
                flush()
    if lines:
        flush()
    return parts


def disksim_mean_ms(outv: Path) -> float:
    m = re.search(r"^IOdriver Response time average:\s*([0-9.]+)", outv.read_text(errors="replace"), re.MULTILINE)
    if not m:
        raise RuntimeError(f"{outv}: no `IOdriver Response time average` line")
    return float(m.group(1))


def mqsim_mean_ms(result_xml: Path) -> float:
    import xml.etree.ElementTree as ET

    flow = ET.parse(result_xml).getroot().find("Host/Host.IO_Flow")
    if flow is None or flow.find("End_to_End_Request_Delay") is None:
        raise RuntimeError(f"{result_xml}: no Host.IO_Flow/End_to_End_Request_Delay")
    return float(flow.find("End_to_End_Request_Delay").text) / 1000.0  # µs


MQSIM_WORKLOAD = """<?xml version="1.0" encoding="us-ascii"?>
<MQSim_IO_Scenarios>
\t<IO_Scenario>
\t\t<IO_Flow_Parameter_Set_Trace_Based>
\t\t\t<Priority_Class>HIGH</Priority_Class>
\t\t\t<Device_Level_Data_Caching_Mode>WRITE_CACHE</Device_Level_Data_Caching_Mode>
\t\t\t<Channel_IDs>0,1,2,3,4,5,6,7</Channel_IDs>
\t\t\t<Chip_IDs>0,1,2,3</Chip_IDs>
\t\t\t<Die_IDs>0,1</Die_IDs>
\t\t\t<Plane_IDs>0,1</Plane_IDs>
\t\t\t<Initial_Occupancy_Percentage>{occupancy}</Initial_Occupancy_Percentage>
\t\t\t<File_Path>{trace}</File_Path>
\t\t\t<Percentage_To_Be_Executed>100</Percentage_To_Be_Executed>
\t\t\t<Relay_Count>1</Relay_Count>
\t\t\t<Time_Unit>NANOSECOND</Time_Unit>
\t\t</IO_Flow_Parameter_Set_Trace_Based>
\t</IO_Scenario>
</MQSim_IO_Scenarios>
"""


# ---------------------------------------------------------------------------------------
# wattio


def wattio_command(given: str | None) -> list[str]:
    if given:
        return given.split()
    venv = ROOT / ".venv" / "bin" / "wattio"
    if venv.exists():
        return [str(venv)]
    if shutil.which("wattio"):
        return ["wattio"]
    return [sys.executable, "-m", "wattio.cli"]


def wattio_config(work: Path, name: str, model: str, catalogue: str | None = None) -> Path:
    cfg = work / f"{name}.toml"
    cfg.write_text(
        (f'catalogue = ["{catalogue}"]\n\n' if catalogue else "")
        + f'[run]\nname = "{name}"\n\n'
        + f'[[device]]\nname = "dev"\nmodel = "{model}"\n\n'
        + "[output]\nrequests = false\ntimeline = false\nreport = false\n"
    )
    return cfg


# `wattio disk import` leaves the [power] table to the user (DiskSim has none); the
# comparison is of time, so one constant state does.
POWER_TABLE = """
[power]
idle = "idle"
active = "idle"

[[power.state]]
name = "idle"
watts = 0.0
source = "assumed: none, the side-by-side benchmark compares time only"
"""


# ---------------------------------------------------------------------------------------
# request by request (tests/test_side_by_side.py, queue_orders.py)


def with_exectrace(parv: str) -> str:
    """A `.parv`'s text asking DiskSim for its execution trace (`exectrace`: each
    request's completion)."""
    out, k = re.subn(r"(Stat definition file\s*=\s*statdefs)", r"\1,\nDetailed execution trace = exectrace",
                     parv, count=1)
    assert k == 1, "no `Stat definition file = statdefs` line"
    return out


def with_driver_policy(parv: str, policy: int) -> str:
    """A `.parv`'s text with its device driver's `Scheduling policy` (1 there) set to `policy`."""
    out, k = re.subn(r"(disksim_iodriver DRIVER0 \{.*?Scheduling policy\s*=\s*)1", rf"\g<1>{policy}", parv,
                     count=1, flags=re.DOTALL)
    assert k == 1, "no device driver with policy 1"
    return out


def disksim_finish_ms(binary: Path, work: Path, parv: str, trace: str, lines: list[str]):
    """Each request's finish time (ms, by request) when DiskSim runs `work/parv` (asking for
    its execution trace) on the ascii trace `work/trace` of `lines`. The execution trace
    numbers requests as they complete (`tagID`), so a request is found by its block: the
    earliest pending one there (every order DiskSim is run with here keeps arrival order
    among requests at the same block)."""
    import numpy as np
    import pandas as pd

    subprocess.run([str(binary), parv, f"{Path(parv).stem}.outv", "ascii", trace, "0"], cwd=work, check=True,
                   capture_output=True)
    done = pd.read_csv(work / "exectrace")
    assert len(done) == len(lines), (len(done), len(lines))
    pending: dict[int, list[int]] = {}
    for i, ln in enumerate(lines):
        pending.setdefault(int(ln.split()[2]), []).append(i)
    finish = np.empty(len(lines))
    for blkno, t in zip(done["blkno"], done["simtime"]):
        finish[pending[int(blkno)].pop(0)] = t
    return finish


def wattio_import(wattio: list[str], parv: Path, drives: Path) -> tuple[Path, str]:
    """`wattio disk import` of `parv` into the catalogue directory `drives` (with the
    comparison's power table): the entry and what the import said on stderr."""
    drives.mkdir(exist_ok=True)
    entry = drives / f"{parv.stem}.toml"
    p = subprocess.run([*wattio, "disk", "import", str(parv), "--out", str(entry)], capture_output=True,
                       text=True, check=True)
    entry.write_text(entry.read_text() + POWER_TABLE)
    return entry, p.stderr


def wattio_finish_ms(wattio: list[str], work: Path, model: str, trace: Path, n: int, run: str = "wattio"):
    """Each request's finish time (ms, by request) of `wattio run` on the entry `model` of
    `work/drives` for the DiskSim ascii `trace` of `n` requests (output in `work/out-RUN`)."""
    import pandas as pd

    cfg = wattio_config(work, model, model, catalogue="drives")
    cfg.write_text(cfg.read_text().replace("requests = false", "requests = true"))
    out = work / f"out-{run}"
    subprocess.run([*wattio, "run", str(cfg), "--trace", str(trace), "--format", "disksim", "--out", str(out),
                    "--quiet"], check=True, capture_output=True)
    w = pd.read_parquet(out / "requests.parquet").sort_values("id")
    assert len(w) == n, (len(w), n)
    return w["finish_ns"].to_numpy() / 1e6


def run_wattio(wattio: list[str], cfg: Path, trace: Path, fmt: str, out: Path, repeat: int, label: str) -> Result:
    r = Result(label)
    for i in range(repeat):
        cmd = [*wattio, "run", str(cfg), "--trace", str(trace), "--format", fmt, "--out", str(out), "--quiet", "--json"]
        r.samples.append(measure(cmd, cfg.parent, out.parent / f"{out.name}.{i}.log"))
    s = json.loads((out / "summary.json").read_text())
    if s["errors"]:
        raise RuntimeError(f"{label}: {s['errors']} requests failed (see {out}/summary.json)")
    r.mean_ms = s["mean_latency_ms"]
    r.note = f"{s['requests']:,} requests"
    return r


def to_columnar(wattio: list[str], trace: Path, fmt: str) -> Path:
    col = trace.with_suffix(".parquet")
    if not col.exists():
        subprocess.run(
            [*wattio, "trace", "convert", str(trace), str(col), "--from", fmt],
            check=True,
            capture_output=True,
        )
    return col


# ---------------------------------------------------------------------------------------
# the two comparisons


def compare_disksim(args, shared: Path, cache: Path, wattio: list[str]) -> list[Result]:
    valid = shared / "disksim-valid"
    parv = valid / "cheetah4LP.parv"
    if not parv.exists():
        raise Skip(f"disksim: no {parv}")
    blocks = int(re.search(r"Block count = (\d+)", (valid / "cheetah4LP.model").read_text()).group(1))
    work = args.work / "disksim"
    work.mkdir(parents=True, exist_ok=True)
    trace = write_trace(work / f"random-v1-{args.requests}-s{args.seed}.disksim", args.requests, args.seed, "disksim", blocks)
    results = []
    wattio_import(wattio, parv, work / "drives")
    cfg = wattio_config(work, "side-by-side-disksim", "cheetah4LP", catalogue="drives")
    results.append(run_wattio(wattio, cfg, trace, "disksim", work / "wattio-out", args.repeat, "wattio (DiskSim ascii)"))
    if args.columnar:
        col = to_columnar(wattio, trace, "disksim")
        results.append(run_wattio(wattio, cfg, col, "columnar", work / "wattio-out-col", args.repeat, "wattio (columnar)"))
    try:
        binary = build_peer("disksim", shared, cache, ["gcc", "make", "bison", "flex"], "disksim-4.0-wd/src/disksim")
    except Skip as e:
        results.append(Result("DiskSim 4.0", note=f"skipped: {e}"))
        return results
    parts = split_disksim(trace, DISKSIM_CHUNK)
    r = Result("DiskSim 4.0 -O2")
    if len(parts) > 1:
        r.note = f"in {len(parts)} runs of <= {DISKSIM_CHUNK:,} requests"
    for i in range(args.peer_repeat):
        runs, weighted = [], 0.0
        for k, (part, n) in enumerate(parts):
            outv = work / f"disksim.part{k}.outv"
            # cheetah4LP.parv `source`s its .diskspecs, .model and .seek relative to the cwd.
            cmd = [str(binary), str(parv), str(outv), "ascii", str(part), "0"]
            runs.append(measure(cmd, valid, work / f"disksim.{i}.part{k}.log"))
            weighted += n * disksim_mean_ms(outv)
        r.samples.append(
            Sample(sum(x.wall_s for x in runs), sum(x.cpu_s for x in runs), max(x.rss_mib for x in runs))
        )
        r.mean_ms = weighted / args.requests
    results.append(r)
    return results


def compare_mqsim(args, shared: Path, cache: Path, wattio: list[str]) -> list[Result]:
    work = args.work / "mqsim"
    work.mkdir(parents=True, exist_ok=True)
    trace = write_trace(work / f"random-v1-{args.requests}-s{args.seed}.mqsim", args.requests, args.seed, "mqsim", MQSIM_SECTORS)
    results = []
    cfg = wattio_config(work, "side-by-side-mqsim", "mqsim-default-ssd")
    results.append(run_wattio(wattio, cfg, trace, "mqsim", work / "wattio-out", args.repeat, "wattio (MQSim trace)"))
    if args.columnar:
        col = to_columnar(wattio, trace, "mqsim")
        results.append(run_wattio(wattio, cfg, col, "columnar", work / "wattio-out-col", args.repeat, "wattio (columnar)"))
    try:
        binary = build_peer("mqsim", shared, cache, ["g++", "make"], "mqsim/MQSim", args.quick_peers)
    except Skip as e:
        results.append(Result("MQSim", note=f"skipped: {e}"))
        return results
    shutil.copy(binary.parent / "ssdconfig.xml", work / "ssdconfig.xml")
    wl = work / "workload.xml"
    wl.write_text(MQSIM_WORKLOAD.format(occupancy=SSD_OCCUPANCY_PERCENT, trace=trace))
    r = Result("MQSim", note="built -O1 (--quick-peers): its times are not comparable" if args.quick_peers else "")
    for i in range(args.peer_repeat):
        cmd = [str(binary), "-i", "ssdconfig.xml", "-w", wl.name]
        r.samples.append(measure(cmd, work, work / f"mqsim.{i}.log"))
    r.mean_ms = mqsim_mean_ms(work / "workload_scenario_1.xml")
    results.append(r)
    return results


def report(title: str, results: list[Result]) -> dict:
    print(f"\n{title}")
    print(f"  {'program':<24} {'wall s':>9} {'CPU s':>9} {'peak RSS MiB':>13} {'mean resp. ms':>14}  ratio (wall, CPU)")
    peer = next((r for r in results if r.samples and not r.program.startswith("wattio")), None)
    rows = []
    for r in results:
        if not r.samples:
            print(f"  {r.program:<24} {r.note}")
            rows.append({"program": r.program, "note": r.note})
            continue
        wall, cpu, rss = r.median("wall_s"), r.median("cpu_s"), r.median("rss_mib")
        ratio = ""
        row = {"program": r.program, "wall_s": wall, "cpu_s": cpu, "rss_mib": rss, "mean_ms": r.mean_ms, "note": r.note, "samples": [asdict(s) for s in r.samples]}
        if peer is not None and r is not peer:
            rw, rc = peer.median("wall_s") / wall, peer.median("cpu_s") / cpu
            ratio = f"{rw:6.1f}x {rc:6.1f}x"
            row.update(ratio_wall=rw, ratio_cpu=rc)
        mean = f"{r.mean_ms:.3f}" if r.mean_ms is not None else "-"
        note = f"  ({r.note})" if r.note else ""
        print(f"  {r.program:<24} {wall:9.3f} {cpu:9.3f} {rss:13.1f} {mean:>14}  {ratio}{note}")
        rows.append(row)
    return {"title": title, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3, help="runs of each wattio variant (median)")
    p.add_argument("--peer-repeat", type=int, help="runs of each peer (default: --repeat)")
    p.add_argument("--seed", type=int, default=10)
    p.add_argument("--only", choices=["disksim", "mqsim"])
    p.add_argument("--no-columnar", dest="columnar", action="store_false", help="skip wattio on the columnar trace")
    p.add_argument("--cache", type=Path, default=ROOT / "target" / "side_by_side")
    p.add_argument("--work", type=Path, help="traces and run outputs (default: --cache)")
    p.add_argument("--shared", type=Path, help="the shared/ folder (default: beside the checkout)")
    p.add_argument("--wattio", help="the wattio command (default: .venv/bin/wattio)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--quick-peers", action="store_true",
                   help="build MQSim at -O1 without debug info (a correctness check; its times then mean nothing)")
    args = p.parse_args(argv)
    args.peer_repeat = args.peer_repeat or args.repeat
    shared = args.shared or shared_dir()
    if not shared.is_dir():
        print(f"side_by_side: skipped: no shared/ folder at {shared} (set WATTIO_SHARED)")
        return 0
    wattio = wattio_command(args.wattio)
    cache = args.cache.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    args.work = (args.work or cache).resolve()
    out = {"requests": args.requests, "seed": args.seed, "comparisons": []}
    comps = [("disksim", compare_disksim, "cheetah4LP, DiskSim ascii trace"), ("mqsim", compare_mqsim, "MQSim default SSD, MQSim trace")]
    for name, fn, title in comps:
        if args.only and args.only != name:
            continue
        try:
            results = fn(args, shared, cache, wattio)
        except Skip as e:
            print(f"\n{title}: skipped: {e}")
            out["comparisons"].append({"title": title, "skipped": str(e)})
            continue
        out["comparisons"].append(report(f"{title}: {args.requests:,} requests, median of {args.repeat}", results))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
