"""`wattio trace …`: statistics, conversion and slicing of block traces."""

from __future__ import annotations

import json
import sys

from wattio import _core
from wattio.cli_options import add_json_option, add_trace_read_options, read_options


def _print_assumptions(assumptions) -> None:
    for a in assumptions:
        print(f"  {a}", file=sys.stderr)


def _stats(args) -> int:
    if _core.memtrace_is(args.file):  # a memory trace (wattio capture memory)
        out = _core.memtrace_stats(args.file, not args.json)
    else:
        out = _core.trace_stats(args.file, args.trace_format, text=not args.json, **read_options(args))
    if args.json:
        print(json.dumps(json.loads(out), indent=2))
    else:
        print(out, end="")
    return 0


def _convert(args) -> int:
    n, assumptions = _core.trace_convert(
        args.input, args.output, args.trace_format, args.to_format, **read_options(args)
    )
    print(f"wrote {n} requests to {args.output}", file=sys.stderr)
    _print_assumptions(assumptions)
    return 0


def _slice(args) -> int:
    n, assumptions = _core.trace_slice(
        args.input, args.output, args.trace_format, args.to_format,
        args.start, args.end, args.dev, args.speedup, **read_options(args),
    )
    print(f"wrote {n} requests to {args.output}", file=sys.stderr)
    _print_assumptions(assumptions)
    return 0


def _replay(args) -> int:
    from pathlib import Path

    try:
        config = Path(args.config).read_text()
    except OSError as e:
        raise ValueError(f"{args.config}: {e.strerror}") from e
    r = json.loads(_core.trace_replay(args.trace, config, args.runs, args.gap,
                                      format=args.trace_format, **read_options(args)))
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"closed-loop replay of {args.trace} (captured {r['captured_s']:.3f} s) on "
          f"{args.config}: {args.runs} run(s), {args.gap:g} s apart")
    cols = ("ios", "busy_s", "seek_s", "rotate_s", "transfer_s", "energy_j")
    print(f"{'run':>3} {'start_s':>10} {'duration_s':>10} {'device':<12}"
          + "".join(f" {c:>10}" for c in cols))
    for k, w in enumerate(r["runs"], 1):
        for name, d in w["devices"].items():
            vals = "".join(f" {d[c]:>10}" if c == "ios" else f" {d[c]:>10.4f}" for c in cols)
            print(f"{k:>3} {w['start_s']:>10.3f} {w['end_s'] - w['start_s']:>10.4f} "
                  f"{name:<12}{vals}")
    counters = {k: v for k, v in r["counters"].items() if v}
    if counters:
        print("layer counters (all runs): "
              + ", ".join(f"{k} {v:g}" for k, v in counters.items()))
    return 0


def _output_format(p, writes) -> None:
    p.add_argument(
        "--output-format", "--to", dest="to_format", choices=writes,
        help="output format (default: from OUT's extension)",
    )


def add_commands(sub) -> None:
    """Register this area's subcommands on the top-level subparsers."""
    _, writes = _core.trace_formats()
    t = sub.add_parser("trace", help="inspect, convert and slice block traces")
    tsub = t.add_subparsers(dest="trace_command", metavar="ACTION", required=True)

    s = tsub.add_parser("stats", help="requests, read fraction, sizes, idle gaps, footprint, …")
    s.add_argument("file")
    add_trace_read_options(s)
    add_json_option(s)
    s.set_defaults(func=_stats)

    c = tsub.add_parser("convert", help="convert IN to OUT (columnar, disksim or fio)")
    c.add_argument("input")
    c.add_argument("output")
    # --from/--to: the older spellings, kept as aliases.
    add_trace_read_options(c, format_flag="--from")
    _output_format(c, writes)
    c.set_defaults(func=_convert)

    sl = tsub.add_parser("slice", help="a time window, one device, a speed-up factor")
    sl.add_argument("input")
    sl.add_argument("output")
    add_trace_read_options(sl, format_flag="--from")
    _output_format(sl, writes)
    sl.add_argument("--start", type=float, metavar="S", help="window start, seconds")
    sl.add_argument("--end", type=float, metavar="S", help="window end, seconds")
    sl.add_argument("--dev", type=int, metavar="N", help="keep only device id N")
    sl.add_argument("--speedup", type=float, default=1.0, metavar="X",
                    help="divide inter-arrival times by X (PARAID replays at 32-256x)")
    sl.set_defaults(func=_slice)

    r = tsub.add_parser(
        "replay",
        help="replay a captured block trace closed-loop on a config's devices and functions",
        description="Each request waits for what it waited for in the capture (a completion "
        "or an issue of its process), then its captured think time: a faster stack shortens "
        "the run as it would the program. Runs repeat the trace (a learning run, then runs "
        "a function may have sped up); every device is reported per run (docs/launch.md).",
    )
    r.add_argument("trace", help="a block trace with measured response times: wattio capture "
                   "block or launch, blktrace or blkparse with its completions, MSR, …")
    r.add_argument("config", help="run config (TOML): its devices and functions; its own "
                   "trace or workload is not used")
    r.add_argument("--runs", type=int, default=2, metavar="N", help="replays (1-16, default 2)")
    r.add_argument("--gap", type=float, default=2.0, metavar="S",
                   help="seconds between a run's end and the next start (default 2)")
    add_trace_read_options(r)
    add_json_option(r)
    r.set_defaults(func=_replay)
