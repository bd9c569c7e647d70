"""`wattio nvm`: run a memory trace through an L1 and a PRAM (+ STT-RAM) last-level cache
and print its bit-level write traffic, energy, lifetime and area (docs/nvcache.md)."""

from __future__ import annotations

import argparse
import json

from wattio import nvm


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    mult = units.get(t[-1:], 1)
    try:
        return int(t[:-1] if t[-1:] in units else t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"size {text!r}: expected bytes, or a number with K, M or G") from None


def _count(hi: int):
    """An argparse type: a whole number ≥ 1 that fits the simulator's field (``hi``); the
    simulator checks the tighter bounds of each (ways, unit sizes) and names them."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = 0
        if n < 1:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number ≥ 1")
        if n > hi:
            raise argparse.ArgumentTypeError(f"{text!r}: expected at most {hi}")
        return n

    return parse


U32, U64 = 2**32 - 1, 2**64 - 1


def _run(args) -> int:
    # The hybrid cache's own options mean nothing to another scheme: say so rather than run
    # what the user did not ask for.
    _, hybrid = nvm.encoding(args.scheme)
    if not hybrid:
        given = [o for o, v in (("--n-th", args.n_th), ("--miss-count", args.miss_count)) if v is not None]
        if given:
            raise ValueError(f"{' and '.join(given)}: hybrid cache options, but --scheme {args.scheme} "
                             "is not a hybrid cache (hc or hc+diN)")
    cache = nvm.Cache(scheme=args.scheme, llc_bytes=args.llc_size, llc_ways=args.llc_ways,
                      n_th=4 if args.n_th is None else args.n_th,
                      miss_count=args.miss_count or "block",
                      set_rotation=args.set_rotation, line_rotation=args.line_rotation,
                      l1_bytes=args.l1_size, l1_ways=args.l1_ways, passes=args.passes)
    rep = nvm.simulate(args.trace, cache)
    s = nvm.summary(rep)
    if args.json:
        rep.pop("heat_map")
        print(json.dumps({"summary": s, "report": rep}, indent=1))
        return 0
    print(f"{args.trace}: scheme {args.scheme}, LLC {args.llc_size >> 10} KiB {args.llc_ways}-way"
          f"{'' if rep['through_l1'] else ' (behind the capture’s own L1)'}"
          f"{f', {args.passes} passes' if args.passes > 1 else ''}")
    print(f"PRAM bit changes: n_lower {s['n_lower']}, n_upper {s['n_upper']}, n_swap {s['n_swap']}, "
          f"n_wl {s['n_wl']} (total {s['pram_bits']}); STT-RAM n_wb {s['n_wb']}")
    print(f"LLC: {s['llc_reads']} reads ({s['llc_read_hits']} hits), {s['llc_writes']} writes, {s['swaps']} swaps")
    years = s["lifetime_s"] / (365.25 * 86400)
    print(f"energy {s['energy_j'] * 1e3:.3f} mJ over {s['seconds']:.4f} s; most-written cell "
          f"{s['max_pram_cell_writes']} writes: lifetime {s['lifetime_s']:.4g} s ({years:.3g} years); "
          f"array area {s['area_mm2']:.3f} mm²")
    if s["fills_unknown"]:
        print(f"note: {s['fills_unknown']} fills of lines the trace never showed the content of (taken as zeros)")
    return 0


def add_commands(sub) -> None:
    p = sub.add_parser("nvm", help="bit-level PRAM/STT-RAM cache simulation of a memory trace")
    nsub = p.add_subparsers(dest="nvm_command", metavar="SUBCOMMAND", required=True)
    r = nsub.add_parser("run", help="one memory trace through an L1 and a non-volatile LLC")
    r.add_argument("trace", help="a memory trace (wattio capture memory)")
    r.add_argument("--scheme", default="dw", help=f"write scheme: {nvm.SCHEME_HELP} (default dw)")
    r.add_argument("--llc-size", type=_size, default=256 << 10, help="LLC bytes (default 256K)")
    r.add_argument("--llc-ways", type=_count(U32), default=8, help="LLC ways (default 8)")
    r.add_argument("--n-th", type=_count(U32), help="hybrid cache: N_th (default 4)")
    r.add_argument("--miss-count", choices=("block", "set"),
                   help="hybrid cache: N_miss counts CB_last's own misses (block, default) or the set's (set)")
    r.add_argument("--set-rotation", type=_count(U64), help="wear levelling: rotate sets every N PRAM writes")
    r.add_argument("--line-rotation", type=_count(U64), help="wear levelling: rotate a set's ways every N writes to it")
    r.add_argument("--l1-size", type=_size, default=32 << 10, help="L1D bytes, load/store traces (default 32K)")
    r.add_argument("--l1-ways", type=_count(U32), default=8, help="L1D ways (default 8)")
    r.add_argument("--passes", type=_count(U32), default=1,
                   help="replay the trace N times back to back, caches carried over (default 1)")
    r.add_argument("--json", action="store_true", help="the whole report as JSON")
    r.set_defaults(func=_run)
