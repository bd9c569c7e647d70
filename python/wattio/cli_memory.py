"""`wattio memory run`: a memory config (DRAM ranks, processes, DMA devices, a memory policy)
through the memory simulator, its energy, power and delays printed (docs/memory.md)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from wattio import memory
from wattio.cli_options import add_json_option, add_set_option, apply_sets


def add_commands(sub) -> None:
    p = sub.add_parser("memory", help="DRAM rank power management: run a memory config")
    msub = p.add_subparsers(dest="memory_command", metavar="SUBCOMMAND", required=True)
    r = msub.add_parser(
        "run",
        help="simulate a [memory] config",
        description="Run a memory config: [memory] (DRAM part, ranks, CPUs, policy), [[process]] "
        "(captured traces, streams, computation, kernel threads) and [[dma]] devices. "
        "See docs/memory.md.",
    )
    r.add_argument("config", help="TOML file")
    add_set_option(r)
    add_json_option(r)
    r.add_argument("--out", metavar="DIR", help="also write summary.json and ranks.csv into DIR")
    r.set_defaults(func=cmd_run)
    d = msub.add_parser(
        "delay-hiding",
        help="file-call traces through the buffer cache's ranks and delay-hiding predictors",
        description="Replay file-call traces (wattio capture files; several are merged by time) "
        "through the buffer cache's DRAM ranks under one or more predictors, and print each "
        "one's file-I/O slowdown, prediction outcomes and energy (docs/functions/delay-hiding.md).",
    )
    d.add_argument("traces", nargs="+", metavar="TRACE", help="file-call trace (Parquet)")
    d.add_argument("--predictor", action="append", metavar="P",
                   help="predictor (repeatable; default: isr and af-mra-et): isr, all, mra, f-mra, f-mfa, "
                   "f-drd, af-mra, af-mfa, af-drd, f-drd-all, and each but isr/all with -et")
    d.add_argument("--cache-share", type=float, metavar="F",
                   help="buffer cache = F × the traces' footprint, over the ranks (default: full ranks)")
    d.add_argument("--storage", metavar="MODEL|CONFIG",
                   help="serve the cache's misses and write-backs by a catalogue model or a run config's "
                   "devices and functions (a .toml file), and print that storage's requests and energy")
    add_set_option(d)
    add_json_option(d)
    d.set_defaults(func=cmd_delay_hiding)


def cmd_run(args) -> int:
    path = Path(args.config)
    config: Path | dict = path
    if args.sets:
        try:
            config = apply_sets(tomllib.loads(path.read_text()), args.sets)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{path}: {e}") from None
    s = memory.run(config, base_dir=path.parent)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(s, indent=1) + "\n")
        memory.ranks(s).to_csv(out / "ranks.csv")
    if args.json:
        print(json.dumps(s, indent=1))
        return 0
    print_summary(s)
    return 0


def print_summary(s: dict) -> None:
    n = len(s["ranks"])
    print(f"policy     {s['policy']} on {n} {s['part']} rank{'s' if n != 1 else ''}")
    print(
        f"runtime    {s['runtime_ns'] / 1e6:,.3f} ms    reads {s['reads']:,}    writes {s['writes']:,}    "
        f"mean response {s['mean_response_ns']:,.1f} ns"
    )
    print(
        f"energy     {s['energy_j']:,.6f} J    average power {s['avg_power_w']:,.3f} W    "
        f"waited for an exit: powerdown {s['delayed_pd']:,}, self refresh {s['delayed_sr']:,}"
    )
    print(
        f"pages      {s['pages_touched']:,} touched, {s['pages_shared']:,} shared, "
        f"{s['pages_migrated']:,} migrated, {s['pages_reshaped']:,} reshaped    switches {s['switches']:,}"
    )
    d = s["dma"]
    if d["transfers"]:
        print(
            f"dma        {d['transfers']:,} transfers"
            + (f" ({d['dropped']:,} more dropped: ring overrun)" if d["dropped"] else "")
            + f", {d['lines']:,} lines, {d['delayed']:,} waited for a rank; "
            f"latency mean {d['mean_latency_ns']:,.1f} ns, max {d['max_latency_ns']:,} ns; "
            f"buffers on ranks {', '.join(str(r) for r, p in enumerate(d['pages_per_rank']) if p)}"
        )
    table = memory.ranks(s)
    states = [c for c in table.columns if c.endswith("_s")]
    print(f"{'rank':>4} {'energy J':>12} {'power W':>9} {'reads':>10} {'writes':>10}  share of time in " + ", ".join(
        c.removesuffix("_s") for c in states))
    runtime_s = s["runtime_ns"] / 1e9 or 1.0
    for i, row in table.iterrows():
        shares = " ".join(f"{row[c] / runtime_s:6.1%}" for c in states)
        print(f"{i:>4} {row['energy_j']:>12.6f} {row['mean_power_w']:>9.3f} {int(row['reads']):>10,} "
              f"{int(row['writes']):>10,}  {shares}")
    for name, v in s["counters"]:
        print(f"  {name} {v:,.0f}")


def cmd_delay_hiding(args) -> int:
    # The [delay_hiding] table's keys, flat (a dotted key makes a table the run refuses).
    params = apply_sets({}, args.sets)
    if "predictor" in params:
        raise ValueError("--set predictor: use --predictor")
    predictors = args.predictor or ["isr", "af-mra-et"]
    # The storage traffic does not depend on the predictor: one run has it.
    reports = [memory.delay_hiding(args.traces, p, cache_share=args.cache_share,
                                   storage=args.storage if i == 0 else None, **params)
               for i, p in enumerate(predictors)]
    if args.json:
        print(json.dumps(reports, indent=1))
        return 0
    first = reports[0]
    print(f"{len(args.traces)} trace{'s' if len(args.traces) != 1 else ''}: {first['calls']:,} calls "
          f"({first['empty_calls']:,} moved no data); cache {first['cache_hits']:,} block hits, "
          f"{first['cache_misses']:,} misses"
          + (f"; {first['blocks_per_rank']:,} blocks a rank" if first["blocks_per_rank"] else ""))
    base = reports[0]["energy_j"]
    print(f"{'predictor':<12} {'slowdown':>9} {'hit':>8} {'miss':>8} {'wrong':>8} {'hit %':>7} "
          f"{'energy J':>12} {'vs ' + predictors[0]:>10}")
    for r in reports:
        vs = f"{100 * r['energy_j'] / base:9.1f}%" if base > 0 else "        —"
        print(f"{r['predictor']:<12} {r['slowdown_pct']:8.2f}% {r['prediction_hit']:>8,} {r['prediction_miss']:>8,} "
              f"{r['prediction_wrong']:>8,} {r['hit_pct']:6.1f}% {r['energy_j']:>12.6f} {vs}")
    if "storage" in first:
        print_storage(first)
    return 0


def print_storage(r: dict) -> None:
    s, w = r["storage"], r["written_back"]
    print(f"storage    {s['requests']:,} requests over {s['duration_s']:,.3f} s: latency mean "
          f"{s['mean_latency_ms']:,.3f} ms, p99 {s['p99_latency_ms']:,.3f} ms; energy {s['energy_j']:,.3f} J; "
          f"blocks written back: {w['evicted']:,} evicted, {w['synced']:,} at fsync, {w['expired']:,} by the flusher")
    for name, d in s["devices"].items():
        print(f"  {name} ({d['model']}): {d['ios']:,} I/Os, {d['bytes_read']:,} B read, {d['bytes_written']:,} B "
              f"written, {d['energy_j']:,.3f} J, {d['spin_ups']:,} spin-ups")
    for line in s["trace"]:
        print(f"  {line}")
