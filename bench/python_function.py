"""Overhead of a function written in Python: the same run with the built-in fixed-timeout
policy and with examples/spindown.py's FixedTimeout, side by side.

    .venv/bin/python bench/python_function.py [REQUESTS]
"""

import sys
import time
from pathlib import Path

import wattio

ROOT = Path(__file__).resolve().parent.parent

CONFIG = """
[run]
seed = 42
[[device]]
name = "disk"
model = "wd800-fs2"
{function}
[workload]
arrivals = "poisson"
duration_s = 1e9
rate = 50
max_requests = {n}
size = {{ dist = "choice", values = [4096, 65536], weights = [0.8, 0.2] }}
footprint_bytes = 70_000_000_000
"""

BUILTIN = '[[function]]\nkind = "spindown"\npolicy = "fixed"\ntimeout_s = 5'
PYTHON = '[[function]]\nkind = "python"\nclass = "spindown.py:FixedTimeout"\nparams = { timeout_s = 5 }'


def timed(function: str, n: int) -> tuple[float, dict]:
    t0 = time.perf_counter()
    r = wattio.run(CONFIG.format(function=function, n=n), base_dir=ROOT / "examples", progress=False)
    return time.perf_counter() - t0, r.summary


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    tb, sb = timed(BUILTIN, n)
    tp, sp = timed(PYTHON, n)
    assert sb["energy_j"] == sp["energy_j"] and sb["mean_latency_ms"] == sp["mean_latency_ms"]
    print(f"{n:,} requests, wd800-fs2, fixed 5 s spin-down (identical results: yes)")
    print(f"  built-in (Rust) function: {tb:7.3f} s  {n / tb / 1e6:8.3f} M req/s")
    print(f"  Python function:          {tp:7.3f} s  {n / tp / 1e6:8.3f} M req/s")
    print(f"  Python overhead: {(tp - tb) / n * 1e6:.2f} µs per request ({tp / tb:.1f}x the built-in run)")


if __name__ == "__main__":
    main()
