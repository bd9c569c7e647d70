"""`wattio run`, `wattio demo`, `wattio check`, `wattio catalogue`, `wattio functions`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import tomllib


def add_commands(sub) -> None:
    p = sub.add_parser("run", help="simulate a config", description="Simulate a run config (TOML).")
    p.add_argument("config", help="run config (TOML)")
    p.add_argument("--trace", help="trace file to replay instead of the config's workload")
    p.add_argument("--format", dest="trace_format", help="trace format (default: detect)")
    p.add_argument("--out", help="output directory (default: wattio-out/<config name>)")
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    p.add_argument("--json", action="store_true", help="print summary.json instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "demo",
        help="the embedded default: spin-down policies on a laptop and a server",
        description="A day of diurnal web-server-like I/O on a one-disk laptop and a five-disk "
        "server under always-on, fixed 5 s and 30 s timeouts, the adaptive and share policies "
        "and the oracle.",
    )
    p.add_argument("--out", default="wattio-out/demo", help="output directory (default: %(default)s)")
    p.add_argument("--no-report", action="store_true", help="do not write report.html files")
    p.add_argument("--jobs", type=int, default=2, help="parallel runs (default: %(default)s)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("check", help="validate a config without running it")
    p.add_argument("config")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("catalogue", help="list the embedded device catalogue")
    p.set_defaults(func=cmd_catalogue)

    p = sub.add_parser(
        "functions",
        help="list the function kinds a [[function]] table can name",
        description="The function registry: each kind with its module, what it does, where it "
        "comes from and its documentation page.",
    )
    p.add_argument("--long", action="store_true", help="also print module, source and docs page")
    p.set_defaults(func=cmd_functions)


def print_summary(s: dict) -> None:
    print(f"run        {s.get('name') or ''}")
    print(f"duration   {s['duration_s']:,.1f} s    requests {s['requests']:,}    errors {s['errors']}")
    print(
        f"latency    mean {s['mean_latency_ms']:.3f} ms   p50 {s['p50_latency_ms']:.3f} ms   "
        f"p99 {s['p99_latency_ms']:.3f} ms   max {s['max_latency_ms']:.3f} ms"
    )
    print(f"energy     {s['energy_j']:,.1f} J")
    for name, d in s["devices"].items():
        res = ", ".join(f"{k} {v:,.1f}s" for k, v in d["residency_s"].items() if v > 0)
        print(
            f"  {name:<10} {d['energy_j']:>12,.1f} J  {d['mean_power_w']:.3f} W  "
            f"spin-ups {d['spin_ups']}  [{res}]"
        )


def cmd_run(args) -> int:
    from wattio.api import run

    cfg = Path(args.config)
    if not cfg.exists():
        raise OSError(f"{cfg}: no such config file")
    out = Path(args.out) if args.out else Path("wattio-out") / cfg.stem
    t0 = time.monotonic()
    r = run(
        cfg,
        trace=args.trace,
        trace_format=args.trace_format,
        out=out,
        progress=False if args.quiet else None,
        report=False if args.no_report else None,
    )
    if args.json:
        print(json.dumps(r.summary, indent=2))
    else:
        print_summary(r.summary)
        print(f"wrote {out}/ in {time.monotonic() - t0:.1f} s")
    return 0


def cmd_demo(args) -> int:
    from wattio.demo import format_table, run_demo

    t0 = time.monotonic()
    rows = run_demo(args.out, report=not args.no_report, jobs=args.jobs)
    print(format_table(rows))
    print(f"\nwrote {args.out}/ (one run per directory: summary.json, tables, report.html) in {time.monotonic() - t0:.1f} s")
    from wattio.reproduce import demo_footer

    print("\n" + demo_footer())
    return 0


def cmd_check(args) -> int:
    from wattio import _core
    from wattio.api import python_functions

    path = Path(args.config)
    text = path.read_text()
    _core.check_config(text, str(path))
    # What a run would do next: import and construct the Python functions.
    python_functions(tomllib.loads(text), path.parent)
    print(f"{path}: ok")
    return 0


def cmd_catalogue(args) -> int:
    from wattio import _core

    for name, kind, desc in _core.catalogue():
        print(f"{name:<32} {kind:<6} {desc}")
    return 0


def cmd_functions(args) -> int:
    from wattio import _core

    for kind, module, summary, source, doc in _core.functions():
        print(f"{kind:<12} {summary}")
        if args.long:
            print(f"{'':<12} module {module}; source: {source}; docs: {doc}")
    return 0
