"""`wattio sweep`: one config, a grid of values, one run per point, a table of results."""

from __future__ import annotations

import json
import sys

from wattio.cli_options import add_json_option, add_out_option, add_trace_read_options, read_options


def add_commands(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a config over a grid of parameter values",
        description="Run CONFIG once per point of the grid given by --set options (their "
        "Cartesian product) and print one row per point. Keys are dotted paths into the "
        "config: function.0.timeout_s, workload.rate, run.seed, device.0.model, ...",
    )
    p.add_argument("config", help="run config (TOML)")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        required=True,
        metavar="KEY=V1,V2,...",
        help="a swept key and its values (TOML values: 5, 0.5, true, \"name\"); repeat for more keys",
    )
    p.add_argument("--trace", help="trace file to replay instead of the config's workload")
    add_trace_read_options(p)
    add_out_option(p, what="points' run outputs, OUT/NNNN, OUT/points.json and OUT/comparison.html")
    p.add_argument("--report", action="store_true", help="write report.html for each point (needs --out)")
    p.add_argument("--jobs", type=int, default=None, help="parallel runs (default: number of cores)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run the points on this Dask cluster (needs wattio[dask]; see docs/sweeps.md)")
    p.add_argument("--csv", help="also write the table as CSV")
    add_json_option(p)
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args) -> int:
    from wattio.sweep import parse_set, sweep

    grid = {}
    for s in args.sets:
        k, vs = parse_set(s)
        if k in grid:
            raise ValueError(f"--set {k}: given twice")
        grid[k] = vs
    def run_sweep(out):
        return sweep(
            args.config,
            grid,
            trace=args.trace,
            trace_format=args.trace_format,
            out=out,
            report=args.report,
            jobs=args.jobs,
            scheduler=args.scheduler,
            **read_options(args),
        )

    if args.out:
        from wattio.outdir import check_replaceable, fresh_output

        if check_replaceable(args.out):
            print(f"wattio: replacing the previous outputs in {args.out}/", file=sys.stderr)
        with fresh_output(args.out) as tmp:
            df = run_sweep(tmp)
    else:
        df = run_sweep(None)
    if args.csv:
        df.to_csv(args.csv, index=False)
    if args.json:
        json.dump(df.to_dict(orient="records"), sys.stdout, indent=2, default=str)
        print()
    else:
        cols = [*grid, "requests", "energy_j", "mean_latency_ms", "p99_latency_ms", "spin_ups"]
        print(df[cols].to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    return 0
