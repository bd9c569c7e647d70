"""`wattio capture …`: record what a real command does on this machine, as a trace."""

from __future__ import annotations

import argparse
import json
import sys

from wattio import cli_capture_memory

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """`512M`, `2G`, `1048576` → bytes."""
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = t[-1] if t and t[-1] in "kmgt" else ""
    num = t[: len(t) - len(unit)]
    try:
        n = float(num)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"size `{text}` is not a number with an optional K, M, G or T suffix"
        ) from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"size `{text}` must be positive")
    return int(n * _UNITS[unit])


def _command(args) -> list[str]:
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise ValueError("no command to capture: give it after `--`")
    return cmd


def _report(result: dict, out: str, as_json: bool, what: str) -> int:
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        span = result["span_ns"] / 1e9
        print(f"wrote {out}: {what}, over {span:.3f} s", file=sys.stderr)
        for n in result["notes"]:
            print(f"  {n}", file=sys.stderr)
    if result["interrupted"] is not None:
        print("wattio: capture interrupted; cleaned up", file=sys.stderr)
        return 130
    if result["exit_code"] != 0:
        print(f"wattio: the command ended with status {result['exit_code']}", file=sys.stderr)
    return result["exit_code"]


def _block(args) -> int:
    from wattio import _core

    out = _core.capture_block(
        args.image,
        args.out,
        _command(args),
        args.fs,
        args.size,
        args.setup,
        args.drop_caches,
        args.buffer_kb,
        args.fs_block_size,
        args.mount_options,
    )
    result = json.loads(out)
    what = f"{result['requests']} requests on {result['device']}"
    return _report(result, args.out, args.json, what)


def _files(args) -> int:
    from wattio import _core

    result = json.loads(_core.capture_files(args.out, _command(args)))
    what = (f"{result['requests']} data calls on {result['files']} files, "
            f"{result['events']} open/close/lseek/mmap events")
    return _report(result, args.out, args.json, what)


def _launch(args) -> int:
    from wattio import _core

    result = json.loads(_core.capture_launch(args.out, _command(args)))
    what = (f"{result['page_cache_insertions']} page-cache insertions and "
            f"{result['block_requests']} block requests of {len(result['pids'])} processes")
    return _report(result, args.out, args.json, what)


def add_commands(sub) -> None:
    """Register this area's subcommands on the top-level subparsers."""
    c = sub.add_parser("capture", help="record a real command's I/O as a trace (root)")
    csub = c.add_subparsers(dest="capture_command", metavar="MODE", required=True)
    cli_capture_memory.add_memory_command(csub)

    b = csub.add_parser(
        "block",
        help="block requests of COMMAND run on a loop-mounted image (tracefs)",
        description="Mount IMAGE through a loop device, run COMMAND in it (working directory "
        "= the mount), record its block requests with tracefs and write a columnar trace. "
        "Mounts, loop devices and trace state are cleaned up on every exit, Ctrl-C included.",
    )
    b.add_argument("--image", required=True, help="file-system image (created with --size)")
    b.add_argument("--out", "-o", required=True, help="columnar trace to write (.parquet)")
    b.add_argument("--fs", default="ext4", help="file system type (default ext4)")
    b.add_argument("--size", type=parse_size, help="create IMAGE of this size if missing (1G)")
    b.add_argument("--fs-block-size", type=int, metavar="BYTES",
                   help="block size of the file system made on a new IMAGE (ext2/3/4, xfs; "
                   "default: mkfs's choice, which for ext4 under 512 MB is 1024)")
    b.add_argument("--mount-options", metavar="OPTS",
                   help="mount(8) options for IMAGE, comma-separated (e.g. strictatime: an "
                   "atime write at every read, as kernels before 2.6.20)")
    b.add_argument("--setup", metavar="SCRIPT",
                   help="shell script run on the mounted image before tracing (untraced)")
    b.add_argument("--drop-caches", action="store_true",
                   help="sync and drop the page cache before the command (a cold run)")
    b.add_argument("--buffer-kb", type=int, default=16384,
                   help="trace ring buffer per CPU, KiB (default 16384)")
    b.add_argument("--json", action="store_true", help="print the result as JSON")
    b.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG…]")
    b.set_defaults(func=_block)

    f = csub.add_parser(
        "files",
        help="file-level system calls of COMMAND (strace)",
        description="Run COMMAND under strace and write its reads, writes and fsyncs with "
        "file ids and reconstructed file offsets as a columnar file-call trace; opens, "
        "closes, lseeks and mmaps go in its metadata (docs/capture.md).",
    )
    f.add_argument("--out", "-o", required=True, help="file-call trace to write (.parquet)")
    f.add_argument("--json", action="store_true", help="print the result as JSON")
    f.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG…]")
    f.set_defaults(func=_files)

    la = csub.add_parser(
        "launch",
        help="a cold launch of COMMAND: page-cache insertions and block requests (root)",
        description="Drop the page cache, run COMMAND and record the pages its process tree "
        "brings into the page cache and the block requests it issues, from the launch's "
        "start to its end (COMMAND's exit), as a launch trace (docs/capture.md).",
    )
    la.add_argument("--out", "-o", required=True, help="launch trace to write (.parquet)")
    la.add_argument("--json", action="store_true", help="print the result as JSON")
    la.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG…]")
    la.set_defaults(func=_launch)
