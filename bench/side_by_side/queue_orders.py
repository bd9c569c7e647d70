"""DiskSim's driver queue orders against the imported drive, request by request, on any
drive of `shared/disksim-valid/` (docs/validation.md, "Queue order").

    python3 bench/side_by_side/queue_orders.py cheetah4LP 14     # drive, mean gap (ms)
    python3 bench/side_by_side/queue_orders.py hp_c2247a 20 --requests 400

For each of FCFS (1), ELEVATOR_LBN (2), CYCLE_LBN (3) and SSTF_LBN (4): the drive's own
`.parv` with its device driver's `Scheduling policy` switched, an ascii trace of random
requests over the whole drive (exponential gaps, 8–64 blocks, 40 % reads,
`random.Random(--seed)`) through DiskSim (built from `shared/disksim-src` by the side-by-side
harness) and through `wattio run` on `wattio disk import` of the same file. Prints, per
policy, the share of requests whose response times agree within 0.02 ms and the two means.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import tempfile
from pathlib import Path

import side_by_side

POLICIES = {1: "fcfs", 2: "look", 3: "clook", 4: "sstf-lbn"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("drive", help="a drive of shared/disksim-valid (cheetah4LP, atlas10k, …)")
    ap.add_argument("gap_ms", type=float, help="mean gap between requests (ms)")
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--seed", type=int, default=52)
    ap.add_argument("--shared", type=Path, default=side_by_side.ROOT.parent / "shared")
    a = ap.parse_args()

    import numpy as np

    valid = a.shared / "disksim-valid"
    binary = side_by_side.build_peer("disksim", a.shared, side_by_side.ROOT / "target" / "side_by_side",
                                     ["gcc", "make", "bison", "flex"], "disksim-4.0-wd/src/disksim")
    model = next(valid.glob(f"{a.drive}*.model"))
    blocks = int(re.search(r"Block count\s*=\s*(\d+)", model.read_text()).group(1))
    rng = random.Random(a.seed)
    t, lines = 0.0, []
    lo, hi = side_by_side.DISKSIM_AVOID if a.drive == "cheetah4LP" else (0, 0)
    while len(lines) < a.requests:
        t += rng.expovariate(1 / a.gap_ms)
        size = rng.choice([8, 16, 32, 64])
        read = rng.random() < 0.4
        lbn = 8 * rng.randrange(blocks // 8 - 8)
        if lbn < hi and lbn + size > lo:
            continue
        lines.append(f"{t:.6f} 0 {lbn} {size} {int(read)}\n")
    arrivals = np.array([float(ln.split()[0]) for ln in lines])
    wattio = side_by_side.wattio_command(None)
    with tempfile.TemporaryDirectory() as tmp:
        for policy, name in POLICIES.items():
            work = Path(tmp) / f"p{policy}"
            work.mkdir()
            for f in [*valid.glob(f"{a.drive}*"), valid / "statdefs"]:
                shutil.copy(f, work)
            parv = side_by_side.with_exectrace((valid / f"{a.drive}.parv").read_text())
            (work / "x.parv").write_text(side_by_side.with_driver_policy(parv, policy))
            (work / "x.trace").write_text("".join(lines))
            theirs = side_by_side.disksim_finish_ms(binary, work, "x.parv", "x.trace", lines) - arrivals
            entry, _ = side_by_side.wattio_import(wattio, work / "x.parv", work / "drives")
            assert f'scheduler = "{name}"' in entry.read_text()
            ours = side_by_side.wattio_finish_ms(wattio, work, "x", work / "x.trace", len(lines)) - arrivals
            agree = (abs(ours - theirs) < 0.02).mean()
            print(f"{a.drive} {name:9s} within 0.02 ms {100 * agree:5.1f} %   mean DiskSim "
                  f"{theirs.mean():9.3f} ms, wattio {ours.mean():9.3f} ms "
                  f"({100 * (ours.mean() / theirs.mean() - 1):+.2f} %)", flush=True)


if __name__ == "__main__":
    main()
