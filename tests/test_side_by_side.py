"""The side-by-side benchmark harness (bench/side_by_side/side_by_side.py) on a tiny trace, as
a correctness check of the harness and of the comparison itself: both peers build and run,
their mean response times are parsed, and the imported cheetah4LP agrees with DiskSim. And
the index-tree layout (`dm_layout_g4`) against DiskSim request by request, on a tree written
here (DiskSim's own g4 drives are not in ../shared).

Needs `<repo>/../shared` (or `$WATTIO_SHARED`) with disksim-src, disksim-valid and mqsim-src,
and the build tools (gcc, g++, make, bison, flex); skips with the reason otherwise. Slow: the
first run builds both peers (about 40 s for DiskSim at -j1, and 40 s for MQSim on two cores at
-O1 without debug info, `--quick-peers`: this checks answers, not speed), later runs reuse them
from the harness's cache.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("wattio._core")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "side_by_side"))
import side_by_side

SHARED = Path(os.environ.get("WATTIO_SHARED", ROOT.parent / "shared"))
NEEDED = ["disksim-src/build.sh", "disksim-valid/cheetah4LP.parv", "mqsim-src/build.sh"]
TOOLS = ["gcc", "g++", "make", "bison", "flex"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all((SHARED / n).exists() for n in NEEDED),
        reason=f"DiskSim/MQSim sources not found in {SHARED} (set WATTIO_SHARED)",
    ),
    pytest.mark.skipif(
        any(shutil.which(t) is None for t in TOOLS),
        reason=f"building the peers needs {', '.join(TOOLS)} (scripts/apt-packages.txt)",
    ),
]


def rows(report: dict, title_start: str) -> dict:
    comp = next(c for c in report["comparisons"] if c["title"].startswith(title_start))
    assert "skipped" not in comp, comp
    return {r["program"]: r for r in comp["rows"]}


def test_both_peers_run_and_agree_with_wattio_on_a_tiny_trace(tmp_path):
    out = tmp_path / "figures.json"
    # The peers are built once into the benchmark's own cache (target/side_by_side/peers,
    # reused by later runs; DiskSim by the full benchmark too, the quick MQSim build is kept
    # apart); traces and runs go to tmp_path.
    cache = ROOT / "target" / "side_by_side"
    rc = side_by_side.main(
        ["--requests", "2000", "--repeat", "1", "--cache", str(cache), "--work", str(tmp_path),
         "--shared", str(SHARED), "--json", str(out), "--quick-peers"]
    )
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["requests"] == 2000

    disk = rows(report, "cheetah4LP")
    ds, w, wc = disk["DiskSim 4.0 -O2"], disk["wattio (DiskSim ascii)"], disk["wattio (columnar)"]
    assert "2,000 requests" in w["note"]
    # The same requests through the columnar trace give the same run.
    assert wc["mean_ms"] == w["mean_ms"]
    # docs/validation.md: on cheetah4LP's own trace the model's means are within 0.01 ms of
    # DiskSim's; this open workload queues (mean ≈ 4× the service time), where the two
    # differ by ~2 % (queue order, docs/benchmarks.md). 5 % catches a broken import, a
    # wrong unit or a misread trace, each of which moves the mean far more.
    assert ds["mean_ms"] > 10.0
    assert abs(w["mean_ms"] - ds["mean_ms"]) < 0.05 * ds["mean_ms"], (w["mean_ms"], ds["mean_ms"])

    ssd = rows(report, "MQSim")
    mq, ws = ssd["MQSim"], ssd["wattio (MQSim trace)"]
    assert mq["mean_ms"] > 0 and ws["mean_ms"] > 0
    assert "-O1" in mq["note"], "the quick build is labelled: its times are not the benchmark's"
    # MAKEFLAGS reached MQSim's make: every compile ran at -O1 without -g.
    log = next((cache / "peers").glob("mqsim-*-quick")) / "mqsim" / "build.log"
    compiles = [ln for ln in log.read_text().splitlines() if ln.startswith("g++") and " -c " in ln]
    assert len(compiles) > 50 and all(" -O1 " in ln and " -g " not in ln for ln in compiles)
    assert "2,000 requests" in ws["note"]
    for r in (ds, w, mq, ws):
        assert r["wall_s"] > 0 and r["cpu_s"] > 0 and r["rss_mib"] > 0
        assert len(r["samples"]) == 1


# ---------------------------------------------------------------------------------------
# DiskSim's index-tree layout (`dm_layout_g4`, what DIXtrac extracts from modern drives)
# against DiskSim itself, request by request.

TREE_GAP_MS = 40.0
TREE_REQUESTS = 250


def wattio_finish_ms(work: Path, parv: Path, trace: Path, n: int, expect: str | None = None,
                     run: str = "wattio"):
    """Each request's finish time (ms, by request) of `wattio run` on the `wattio disk
    import` of `parv` (which must import with nothing unsupported; its entry must contain
    `expect` if given) for the DiskSim ascii `trace` of `n` requests. `run` names the run's
    output directory; the import is reused when it is already there."""
    wattio = side_by_side.wattio_command(None)
    entry = work / "drives" / f"{parv.stem}.toml"
    if not entry.exists():
        entry, err = side_by_side.wattio_import(wattio, parv, work / "drives")
        assert "unsupported" not in err, err
    assert expect is None or expect in entry.read_text()
    return side_by_side.wattio_finish_ms(wattio, work, parv.stem, trace, n, run)


def tree_layout() -> tuple[str, int]:
    """A serpentine tree over cheetah4LP's 8 surfaces, written for this test: two zones of
    100 bands of 32 cylinders; in a band each surface in turn, even ones walking the band
    down and odd ones up, with its own sectors per track (head 7's tracks end in 3 spare
    sectors), its own angle offset and a turn per cylinder; three slips. The text in
    DiskSim's syntax and the drive's block count."""
    zones = []  # (first cylinder, per-head (low, high, spt))
    zones.append((0, [(0, 194 - 2 * (h % 3), 195 - 2 * (h % 3)) if h != 7 else (0, 189, 193) for h in range(8)]))
    zones.append((3200, [(0, 159 - h % 2, 160 - h % 2) for h in range(8)]))
    patterns: list[tuple[int, int, int]] = []
    nodes: list[str] = []
    root: list[str] = []
    lbn = 0
    for z, (cyl0, heads) in enumerate(zones):
        entries, at = [], 0
        for h, p in enumerate(heads):
            if p not in patterns:
                patterns.append(p)
            per_track = p[1] - p[0] + 1
            down = h % 2 == 0
            entries.append(
                f"{at}, {31 if down else 0}, {0.13 * h % 1:.6f}, {per_track}, 1, {0.19 + 0.01 * z:.6f}, "
                f"{32 * per_track}, {-32 if down else 32}, TRACK, {patterns.index(p)}, {h}"
            )
            at += 32 * per_track
        nodes.append("[ " + ",\n    ".join(entries) + " ]")
        root.append(f"{lbn}, {cyl0}, {0.05 * z:.6f}, {at}, 32, 0.370000, {100 * at}, 3200, IDX, {z}")
        lbn += 100 * at
    nodes.append("[ " + ",\n    ".join(root) + " ]")
    slips = [(1000, 1), (500_000, 2), (2_000_000, 1)]
    text = (
        "dm_layout_g4 {\n"
        + "TP = [ " + ", ".join(f"{a}, {b}, {c}" for a, b, c in patterns) + " ],\n"
        + "IDX = [ " + ",\n  ".join(nodes) + " ],\n"
        + "Slips = [ " + ", ".join(f"{a}, {b}" for a, b in slips) + " ],\n"
        + "Remaps = [ ]\n}\n"
    )
    return text, lbn - sum(n for _, n in slips)


def test_a_tree_layout_drive_runs_as_in_disksim(tmp_path):
    import numpy as np

    cache = ROOT / "target" / "side_by_side"
    binary = side_by_side.build_peer(
        "disksim", SHARED, cache, ["gcc", "make", "bison", "flex"], "disksim-4.0-wd/src/disksim"
    )
    valid = SHARED / "disksim-valid"
    for f in ["cheetah4LP.diskspecs", "cheetah4LP.seek", "statdefs"]:
        shutil.copy(valid / f, tmp_path / f)
    layout, blocks = tree_layout()
    (tmp_path / "tree.layout").write_text(layout)
    model = (valid / "cheetah4LP.model").read_text()
    start = model.index("Layout Model = dm_layout_g1 {")
    end = model.index("Mechanical Model")
    model = model[:start] + "Layout Model = source tree.layout,\n   " + model[end:]
    model = re.sub(r"Block count = \d+", f"Block count = {blocks}", model)
    (tmp_path / "cheetah4LP.model").write_text(model)
    (tmp_path / "tree.parv").write_text(side_by_side.with_exectrace((valid / "cheetah4LP.parv").read_text()))
    rng = random.Random(49)
    t, lines = 0.0, []
    for _ in range(TREE_REQUESTS):
        t += rng.expovariate(1 / TREE_GAP_MS)
        size = rng.choice([8, 16, 32, 64, 128])
        start_blk = 8 * rng.randrange((blocks - size) // 8)
        lines.append(f"{t:.6f} 0 {start_blk} {size} {int(rng.random() < 2 / 3)}\n")
    (tmp_path / "tree.trace").write_text("".join(lines))
    theirs_at = side_by_side.disksim_finish_ms(binary, tmp_path, "tree.parv", "tree.trace", lines)
    finish = wattio_finish_ms(tmp_path, tmp_path / "tree.parv", tmp_path / "tree.trace", TREE_REQUESTS,
                              expect="[timing.layout.tree]")
    arrivals = np.array([float(ln.split()[0]) for ln in lines])
    ours = finish - arrivals
    theirs = theirs_at - arrivals
    diff = abs(ours - theirs)
    # DiskSim's platter angle drifts by about 1.4 µs a simulated second (docs/validation.md,
    # "Request by request"): over the 10 s of this trace 247 of 250 requests agree within
    # 0.02 ms (the 3 others: one revolution, a near miss carried through a queue). One
    # surface's angle offset off by 0.2 of a turn gives 92 %, a band walked the wrong way
    # 15 % (both tried on the imported entry).
    agree = (diff < 0.02).mean()
    assert agree >= 0.95, (agree, sorted(diff)[-10:])
    assert abs(ours.mean() - theirs.mean()) < 0.005 * theirs.mean(), (ours.mean(), theirs.mean())


# ---------------------------------------------------------------------------------------
# Full write-back (`Fast write level = 2`) with and without `Allow write prebuffering`,
# against DiskSim request by request. No drive in ../shared has either (cheetah4LP's write
# back is level 1), so cheetah4LP is run with both switched, as a user's drive would.

WB_GAP_MS = 30.0
WB_REQUESTS = 400


def disksim_and_wattio(tmp_path, binary, name: str, specs: str, lines: list[str],
                       driver_policy: int = 1):
    """Each request's response time (ms) in DiskSim and in `wattio run` on the import of
    cheetah4LP.parv with diskspecs `specs` and its device driver's `Scheduling policy` set
    to `driver_policy`, for the ascii trace `lines`; and the work directory."""
    import numpy as np

    work = tmp_path / name
    work.mkdir()
    valid = SHARED / "disksim-valid"
    for f in ["cheetah4LP.model", "cheetah4LP.seek", "statdefs"]:
        shutil.copy(valid / f, work / f)
    (work / "cheetah4LP.diskspecs").write_text(specs)
    parv = side_by_side.with_exectrace((valid / "cheetah4LP.parv").read_text())
    (work / "x.parv").write_text(side_by_side.with_driver_policy(parv, driver_policy))
    (work / "x.trace").write_text("".join(lines))
    theirs = side_by_side.disksim_finish_ms(binary, work, "x.parv", "x.trace", lines)
    arrivals = np.array([float(ln.split()[0]) for ln in lines])
    ours = wattio_finish_ms(work, work / "x.parv", work / "x.trace", len(lines)) - arrivals
    return ours, theirs - arrivals, work


def test_full_write_back_with_and_without_prebuffering_runs_as_in_disksim(tmp_path):
    cache = ROOT / "target" / "side_by_side"
    binary = side_by_side.build_peer(
        "disksim", SHARED, cache, ["gcc", "make", "bison", "flex"], "disksim-4.0-wd/src/disksim"
    )
    base = (SHARED / "disksim-valid" / "cheetah4LP.diskspecs").read_text()
    rng = random.Random(50)
    t, lines, writes = 0.0, [], []
    for _ in range(WB_REQUESTS):
        t += rng.expovariate(1 / WB_GAP_MS)
        size = rng.choice([8, 16, 32, 64])
        read = rng.random() < 0.4
        writes.append(not read)
        lines.append(f"{t:.6f} 0 {8 * rng.randrange(8887200 // 8 - 8)} {size} {int(read)}\n")
    runs = {}
    for pb in (0, 1):
        specs = base
        for key, value in [("Fast write level", 2), ("Allow write prebuffering", pb),
                           ("Maximum number of write segments", 3)]:
            specs, n = re.subn(rf"{key} = \d+", f"{key} = {value}", specs)
            assert n == 1, key
        runs[pb] = disksim_and_wattio(tmp_path, binary, f"pb{pb}", specs, lines)[:2]
    import numpy as np

    writes = np.array(writes)
    for pb, (ours, theirs) in runs.items():
        agree = (abs(ours - theirs) < 0.02).mean()
        # 395 of 400 requests agree within 0.02 ms either way (the others: near misses
        # carried through a queue, as on the stock drive, docs/validation.md).
        assert agree >= 0.95, (pb, agree)
        assert abs(ours[writes].mean() - theirs[writes].mean()) < 0.01 * theirs[writes].mean(), pb
    # Prebuffering matters on this trace (writes arrive while earlier ones are destaged:
    # DiskSim's write mean 7.69 ms with it, 9.31 without), and the model before it (level 2
    # taking every write at once, which is DiskSim with prebuffering) misses one write in
    # five against DiskSim without (81 % agree).
    (ours1, theirs1), (_, theirs0) = runs[1], runs[0]
    assert theirs1[writes].mean() < 0.9 * theirs0[writes].mean()
    assert (abs(ours1 - theirs0) < 0.02)[writes].mean() < 0.9


# ---------------------------------------------------------------------------------------
# The order DiskSim's device driver hands requests to a drive holding one command (every
# validated drive): its LBN schedulers against the imported drive's, request by request.

ORDER_GAP_MS = 14.0
ORDER_REQUESTS = 400


def test_driver_queue_orders_run_as_in_disksim(tmp_path):
    binary = side_by_side.build_peer(
        "disksim", SHARED, ROOT / "target" / "side_by_side", ["gcc", "make", "bison", "flex"],
        "disksim-4.0-wd/src/disksim",
    )
    specs = (SHARED / "disksim-valid" / "cheetah4LP.diskspecs").read_text()
    # Random requests queueing deep under FCFS (DiskSim's mean 98.8 ms against a service
    # time of about 13 ms), avoiding the track DiskSim never finishes (side_by_side).
    rng = random.Random(52)
    t, lines = 0.0, []
    lo, hi = side_by_side.DISKSIM_AVOID
    while len(lines) < ORDER_REQUESTS:
        t += rng.expovariate(1 / ORDER_GAP_MS)
        size = rng.choice([8, 16, 32, 64])
        read = rng.random() < 0.4
        lbn = 8 * rng.randrange(8887200 // 8 - 8)
        if lbn < hi and lbn + size > lo:
            continue
        lines.append(f"{t:.6f} 0 {lbn} {size} {int(read)}\n")
    agree, means = {}, {}
    for policy, name in [(1, "fcfs"), (2, "look"), (3, "clook"), (4, "sstf-lbn")]:
        ours, theirs, work = disksim_and_wattio(tmp_path, binary, f"p{policy}", specs, lines,
                                                driver_policy=policy)
        assert f'scheduler = "{name}"' in (work / "drives" / "x.toml").read_text()
        agree[policy] = (abs(ours - theirs) < 0.02).mean()
        means[policy] = (ours.mean(), theirs.mean())
        if policy == 2:
            # The same drive served first come, first served against DiskSim's LOOK: the
            # check below can fail (18-20 % agree on this trace, the mean three times as
            # long).
            entry = work / "drives" / "x.toml"
            entry.write_text(entry.read_text().replace('scheduler = "look"', 'scheduler = "fcfs"'))
            arrivals = [float(ln.split()[0]) for ln in lines]
            fcfs = wattio_finish_ms(work, work / "x.parv", work / "x.trace", len(lines),
                                    run="fcfs") - arrivals
            assert (abs(fcfs - theirs) < 0.02).mean() < 0.5
    # The rule written before the first run (session 52): each order agrees within 0.02 ms
    # on at least the share FCFS does at this load less 5 points, and its mean within 2 %.
    # Measured: FCFS 99.5 %, LOOK 100 %, C-LOOK 96.5 % (a turn missed in one busy period,
    # the model's: docs/validation.md), SSTF-LBN 100 %.
    assert means[1][1] > 5 * 13.0, means[1]
    for policy in (2, 3, 4):
        assert agree[policy] >= agree[1] - 0.05, (policy, agree)
        ours_mean, theirs_mean = means[policy]
        assert abs(ours_mean - theirs_mean) < 0.02 * theirs_mean, (policy, means)
        # Reordering matters here: each order's mean is under half FCFS's.
        assert theirs_mean < 0.5 * means[1][1], (policy, means)
