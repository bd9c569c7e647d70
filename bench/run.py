"""Run every benchmark and print its figures (see docs/benchmarks.md).

    .venv/bin/python bench/run.py
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = [
    ["cargo", "bench", "-q", "-p", "wattio-engine", "--bench", "sim"],
    [sys.executable, "bench/python_function.py"],
    # Builds DiskSim and MQSim from ../shared on first use; skips a peer it cannot build.
    [sys.executable, "bench/side_by_side/side_by_side.py"],
]


def main() -> int:
    for cmd in COMMANDS:
        print(f"$ {' '.join(cmd)}", flush=True)
        r = subprocess.run(cmd, cwd=ROOT, check=False)
        if r.returncode != 0:
            return r.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
