"""The `wattio` command. Each area adds its subcommands through `add_commands(subparsers)`."""

from __future__ import annotations

import argparse
import sys

from wattio import cli_capture_memory, cli_disk, cli_live, cli_run, cli_sweep, cli_trace

AREAS = [cli_run, cli_sweep, cli_trace, cli_disk, cli_live, cli_capture_memory]


class UserError(Exception):
    """An error the user can fix (bad config, bad trace): printed without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wattio",
        description="Prototype, evaluate and run storage intelligence functions: "
        "energy, latency and wear side by side.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for area in AREAS:
        area.add_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UserError, ValueError, OSError, RuntimeError) as e:
        print(f"wattio: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
