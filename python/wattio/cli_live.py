"""`wattio` subcommands of the live area: `serve` and `replay`."""

from __future__ import annotations

import json
import signal
import sys
import tomllib
from pathlib import Path

from wattio.cli_options import add_json_option, add_out_option, add_trace_read_options, read_options


def _python_functions(config: str) -> dict:
    """The config's ``kind = "python"`` functions, instantiated as ``wattio run`` does."""
    from wattio.api import python_functions

    path = Path(config)
    return python_functions(tomllib.loads(path.read_text()), path.parent)


def _serve(args) -> int:
    if not args.image:
        raise ValueError("give CONFIG or at least one --image FILE")
    if (args.socket is None) == (args.listen is None):
        raise ValueError("give exactly one of --socket PATH or --listen 127.0.0.1:PORT")

    # SIGTERM ends the session as cleanly as Ctrl-C: flush, ledger, summary.
    def _term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    # Ctrl-C too, even when started with SIGINT ignored (a background job of a
    # non-interactive shell inherits SIG_IGN, and Python then leaves it so): a server is
    # stopped by its signals, as nbdkit installs its own for SIGINT, SIGQUIT and SIGTERM.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    functions = _python_functions(args.config) if args.config is not None else None
    if args.out:
        from wattio.outdir import fresh_output

        with fresh_output(args.out) as tmp:
            summary = _serve_into(args, functions, str(tmp))
        print(f"wrote {args.out}/")
    else:
        summary = _serve_into(args, functions, None)
    lat = summary["live"]["latency_us"]
    print(
        f"served {summary['requests']} requests ({summary['errors']} errors), "
        f"p50 {lat['p50']:.1f} us, p99 {lat['p99']:.1f} us, energy {summary['energy_j']:.3f} J"
    )
    # The stack's clean unload at shutdown: what a layer could not finish (a write-back
    # cache whose disk refused the write-back) means a component alone is not the volume.
    for left in (summary.get("unload") or {}).get("left", []):
        print(f"wattio serve: the clean unload left work undone: {left}", file=sys.stderr)
    return 0


def _serve_into(args, functions, out):
    from wattio import _core

    return _core.serve(
        args.image,
        socket=args.socket,
        listen=args.listen,
        names=args.name or None,
        model=args.model,
        emulate=not args.no_emulate,
        spindown=args.spindown,
        capture=args.capture,
        out=out,
        direct=args.direct,
        read_only=args.read_only,
        workers=args.workers,
        poll_us=args.poll_us,
        status=args.status,
        config=args.config,
        functions=functions,
        allow_remote=args.allow_remote,
        tls=args.tls,
        tls_certificate=args.tls_certificate,
        tls_key=args.tls_key,
        max_connections=args.max_connections,
        conn_mib=args.conn_mib,
        total_mib=args.total_mib,
        handshake_timeout=args.handshake_timeout,
        reply_timeout=args.reply_timeout,
    )


def _replay(args) -> int:
    from wattio import _core

    r = _core.replay_trace(args.trace, args.nbd, speed=args.speed, format=args.trace_format, **read_options(args))
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        print(
            f"sent {r['sent']} requests ({r['errors']} errors, {r['skipped']} skipped) in "
            f"{r['duration_s']:.3f} s; latency mean {r['latency_mean_us']:.1f} us, "
            f"p50 {r['latency_p50_us']:.1f} us, p99 {r['latency_p99_us']:.1f} us"
        )
    return 1 if r["errors"] else 0


def add_commands(sub) -> None:
    """Register this area's subcommands on the top-level subparsers."""
    p = sub.add_parser(
        "serve",
        help="serve component devices over NBD with a function stack in the I/O path",
        description="Run an NBD server (Unix socket by default, TCP on loopback with --listen) "
        "whose export goes through a wattio stack in real time.",
    )
    p.add_argument(
        "config",
        nargs="?",
        default=None,
        help="run config (TOML), assembled as `wattio run` does; then --image DEVICE=FILE",
    )
    p.add_argument(
        "--image",
        action="append",
        default=[],
        help="component image file (repeatable); with CONFIG: DEVICE=FILE per [[device]]",
    )
    p.add_argument("--name", action="append", default=[], help="export name per --image")
    p.add_argument("--socket", help="Unix socket path to listen on")
    p.add_argument(
        "--listen", help="HOST:PORT to listen on (loopback unless --allow-remote)"
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="let --listen bind an address other hosts can reach (a warning is printed)",
    )
    p.add_argument(
        "--tls",
        choices=["off", "on", "require"],
        default="off",
        help="NBD STARTTLS: off, on (offered), require (plain clients refused)",
    )
    p.add_argument("--tls-certificate", help="PEM certificate chain (with --tls on/require)")
    p.add_argument("--tls-key", help="PEM private key of the certificate")
    p.add_argument(
        "--max-connections", type=int, help="connections served at once (default 128)"
    )
    p.add_argument(
        "--conn-mib",
        type=float,
        help="MiB one connection may hold in requests and unread replies (default 16)",
    )
    p.add_argument(
        "--total-mib", type=float, help="MiB all connections may hold together (default 256)"
    )
    p.add_argument(
        "--handshake-timeout",
        type=float,
        help="seconds a client may take to finish option haggling (default 10)",
    )
    p.add_argument(
        "--reply-timeout",
        type=float,
        help="seconds a client may leave its replies unread before it is dropped (default 60)",
    )
    p.add_argument("--model", help="emulate the devices with this catalogue entry or TOML file")
    p.add_argument(
        "--no-emulate", action="store_true", help="with --model: describe only, no timing"
    )
    p.add_argument("--spindown", type=float, help="fixed-timeout spin-down layer (seconds)")
    p.add_argument("--capture", help="record every guest request to this trace file")
    add_out_option(p, what="session's summary.json and ledger.csv")
    p.add_argument("--direct", action="store_true", help="open component devices with O_DIRECT")
    p.add_argument("--read-only", action="store_true")
    p.add_argument("--workers", type=int, default=4, help="I/O worker threads")
    p.add_argument(
        "--poll-us",
        type=int,
        help="µs a connection polls its socket before it sleeps (default 50; 0 = sleep at once): "
        "saves the wake-up latency of a VM's idle vCPU at the cost of that much CPU per idle gap",
    )
    p.add_argument("--status", type=float, default=1.0, help="status line period (s), 0 = off")
    p.set_defaults(func=_serve)

    r = sub.add_parser(
        "replay",
        help="replay a trace against an NBD server with its original timing",
    )
    r.add_argument(
        "trace", help="trace file: a `wattio serve --capture` file or any trace `wattio run` reads"
    )
    add_trace_read_options(r)
    add_json_option(r)
    r.add_argument(
        "--nbd", required=True, help="nbd+unix:///EXPORT?socket=PATH or nbd://HOST:PORT/EXPORT"
    )
    r.add_argument("--speed", type=float, default=1.0, help="time scale (2 = twice as fast)")
    r.set_defaults(func=_replay)
