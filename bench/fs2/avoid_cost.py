"""What FS2's failure-aware placement (`avoid`) costs in access time.

The CVS stand-in replayed twice on the catalogue's Quantum Atlas 10K, as
`wattio reproduce fs2-validated-drive` runs it; T_A of the second replay with FS2 against
the same replay without it, for `avoid` off and each vendor's footprint. The numbers are in
docs/functions/fs2.md ("Failure-aware placement").

    .venv/bin/python bench/fs2/avoid_cost.py
"""

from __future__ import annotations

import json

from wattio import _core
from wattio.reproduce import fs2

WORKLOAD = "cvs-update"
VENDORS = ("none", "ibm", "wd", "maxtor", "quantum")


def replay(avoid: str | None) -> dict:
    drive = fs2.VALIDATED
    path = fs2._trace(WORKLOAD, drive)[0]
    config = fs2._config(drive, WORKLOAD, None if avoid is None else "dynamic")
    if avoid is not None:
        config += f'avoid = "{avoid}"\n'
    return json.loads(_core.trace_replay(path, config, fs2.RUNS, fs2.GAP_S))


def main() -> None:
    base = fs2._run_metrics(replay(None)["runs"][1])["T_A"]
    print("avoid    T_A gain %  runs passed over  candidates dropped  replicas")
    for v in VENDORS:
        r = replay(v)
        t = fs2._run_metrics(r["runs"][1])["T_A"]
        c = r["counters"]
        print(f"{v:8} {fs2._improvement(base, t):10.2f}  "
              f"{c.get('runs_skipped_footprint', 0):16.0f}  "
              f"{c.get('candidates_dropped_footprint', 0):18.0f}  "
              f"{c.get('replicas_created', 0):8.0f}")


if __name__ == "__main__":
    main()
