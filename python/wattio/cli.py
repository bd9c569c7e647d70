"""The `wattio` command. Each area adds its subcommands through `add_commands(subparsers)`;
the options every area shares (`--format`, `--device`, `--lenient`, `--set`, `--json`,
`--out`) come from `wattio.cli_options`."""

from __future__ import annotations

import argparse
import os
import sys

from wattio import (
    cli_capture,
    cli_disk,
    cli_examples,
    cli_live,
    cli_memory,
    cli_nvm,
    cli_reproduce,
    cli_run,
    cli_sweep,
    cli_trace,
)

AREAS = [cli_run, cli_sweep, cli_trace, cli_disk, cli_live, cli_capture, cli_reproduce, cli_examples, cli_memory, cli_nvm]


class UserError(Exception):
    """An error the user can fix (bad config, bad trace): printed without a traceback."""


def _own_parser(parser: argparse.ArgumentParser) -> None:
    """Make each (sub)command remember its parser, so errors found after parsing print that
    command's usage rather than the top-level one."""
    parser.set_defaults(_parser=parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in action.choices.values():
                _own_parser(sp)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wattio",
        description="Prototype, evaluate and run storage intelligence functions: "
        "energy, latency and wear side by side.",
    )
    from wattio import _core

    p.add_argument("--version", action="version", version=f"wattio {_core.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for area in AREAS:
        area.add_commands(sub)
    _own_parser(p)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        args._parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        rc = int(args.func(args) or 0)
        # A closed pipe shows at the last flush: let it show here, where it is handled.
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        # `wattio … | head`: the reader left; stop quietly, and keep Python's own flush at
        # exit from failing again on the closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        # A user's Python function raised it during a run: a user error, located.
        where = getattr(e, "wattio_context", None)
        if where is None and not isinstance(e, (UserError, ValueError, OSError, RuntimeError)):
            raise
        print(f"wattio: error: {where or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
