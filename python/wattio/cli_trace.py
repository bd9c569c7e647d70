"""`wattio trace …`: statistics, conversion and slicing of block traces."""

from __future__ import annotations

import json
import sys

from wattio import _core


def _read_opts(p) -> None:
    p.add_argument(
        "--lenient",
        action="store_true",
        help="skip bad lines (counted, the first few reported) instead of stopping at the first",
    )
    p.add_argument(
        "--device",
        metavar="KEY",
        help="keep one device/volume/LUN (hm_1, 8,16, an ASU or volume id, a file name) as dev 0",
    )
    p.add_argument(
        "--action",
        metavar="A",
        help="blkparse: the action to keep, Q, D or C (default D)",
    )


def _print_assumptions(assumptions) -> None:
    for a in assumptions:
        print(f"  {a}", file=sys.stderr)


def _stats(args) -> int:
    if _core.memtrace_is(args.file):  # a memory trace (wattio capture memory)
        out = _core.memtrace_stats(args.file, not args.json)
    else:
        out = _core.trace_stats(
            args.file, args.format, args.lenient, args.device, args.action, not args.json
        )
    if args.json:
        print(json.dumps(json.loads(out), indent=2))
    else:
        print(out, end="")
    return 0


def _convert(args) -> int:
    n, assumptions = _core.trace_convert(
        args.input, args.output, args.from_format, args.to_format,
        args.lenient, args.device, args.action,
    )
    print(f"wrote {n} requests to {args.output}", file=sys.stderr)
    _print_assumptions(assumptions)
    return 0


def _slice(args) -> int:
    n, assumptions = _core.trace_slice(
        args.input, args.output, args.from_format, args.to_format,
        args.start, args.end, args.dev, args.speedup,
        args.lenient, args.device, args.action,
    )
    print(f"wrote {n} requests to {args.output}", file=sys.stderr)
    _print_assumptions(assumptions)
    return 0


def add_commands(sub) -> None:
    """Register this area's subcommands on the top-level subparsers."""
    reads, writes = _core.trace_formats()
    t = sub.add_parser("trace", help="inspect, convert and slice block traces")
    tsub = t.add_subparsers(dest="trace_command", metavar="ACTION", required=True)

    s = tsub.add_parser("stats", help="requests, read fraction, sizes, idle gaps, footprint, …")
    s.add_argument("file")
    s.add_argument("--format", choices=reads, help="input format (default: detect)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    _read_opts(s)
    s.set_defaults(func=_stats)

    c = tsub.add_parser("convert", help="convert IN to OUT (columnar, disksim or fio)")
    c.add_argument("input")
    c.add_argument("output")
    c.add_argument("--from", dest="from_format", choices=reads, help="input format")
    c.add_argument("--to", dest="to_format", choices=writes,
                   help="output format (default: from OUT's extension)")
    _read_opts(c)
    c.set_defaults(func=_convert)

    sl = tsub.add_parser("slice", help="a time window, one device, a speed-up factor")
    sl.add_argument("input")
    sl.add_argument("output")
    sl.add_argument("--from", dest="from_format", choices=reads, help="input format")
    sl.add_argument("--to", dest="to_format", choices=writes, help="output format")
    sl.add_argument("--start", type=float, metavar="S", help="window start, seconds")
    sl.add_argument("--end", type=float, metavar="S", help="window end, seconds")
    sl.add_argument("--dev", type=int, metavar="N", help="keep only device id N")
    sl.add_argument("--speedup", type=float, default=1.0, metavar="X",
                    help="divide inter-arrival times by X (PARAID replays at 32-256x)")
    _read_opts(sl)
    sl.set_defaults(func=_slice)
