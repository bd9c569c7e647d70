"""`wattio capture memory -- COMMAND…`: a program's main-memory traffic behind a modelled cache.

The command runs under Valgrind with wattio's own tool (`tools/valgrind/wattio-mem`, built
here on first use against Debian's `valgrind` package). The tool writes one raw file per
process; they are converted into one columnar memory trace (see docs/capture-memory.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from wattio import _core

TOOL = "wattio-mem"
# The tool's sources: the repository's tools/ directory (an editable install), or wherever
# WATTIO_TOOLS_DIR points.
_SOURCES = ("Makefile", "wm_main.c", "wattio_mem.h")


def tool_source() -> Path:
    root = os.environ.get("WATTIO_TOOLS_DIR")
    base = Path(root) if root else Path(__file__).resolve().parents[2] / "tools"
    src = base / "valgrind" / TOOL
    if not (src / "wm_main.c").is_file():
        raise RuntimeError(
            f"the {TOOL} Valgrind tool's sources are not at {src} "
            "(set WATTIO_TOOLS_DIR to the repository's tools/ directory)"
        )
    return src


def _cache_dir() -> Path:
    root = os.environ.get("WATTIO_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME")
    return Path(root) / "wattio" if root else Path.home() / ".cache" / "wattio"


def build_tool() -> Path:
    """Builds the tool once per version of its sources; returns the directory to use as
    VALGRIND_LIB."""
    if shutil.which("valgrind") is None:
        raise RuntimeError("valgrind is not installed (Debian: apt-get install valgrind)")
    src = tool_source()
    h = hashlib.sha256()
    for name in _SOURCES:
        h.update((src / name).read_bytes())
    out = _cache_dir() / f"{TOOL}-{h.hexdigest()[:16]}"
    if (out / f"{TOOL}-amd64-linux").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # Built aside and renamed into place, so concurrent first uses do not see half a build.
    tmp = Path(tempfile.mkdtemp(prefix=f".{TOOL}-", dir=out.parent))
    try:
        r = subprocess.run(
            ["make", "-s", "-C", str(src), f"OUT={tmp}"],
            check=False,
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise RuntimeError(f"building the {TOOL} Valgrind tool failed:\n{r.stderr}{r.stdout}")
        (tmp / "wm_main.o").unlink(missing_ok=True)
        try:
            tmp.rename(out)
        except OSError:
            if not (out / f"{TOOL}-amd64-linux").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def capture(
    command: list[str],
    out: str | os.PathLike,
    *,
    l1_size: int = 32 * 1024,
    l1_ways: int = 8,
    l2_size: int = 1024 * 1024,
    l2_ways: int = 16,
    line: int = 64,
    cache: bool = True,
    max_records: int | None = None,
    skip_records: int | None = None,
    window_clock: bool = False,
    keep_raw: str | os.PathLike | None = None,
    cwd: str | os.PathLike | None = None,
) -> tuple[int, dict]:
    """Runs `command` under the tool and writes the memory trace `out`.

    Returns (the command's exit status, the conversion report). `max_records` keeps the first
    that many traffic records per process (fills and write-backs, or loads and stores);
    `skip_records` first leaves out that many (a window later in the run); with
    `window_clock` the instructions of the records left out are not counted either, so the
    trace's clock runs inside the window. Process and mapping events are always kept.
    """
    if not command:
        raise ValueError("no command to capture (wattio capture memory -- COMMAND ...)")
    _core.capture_check_runnable(command[0], str(Path(cwd or ".").resolve()))
    libdir = build_tool()
    raw = Path(keep_raw) if keep_raw else Path(tempfile.mkdtemp(prefix="wattio-mem-"))
    raw.mkdir(parents=True, exist_ok=True)
    # <pid>.raw, and <pid>.raw.N for the Nth program a process exec'd
    for old in raw.glob("*.raw*"):
        old.unlink()
    argv = [
        "valgrind",
        f"--tool={TOOL}",
        "-q",
        "--trace-children=yes",
        f"--log-file={raw}/valgrind.%p.log",
        f"--wm-out={raw}/%p.raw",
        f"--wm-cache={'yes' if cache else 'no'}",
        f"--wm-line={line}",
        f"--wm-l1-size={l1_size}",
        f"--wm-l1-ways={l1_ways}",
        f"--wm-l2-size={l2_size}",
        f"--wm-l2-ways={l2_ways}",
    ]
    if max_records is not None:
        # The tool stops writing there; the conversion applies the same bound exactly.
        argv.append(f"--wm-max-records={max_records}")
    if skip_records is not None:
        if skip_records < 0:
            raise ValueError(f"--skip-records: expected a count >= 0, got {skip_records}")
        argv.append(f"--wm-skip-records={skip_records}")
    if window_clock:
        argv.append("--wm-window-clock=yes")
    env = dict(os.environ, VALGRIND_LIB=str(libdir))
    try:
        proc = subprocess.Popen(argv + ["--", *command], env=env, cwd=cwd)
        try:
            status = proc.wait()
        except KeyboardInterrupt:
            # The command got the SIGINT too (same process group); let Valgrind finish its
            # files, then keep what was captured.
            proc.send_signal(signal.SIGINT)
            status = proc.wait()
        files = sorted(raw.glob("*.raw*"))
        if not files:
            logs = "".join(p.read_text(errors="replace") for p in sorted(raw.glob("*.log")))
            raise RuntimeError(f"valgrind wrote no trace (exit status {status}): {logs.strip() or 'no log'}")
        report = json.loads(
            _core.memtrace_convert(
                [str(f) for f in files],
                str(out),
                max_records,
                [("wattio.memtrace.command", " ".join(command))],
            )
        )
    finally:
        if not keep_raw:
            shutil.rmtree(raw, ignore_errors=True)
    return status, report


def _size(text: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    try:
        if t and t[-1] in units:
            return int(t[:-1]) * units[t[-1]]
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not a size (e.g. 32768, 32K, 1M)")


def _run(args) -> int:
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    status, rep = capture(
        command,
        args.out,
        l1_size=args.l1_size,
        l1_ways=args.l1_ways,
        l2_size=args.l2_size,
        l2_ways=args.l2_ways,
        line=args.line,
        cache=not args.no_cache,
        max_records=args.max_records,
        skip_records=args.skip_records,
        window_clock=args.window_clock,
        keep_raw=args.keep_raw,
    )
    procs = rep["processes"]
    print(
        f"wrote {rep['rows']} rows of {len(procs)} process(es) to {args.out}", file=sys.stderr
    )
    for p in procs:
        print(
            f"  pid {p['pid']}: {p['fills']} fills, {p['writebacks']} write-backs, "
            f"exit {p['exit_code']}: {p['command'][:70]}",
            file=sys.stderr,
        )
    if status != 0:
        print(f"wattio: the command exited with status {status}", file=sys.stderr)
    return status


def add_memory_command(capture_subparsers) -> None:
    """Adds `memory` to the `wattio capture` group."""
    m = capture_subparsers.add_parser(
        "memory",
        help="main-memory traffic (fills, write-backs with old/new bytes, mappings) "
        "of a program behind a modelled L1/L2 cache, via Valgrind",
    )
    m.add_argument("--out", "-o", default="memory.parquet", help="the memory trace to write")
    m.add_argument("--l1-size", type=_size, default=32 * 1024, metavar="BYTES",
                   help="L1D size (default 32K)")
    m.add_argument("--l1-ways", type=int, default=8, metavar="N", help="L1D ways (default 8)")
    m.add_argument("--l2-size", type=_size, default=1024 * 1024, metavar="BYTES",
                   help="inclusive L2 size (default 1M)")
    m.add_argument("--l2-ways", type=int, default=16, metavar="N", help="L2 ways (default 16)")
    m.add_argument("--line", type=int, default=64, metavar="BYTES",
                   help="line size, a power of two 16..256 (default 64)")
    m.add_argument("--no-cache", action="store_true",
                   help="record every load and store (with old/new bytes) instead of traffic")
    m.add_argument("--max-records", type=int, metavar="N",
                   help="keep the first N traffic records of each process")
    m.add_argument("--skip-records", type=int, metavar="N",
                   help="first leave out N traffic records of each process (a window later in the run)")
    m.add_argument("--window-clock", action="store_true",
                   help="do not count the instructions of the traffic records left out (before "
                        "and after the window): the trace's clock runs inside the window")
    m.add_argument("--keep-raw", metavar="DIR", help="keep the tool's raw files in DIR")
    m.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    m.set_defaults(func=_run)
