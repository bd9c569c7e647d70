"""`wattio reproduce`: the seed papers' tables and figures beside wattio's, with verdicts."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def add_commands(sub) -> None:
    p = sub.add_parser(
        "reproduce",
        help="reproduce the seed papers' published results, with verdicts",
        description="Run experiments that each reproduce a published table or figure, print "
        "the paper's numbers and wattio's side by side with the verdict rule, and exit 1 if a "
        "verdict fails. NAME is an experiment or a system prefix (spindown, paraid); none: all.",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="experiments or prefixes (default: all)")
    p.add_argument("--quick", action="store_true", help="reduced length (every experiment in minutes)")
    p.add_argument("--out", help="write tables (CSV, Parquet), figures (PNG, SVG) and reproduce.html here")
    p.add_argument("--json", action="store_true",
                   help='print {"experiments": [{name, paper, wattio, rule, verdict}]} only')
    p.add_argument("--markdown", metavar="FILE", help="write the table of every experiment (docs/reproduce.md)")
    p.add_argument("--list", action="store_true", help="list the experiments and exit")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="local worker processes for an experiment's runs (default: its own, up to the cores)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run experiments' independent runs on this Dask scheduler's workers (as wattio sweep)")
    p.add_argument("--check-data", action="store_true",
                   help="check every simulated run's data ([run] check_data): a read that does not return "
                   "the latest acknowledged write stops its experiment (on Dask workers too)")
    p.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args) -> int:
    from wattio import reproduce
    from wattio.reproduce import outputs, workers
    from wattio.reproduce.rules import FAILS

    chosen = reproduce.select(args.names)
    if args.list:
        for e in chosen:
            print(f"{e.name:<36} {e.reproduces}")
        return 0
    if args.check_data:
        import os

        from wattio.api import CHECK_DATA_ENV

        os.environ[CHECK_DATA_ENV] = "1"  # inherited by the local worker processes
    t0 = time.monotonic()
    results = []
    with workers.placed(jobs=args.jobs, scheduler=args.scheduler):
        for e in chosen:
            r = reproduce.run_one(e, args.quick)
            results.append(r)
            if not args.json:
                print(outputs.text(r) + "\n", flush=True)
    wall = time.monotonic() - t0
    if args.out:
        out = Path(args.out)
        for r in results:
            outputs.write_files(r, out)
        page = outputs.write_html(results, out, args.quick)
        if not args.json:
            print(f"wrote {page} and one folder per experiment under {out}/")
    if args.markdown:
        Path(args.markdown).write_text(outputs.markdown(results))
        if not args.json:
            print(f"wrote {args.markdown}")
    if args.json:
        json.dump({"experiments": [r.to_json() for r in results]}, sys.stdout, indent=2)
        print()
    else:
        print(f"{len(results)} experiment(s): {outputs.verdict_counts(results)} in {wall:.1f} s")
    return 1 if any(r.verdict == FAILS for r in results) else 0
