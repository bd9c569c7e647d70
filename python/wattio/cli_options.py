"""The command line's shared vocabulary: every subcommand that reads a trace, changes a config,
prints machine-readable output or writes a directory spells it the same way. Areas call these
adders instead of declaring their own options."""

from __future__ import annotations

import argparse
import tomllib


def add_trace_read_options(p: argparse.ArgumentParser, *, format_flag: str = "--format") -> None:
    """How to read a trace: ``--format`` (with ``format_flag``'s extra spellings, e.g.
    ``--from``), ``--device``, ``--lenient``, ``--action`` and the generic reader's
    ``--columns``, ``--delimiter``, ``--header``/``--no-header``. ``read_options(args)``
    collects them."""
    from wattio import _core

    reads, _ = _core.trace_formats()
    flags = ["--format"] + ([format_flag] if format_flag != "--format" else [])
    # No argparse choices: the reader accepts aliases (umass, cbs, …) and names the
    # formats it knows when it refuses one.
    p.add_argument(
        *flags,
        dest="trace_format",
        metavar="FORMAT",
        help=f"trace format: {', '.join(reads)} (default: detect; csv with --columns)",
    )
    p.add_argument(
        "--device",
        metavar="KEY",
        help="keep one device/volume/LUN of the trace (hm_1, 8,16, an ASU or volume id, a csv "
        "device value) as dev 0",
    )
    p.add_argument(
        "--lenient",
        action="store_true",
        help="skip bad lines (counted, the first few reported) and run empty or implausible "
        "traces with a warning, instead of stopping",
    )
    p.add_argument(
        "--action", metavar="A",
        help="blktrace/blkparse: the event to keep, Q, G, I, D, C, … (default D); a kept Q, G, "
        "I or D is measured to its completion (C), following merges, splits and requeues "
        "(docs/formats.md)",
    )
    p.add_argument(
        "--columns",
        metavar="SPEC",
        help="read any delimited text through a column mapping, e.g. "
        "'time=1:ms,op=2:read=R/RS;write=W,offset=3:sectors,size=4' (implies --format csv; "
        "see docs/formats.md)",
    )
    p.add_argument("--delimiter", metavar="D", help="csv: field delimiter: , ; | tab space (default ,)")
    p.add_argument(
        "--sort",
        action="store_true",
        help="the trace's records are out of time order: read them all (at most 4,194,304) and "
        "sort them by arrival, instead of stopping where time goes backwards",
    )
    p.add_argument(
        "--sort-window",
        type=int,
        metavar="N",
        help="the records are out of time order by at most N records: reorder them within a "
        "window of N (memory bounded by N, any length of trace), naming a record further back",
    )
    p.add_argument(
        "--header",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="csv: the first line is (or is not) a header (default: sniffed)",
    )


def read_options(args) -> dict:
    """The trace-reading keyword arguments of ``wattio.run``, ``_core.trace_*`` and friends."""
    return {
        "lenient": args.lenient,
        "device": args.device,
        "action": args.action,
        "columns": args.columns,
        "delimiter": args.delimiter,
        "header": args.header,
        "sort": args.sort,
        "sort_window": args.sort_window,
    }


def add_set_option(p: argparse.ArgumentParser) -> None:
    """``--set KEY=V`` (repeatable): a dotted key path into the config and a TOML value."""
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=V",
        help="change a config value: a dotted key path and a TOML value, e.g. "
        "run.until_s=3600, function.0.timeout_s=10, device.0.model='\"wd800-fs2\"'; repeatable",
    )


def add_json_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def add_out_option(p: argparse.ArgumentParser, default: str | None = None, what: str = "outputs") -> None:
    """``--out DIR``: written fresh, replacing a previous wattio output there as a whole."""
    tail = f" (default: {default})" if default else ""
    p.add_argument(
        "--out",
        default=default,
        metavar="DIR",
        help=f"directory for the {what}{tail}; a previous wattio output there is replaced as a whole",
    )


def parse_value(raw: str):
    """A command-line value as TOML (number, boolean, quoted string, array), else a bare string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw.strip()


# Tables a --set may create when the config does not have them yet.
_OPTIONAL_TABLES = ("run", "output", "trace")


def apply_sets(cfg: dict, sets: list[str]) -> dict:
    """``cfg`` with each ``KEY=V`` of ``sets`` applied (see ``wattio.sweep.set_key``)."""
    from wattio.sweep import set_key

    for s in sets:
        if "=" not in s:
            raise ValueError(f"--set {s!r}: expected KEY=VALUE")
        key, raw = s.split("=", 1)
        key = key.strip()
        head = key.split(".")[0]
        if head in _OPTIONAL_TABLES and "." in key:
            cfg.setdefault(head, {})
        set_key(cfg, key, parse_value(raw))
    return cfg
