"""Time each of the demo's runs: the simulation (tables written, no report) and then its
report.html, in one process (imports paid once, before the clock starts).

    .venv/bin/python bench/report_time.py

Results and the machine's load are in docs/benchmarks.md ("Reports").
"""

import tempfile
import time
from pathlib import Path

import pyarrow.parquet  # noqa: F401  (imported before timing: a one-off per process)
from wattio import demo
from wattio.api import run
from wattio.report import write_report


def main() -> None:
    tot_sim = tot_rep = 0.0
    with tempfile.TemporaryDirectory() as d:
        for m in demo.MACHINES:
            for p in demo.POLICIES:
                out = Path(d) / f"{m}-{p}"
                t0 = time.perf_counter()
                r = run(demo.config(m, p), out=out, progress=False, report=False)
                t1 = time.perf_counter()
                write_report(out)
                t2 = time.perf_counter()
                tot_sim += t1 - t0
                tot_rep += t2 - t1
                print(f"{m:<7} {p:<10} requests {r.summary['requests']:>8,}  sim {t1 - t0:6.2f} s  "
                      f"report {t2 - t1:6.2f} s", flush=True)
    print(f"total: sim {tot_sim:.2f} s, report {tot_rep:.2f} s")


if __name__ == "__main__":
    main()
