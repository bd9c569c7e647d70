"""`wattio disk` subcommands: DiskSim parameter import and validation."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _core():
    from wattio import _core

    return _core


def cmd_import(args) -> int:
    text, unsupported = _core().disk_import(str(args.parv))
    for u in unsupported:
        print(f"wattio: unsupported DiskSim parameter: {u}", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out} (add a [power] table from the drive's datasheet)")
    else:
        sys.stdout.write(text)
    return 0


def cmd_validate(args) -> int:
    report = json.loads(_core().disk_validate(str(args.parv), str(args.trace)))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"drive:    {report['drive']} ({report['requests']} requests)")
    print(f"demerit:  {report['demerit_ms']:.3f} ms")
    print(
        f"mean:     {report['mean_sim_ms']:.3f} ms simulated, {report['mean_measured_ms']:.3f} ms measured"
    )
    print(
        f"p90:      {report['p90_sim_ms']:.3f} ms simulated, {report['p90_measured_ms']:.3f} ms measured"
    )
    for u in report["unsupported"]:
        print(f"unsupported: {u}")
    return 0


def add_commands(sub) -> None:
    """Register this area's subcommands on the top-level subparsers."""
    disk = sub.add_parser("disk", help="DiskSim drive import and validation")
    dsub = disk.add_subparsers(dest="disk_command", metavar="SUBCOMMAND", required=True)

    p = dsub.add_parser("import", help="convert a DiskSim .parv into a catalogue entry")
    p.add_argument("parv", type=Path, help="DiskSim parameter file (NAME.parv)")
    p.add_argument("--out", type=Path, help="write catalogue TOML here (default: stdout)")
    p.set_defaults(func=cmd_import)

    p = dsub.add_parser("validate", help="replay a DiskSim validation trace, print the demerit")
    p.add_argument("parv", type=Path)
    p.add_argument("trace", type=Path, help="DiskSim validate trace (NAME.trace)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_validate)
