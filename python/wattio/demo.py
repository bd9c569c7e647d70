"""The embedded default: a day of diurnal, web-server-like I/O on a one-disk laptop and a
five-disk server, under every spin-down policy wattio ships, side by side."""

from __future__ import annotations

import contextlib
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from wattio.api import run
from wattio.progress import steps
from wattio.report import comparison_row, write_comparison

#: Machine → (device table, workload table). Workload: bursts of page-sized reads and some
#: writes (a web server's page loads and logs), peaking at 14:00, quiet at night.
MACHINES = {
    "laptop": (
        """
[[device]]
name = "disk"
model = "toshiba-mk1234gsx"
""",
        """
[workload]
arrivals = "diurnal"
duration_s = 86400
rate = 0.05
amplitude = 0.95
peak_hour = 14
burst_mean = 6
burst_gap_ms = 5
read_fraction = 0.8
size = { dist = "choice", values = [4096, 16384, 65536], weights = [0.6, 0.3, 0.1] }
footprint_bytes = 20_000_000_000
popularity = { dist = "zipf", s = 0.9 }
sequential_fraction = 0.3
streams = 4
""",
    ),
    "server": (
        """
[[device]]
name = "disk"
model = "seagate-constellation-es3-4tb"
count = 5
""",
        """
[workload]
arrivals = "diurnal"
duration_s = 86400
rate = 0.4
amplitude = 0.95
peak_hour = 14
burst_mean = 8
burst_gap_ms = 2
devices = 5
read_fraction = 0.9
size = { dist = "choice", values = [4096, 16384, 65536], weights = [0.5, 0.3, 0.2] }
footprint_bytes = 400_000_000_000
popularity = { dist = "zipf", s = 1.0 }
sequential_fraction = 0.3
streams = 16
""",
    ),
}

#: Policy → its [[function]] table ("" = always-on, no function in the path).
POLICIES = {
    "always-on": "",
    "fixed-5s": '[[function]]\nkind = "spindown"\npolicy = "fixed"\ntimeout_s = 5\n',
    "fixed-30s": '[[function]]\nkind = "spindown"\npolicy = "fixed"\ntimeout_s = 30\n',
    "adaptive": '[[function]]\nkind = "spindown"\npolicy = "adaptive"\ntimeout_s = 10\n',
    "share": '[[function]]\nkind = "spindown"\npolicy = "share"\n',
    "oracle": '[[function]]\nkind = "spindown"\npolicy = "oracle"\n',
}


def config(machine: str, policy: str, seed: int = 1) -> str:
    devices, workload = MACHINES[machine]
    return f'[run]\nname = "{machine}/{policy}"\nseed = {seed}\n{devices}\n{POLICIES[policy]}\n{workload}'


def _one(args):
    machine, policy, out, report = args
    sub = Path(out) / f"{machine}-{policy}" if out else None
    r = run(config(machine, policy), out=sub, progress=False, report=report)
    return machine, policy, r.summary


def run_demo(out: str | Path | None = None, report: bool = True, jobs: int = 2,
             progress: bool | None = None) -> list[dict]:
    """Run every machine × policy; returns one row per run. With ``out``, each run writes
    ``out/<machine>-<policy>/``, and ``out/demo.json`` and ``out/comparison.html`` compare
    them."""
    tasks = [(m, p, str(out) if out else None, report) for m in MACHINES for p in POLICIES]
    with contextlib.ExitStack() as stack, steps(len(tasks), "demo", progress) as done:
        ex = stack.enter_context(ProcessPoolExecutor(max_workers=jobs)) if jobs > 1 else None
        results = []
        for r in ex.map(_one, tasks) if ex else map(_one, tasks):
            results.append(r)
            done()
    rows = []
    for machine, policy, s in results:
        rows.append(
            {
                "machine": machine,
                "policy": policy,
                "requests": s["requests"],
                "energy_j": s["energy_j"],
                "mean_latency_ms": s["mean_latency_ms"],
                "p99_latency_ms": s["p99_latency_ms"],
                "spin_ups": sum(d["spin_ups"] for d in s["devices"].values()),
            }
        )
    if out:
        Path(out, "demo.json").write_text(json.dumps(rows, indent=2) + "\n")
        link = "report.html" if report else "summary.json"
        write_comparison(
            Path(out, "comparison.html"),
            [comparison_row(s, policy, machine, f"{machine}-{policy}/{link}") for machine, policy, s in results],
            "wattio demo: spin-down policies side by side",
            "A day of diurnal web-server-like I/O on a one-disk laptop (Toshiba MK1234GSX) and a "
            "five-disk server (Seagate Constellation ES.3), under each policy.",
        )
    return rows


def format_table(rows: list[dict]) -> str:
    head = f"{'machine':<8} {'policy':<10} {'requests':>9} {'energy (kJ)':>12} {'vs always-on':>12} {'mean (ms)':>10} {'p99 (ms)':>10} {'spin-ups':>9}"
    lines = [head, "-" * len(head)]
    base = {r["machine"]: r["energy_j"] for r in rows if r["policy"] == "always-on"}
    for r in rows:
        rel = r["energy_j"] / base[r["machine"]] - 1 if base.get(r["machine"]) else 0.0
        lines.append(
            f"{r['machine']:<8} {r['policy']:<10} {r['requests']:>9,} {r['energy_j'] / 1e3:>12.2f} "
            f"{rel * 100:>+11.1f}% {r['mean_latency_ms']:>10.2f} {r['p99_latency_ms']:>10.2f} {r['spin_ups']:>9,}"
        )
    return "\n".join(lines)
