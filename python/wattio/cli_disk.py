"""`wattio disk` subcommands: DiskSim parameter import and validation, the geometry probe."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _core():
    from wattio import _core

    return _core


def cmd_import(args) -> int:
    text, unsupported = _core().disk_import(str(args.parv), args.power_from)
    for u in unsupported:
        print(f"wattio: unsupported DiskSim parameter: {u}", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(text)
        if args.power_from:
            print(f"wrote {args.out} (power table from {args.power_from})")
        else:
            print(f"wrote {args.out} (add a [power] table from the drive's datasheet)")
    else:
        sys.stdout.write(text)
    return 0


def cmd_validate(args) -> int:
    from wattio.cli_options import read_options

    if args.table or args.plot:
        from wattio import validation

        report, table = validation.validate(
            args.model, args.trace, format=args.trace_format, replay=args.replay,
            fresh=args.fresh, **read_options(args),
        )
        if args.table:
            if args.table.suffix == ".parquet":
                table.to_parquet(args.table, index=False)
            else:
                table.to_csv(args.table, index=False, float_format="%.6f")
            print(f"wrote {args.table} ({len(table)} requests)", file=sys.stderr)
        if args.plot:
            args.plot.write_text(validation.cdf_figure(report, table))
            print(f"wrote {args.plot}", file=sys.stderr)
    else:
        report = json.loads(_core().disk_validate(
            str(args.model), str(args.trace), format=args.trace_format, replay=args.replay,
            fresh=args.fresh, **read_options(args),
        ))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"drive:    {report['drive']} ({report['requests']} requests)")
    print(f"replay:   {report['replay']}-loop (the trace had at most "
          f"{report['max_outstanding']} outstanding)")
    if report["preconditioned"]:
        print("model:    preconditioned, every page written first (--fresh starts it empty)")
    skipped = []
    if report["not_replayed"]:
        skipped.append(f"{report['not_replayed']} flushes, discards and empty requests not replayed")
    if report["unmeasured"]:
        skipped.append(f"{report['unmeasured']} requests without a measured time not compared")
    if skipped:
        print(f"skipped:  {'; '.join(skipped)}")
    print(f"demerit:  {report['demerit_ms']:.3f} ms")
    print(
        f"mean:     {report['mean_sim_ms']:.3f} ms simulated, {report['mean_measured_ms']:.3f} ms measured"
    )
    print(
        f"p90:      {report['p90_sim_ms']:.3f} ms simulated, {report['p90_measured_ms']:.3f} ms measured"
    )
    for op in ("reads", "writes"):
        o = report[op]
        if o:
            print(f"{op + ':':<9} {o['requests']} requests, demerit {o['demerit_ms']:.3f} ms, "
                  f"mean {o['mean_sim_ms']:.3f} / {o['mean_measured_ms']:.3f} ms, "
                  f"p90 {o['p90_sim_ms']:.3f} / {o['p90_measured_ms']:.3f} ms (simulated / measured)")
    for u in report["unsupported"]:
        print(f"unsupported: {u}")
    return 0


def cmd_probe(args) -> int:
    keys = {
        "settle_us": args.settle_us,
        "backtrack": args.backtrack,
        "confirms": args.confirms,
        "retries": args.retries,
        "scans": args.scans,
        "start_lba": args.start_lba,
        "end_lba": args.end_lba,
        "max_probes": args.max_probes,
        "repeats": args.repeats,
        "skew_tracks": args.skew_tracks,
    }
    if args.thesis:
        # The reconstructed algorithm exactly: the previous response as the reference, any
        # change a candidate, one miss drops it, one scan measures a track (an explicit
        # --retries or --scans still wins).
        keys = {"reference": 1, "upward_only": "false", **keys}
        keys["retries"] = 0 if args.retries is None else args.retries
        keys["scans"] = 1 if args.scans is None else args.scans
    table = "\n".join(f"{k} = {v}" for k, v in keys.items() if v is not None)
    if args.spec:
        table += "\nmechanics = true"
    if (args.target is None) == (args.model is None):
        print("wattio: disk probe: give a TARGET (live) or --model M (simulated), not both", file=sys.stderr)
        return 2
    if args.target is not None:
        report = json.loads(
            _core().disk_probe_live(args.target, table, args.min_zone_tracks, args.timeout)
        )
    else:
        report = json.loads(_core().disk_probe(str(args.model), table, args.min_zone_tracks))
    if args.spec and "spec" in report:
        Path(args.spec).write_text(report["spec"])
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if report["done"] else 1
    print(f"{'first LBA':>12} {'last LBA':>12} {'SPT':>6} {'tracks':>8}")
    for r in report["runs"]:
        tracks = (r["last_lba"] - r["first_lba"] + 1) // r["spt"]
        print(f"{r['first_lba']:>12} {r['last_lba']:>12} {r['spt']:>6} {tracks:>8}")
    if report["tail"]:
        first, last = report["tail"]
        print(f"{first:>12} {last:>12} {'?':>6} {'(tail)':>8}")
    print(f"\nzones (stretches of < {args.min_zone_tracks} tracks folded in):")
    for z in report["zones"]:
        print(f"  LBA {z['first_lba']:>12} – {z['last_lba']:>12}: {z['spt']} sectors per track")
    secs = report["finished_at_ns"] / 1e9
    print(
        f"\n{report['probes']} probe writes, {report['glitches']} glitches, "
        f"{report['retried']} retried, {report['disagreed']} scans disagreed, "
        + (f"{secs:.1f} s of live probing" if report["live"] else f"{secs:.1f} s of simulated probing")
    )
    steps = report["response_steps"]
    if report["live"] and sum(steps):
        edges = ["<10", "<50", "<100", "<250", "<500", "<1000", ">=1000"]
        print(
            "response steps (µs: count): " + ", ".join(f"{e}: {n}" for e, n in zip(edges, steps))
        )
    m = report.get("mechanics")
    if m:
        print(
            f"\nrotation {m['rotation_ns'] / 1e6:.4f} ms ({60e9 / m['rotation_ns']:.1f} rpm), "
            f"overhead {m['overhead_ns'] / 1e6:.3f} ms, head switch {m['head_switch_ns'] / 1e6:.3f} ms, "
            f"{m['surfaces']} surfaces{'' if m['surfaces_found'] else ' (not found: 1 assumed)'}, "
            f"write-back cache: {'yes' if m['write_back'] else 'no'}"
        )
        print(f"{'first LBA':>12} {'SPT':>6} {'per rev':>7} {'head skew':>9} {'cyl skew':>8}")
        for z in m["zones"]:
            print(
                f"{z['first_lba']:>12} {z['spt']:>6} {z['sectors_per_rev']:>7} "
                f"{z['head_skew']:>9.2f} {z['cyl_skew']:>8.2f}"
            )
        print("seek (cylinders: ms): " + ", ".join(f"{d}: {t / 1e6:.2f}" for d, t in m["seek"]))
    if args.spec and "spec" in report:
        print(f"wrote {args.spec} (its [power] table is a placeholder: add the datasheet's)")
    if report["stopped"]:
        print(f"wattio: probe stopped early: {report['stopped']}", file=sys.stderr)
        return 1
    return 0


def add_commands(sub) -> None:
    """Register this area's subcommands on the top-level subparsers."""
    disk = sub.add_parser("disk", help="DiskSim drive import and validation")
    dsub = disk.add_subparsers(dest="disk_command", metavar="SUBCOMMAND", required=True)

    p = dsub.add_parser("import", help="convert a DiskSim .parv into a catalogue entry")
    p.add_argument("parv", type=Path, help="DiskSim parameter file (NAME.parv)")
    p.add_argument("--out", type=Path, help="write catalogue TOML here (default: stdout)")
    p.add_argument(
        "--power-from",
        metavar="MODEL",
        help="copy the [power] table of this catalogue name or TOML file: a runnable entry",
    )
    p.set_defaults(func=cmd_import)

    p = dsub.add_parser(
        "validate",
        help="replay a trace with measured response times on a model, print the demerit",
        description="The model's response times against a real device's: a DiskSim "
        "validation trace, blktrace or blkparse (each request measured to its completion), "
        "MSR, a `wattio capture block` trace, … replayed closed-loop (one outstanding, the "
        "trace's think times kept: DiskSim's validation) or open-loop (at the recorded "
        "arrivals, through the model's own queue), compared by DiskSim's demerit (docs/validation.md).",
    )
    p.add_argument("model", type=Path, metavar="MODEL",
                   help="a DiskSim .parv, a catalogue TOML file or an embedded catalogue name")
    p.add_argument("trace", type=Path, metavar="TRACE",
                   help="a trace with measured response times (NAME.trace, "
                   "sda.blktrace.0, blkparse text, …)")
    from wattio.cli_options import add_trace_read_options

    add_trace_read_options(p)
    p.add_argument("--replay", choices=("closed", "open"),
                   help="closed-loop or open-loop (default: closed if the trace never had two "
                   "requests outstanding, else open)")
    p.add_argument("--fresh", action="store_true",
                   help="start an SSD model empty (default: every page written first, as the "
                   "traced drive held data; a fresh FTL answers reads of unwritten pages at once)")
    p.add_argument("--table", type=Path, metavar="FILE",
                   help="write every compared request (op, simulated_ms, measured_ms) as CSV, "
                   "or Parquet if FILE ends in .parquet")
    p.add_argument("--plot", type=Path, metavar="FILE.svg",
                   help="draw the simulated and measured response-time CDFs (all, reads, writes)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_validate)

    p = dsub.add_parser(
        "probe",
        help="find track boundaries by timing writes (thesis ch. 6), live or on a simulated drive",
        description="Live (TARGET): a scratch image, block device or NBD export "
        "(nbd://HOST:PORT/EXPORT, nbd+unix:///EXPORT?socket=PATH) timed on the wall clock; "
        "DESTRUCTIVE: every sector it times is overwritten. Simulated: --model M.",
    )
    p.add_argument(
        "target",
        nargs="?",
        help="live: a scratch file, block device or NBD URI (overwritten!)",
    )
    p.add_argument(
        "--model",
        help="simulated: an hdd-mechanical catalogue name or TOML file, or a DiskSim .parv",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=86400.0,
        help="live: give up after this many seconds (default: a day)",
    )
    p.add_argument(
        "--retries",
        type=int,
        help="times a candidate boundary may miss and be timed again (3; the thesis: 0)",
    )
    p.add_argument(
        "--scans",
        type=int,
        help="scans of a track measured sector by sector that must agree (2; the thesis: 1)",
    )
    p.add_argument(
        "--thesis",
        action="store_true",
        help="the thesis's rule: previous response as reference, any change a candidate, "
        "no retry, one scan",
    )
    p.add_argument("--settle-us", type=float, help="response jump marking a boundary (500)")
    p.add_argument("--backtrack", type=int, help="sectors to back up to confirm (5)")
    p.add_argument("--confirms", type=int, help="jumps needed to take a boundary (10)")
    p.add_argument("--start-lba", type=int)
    p.add_argument("--end-lba", type=int, help="one past the last LBA (default: the end)")
    p.add_argument("--max-probes", type=int)
    p.add_argument(
        "--spec",
        type=Path,
        help="also time the mechanics (second phase) and write a runnable drive spec here",
    )
    p.add_argument("--repeats", type=int, help="second phase: times each shot is taken (3)")
    p.add_argument("--skew-tracks", type=int, help="second phase: boundaries per zone (64)")
    p.add_argument(
        "--min-zone-tracks",
        type=int,
        default=2,
        help="fold stretches of fewer tracks (spare or slipped sectors) into their zone",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_probe)
