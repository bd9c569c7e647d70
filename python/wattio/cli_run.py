"""`wattio run`, `wattio demo`, `wattio check`, `wattio catalogue`, `wattio functions`."""

from __future__ import annotations

import json
import sys
import time
import tomllib
from pathlib import Path

from wattio.cli_options import (
    add_json_option,
    add_out_option,
    add_set_option,
    add_trace_read_options,
    apply_sets,
    read_options,
)


def add_commands(sub) -> None:
    p = sub.add_parser("run", help="simulate a config", description="Simulate a run config (TOML).")
    _config_options(p)
    add_out_option(p, what="outputs (default: wattio-out/<config name>)")
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    add_json_option(p)
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "demo",
        help="the embedded default: spin-down policies on a laptop and a server",
        description="A day of diurnal web-server-like I/O on a one-disk laptop and a five-disk "
        "server under always-on, fixed 5 s and 30 s timeouts, the adaptive and share policies "
        "and the oracle.",
    )
    add_out_option(p, default="wattio-out/demo")
    p.add_argument("--no-report", action="store_true", help="do not write report.html files")
    p.add_argument("--jobs", type=int, default=2, help="parallel runs (default: %(default)s)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "check",
        help="validate a config (and its trace) without running it",
        description="Everything `wattio run` validates — the config, catalogue lookups, the "
        "devices, every function built (Python classes imported and constructed), the whole "
        "trace read and judged — without simulating.",
    )
    _config_options(p)
    add_json_option(p)
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
    if s.get("name"):
        print(f"run        {s['name']}")
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
    u = s.get("unload")
    if u:
        print(f"unload     at {u['started_s']:,.1f} s, took {u['took_s']:,.3f} s")
        for left in u.get("left", []):
            print(f"  left undone: {left}", file=sys.stderr)
    c = s.get("data_check")
    if c:
        print(
            f"data check {c['reads_checked']:,} reads, {c['blocks_checked']:,} blocks of "
            f"{c['block_bytes']} B checked, {c['blocks_unverified']:,} unverified: every read "
            "returned the latest acknowledged write"
        )


def _config_options(p) -> None:
    """What `run` and `check` share: the config, its changes, the trace and how to read it."""
    p.add_argument("config", help="run config (TOML)")
    add_set_option(p)
    p.add_argument("--trace", help="trace file to replay instead of the config's workload")
    add_trace_read_options(p)


def _config(args):
    """The config as `wattio.run`/`wattio.check` take it, with `--set` applied, and the
    directory its relative paths resolve against."""
    cfg = Path(args.config)
    if not cfg.exists():
        raise OSError(f"{cfg}: no such config file")
    parsed = apply_sets(tomllib.loads(cfg.read_text()), args.sets)
    if args.trace is None and "trace" not in parsed:
        given = [f"--{k}" for k, v in read_options(args).items() if v not in (None, False)]
        given += ["--format"] if args.trace_format else []
        if given:
            raise ValueError(
                f"{', '.join(given)}: how to read a trace, but this run has none "
                "(give --trace FILE or a [trace] table)"
            )
    if not args.sets:
        return cfg, None
    return parsed, cfg.parent


def _warn(warnings) -> None:
    for w in warnings:
        print(f"wattio: WARNING: {w}", file=sys.stderr)


def cmd_run(args) -> int:
    from wattio.api import run
    from wattio.outdir import check_replaceable

    config, base = _config(args)
    out = Path(args.out) if args.out else Path("wattio-out") / Path(args.config).stem
    replacing = check_replaceable(out)
    t0 = time.monotonic()
    r = run(
        config,
        base_dir=base,
        trace=args.trace,
        trace_format=args.trace_format,
        out=out,
        progress=False if args.quiet else None,
        report=False if args.no_report else None,
        **read_options(args),
    )
    _warn(r.summary.get("warnings", []))
    if args.json:
        print(json.dumps(r.summary, indent=2))
    else:
        print_summary(r.summary)
        how = "replaced the previous run in" if replacing else "wrote"
        print(f"{how} {out}/ in {time.monotonic() - t0:.1f} s")
    return 0


def cmd_demo(args) -> int:
    from wattio.demo import format_table, run_demo
    from wattio.outdir import check_replaceable, fresh_output

    t0 = time.monotonic()
    replacing = check_replaceable(args.out)
    with fresh_output(args.out) as tmp:
        rows = run_demo(tmp, report=not args.no_report, jobs=args.jobs)
    print(format_table(rows))
    how = "replaced the previous demo in" if replacing else "wrote"
    print(f"\n{how} {args.out}/ (one run per directory: summary.json, tables, report.html) in {time.monotonic() - t0:.1f} s")
    from wattio.reproduce import demo_footer

    print("\n" + demo_footer())
    return 0


def cmd_check(args) -> int:
    from wattio.api import check

    config, base = _config(args)
    r = check(config, base_dir=base, trace=args.trace, trace_format=args.trace_format, **read_options(args))
    _warn(r["warnings"])
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    what = f"{r['devices']} device(s), {r['functions']} function(s)"
    if r["trace_requests"] is not None:
        what += f", trace of {r['trace_requests']:,} requests over {r['trace_span_s']:,.3f} s"
    print(f"{args.config}: ok ({what})")
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
