"""Parameter sweeps: one config, a grid of values for some of its keys, one run per point.

Every point is an ordinary run (a pure function of its config, trace and seed), so a sweep's
result does not depend on how its points are scheduled: in this process, in a local process
pool, on a Dask cluster (``scheduler="tcp://HOST:PORT"`` or a ``distributed.Client``), or
through any :class:`concurrent.futures.Executor` (Ray, MPI, …) whose workers can import
wattio.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import os
import tomllib
from pathlib import Path

from wattio import _core
from wattio.api import _dump_toml, config_source, run
from wattio.progress import steps

#: How long ``scheduler=`` waits for a Dask scheduler to answer before giving up.
CONNECT_TIMEOUT_S = 10


def set_key(cfg: dict, key: str, value) -> None:
    """Set ``key`` — a dotted path such as ``function.0.timeout_s`` or ``workload.rate`` — in
    ``cfg``. Every step but the last must exist, so a misspelt key fails instead of adding a
    table the run would ignore or refuse."""
    parts = key.split(".")
    node = cfg
    for depth, part in enumerate(parts[:-1]):
        where = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ValueError(f"sweep key {key!r}: {where!r} is not an index of a list of {len(node)}")
            node = node[int(part)]
        elif isinstance(node, dict):
            if part not in node:
                have = ", ".join(sorted(node)) or "nothing"
                raise ValueError(f"sweep key {key!r}: no {where!r} in the config (it has: {have})")
            node = node[part]
        else:
            # A user's key error, reported like every config error (the CLI catches ValueError).
            raise ValueError(f"sweep key {key!r}: {where!r} is a value, not a table")  # noqa: TRY004
    last = parts[-1]
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise ValueError(f"sweep key {key!r}: {last!r} is not an index of a list of {len(node)}")
        node[int(last)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        parent = ".".join(parts[:-1])
        raise ValueError(f"sweep key {key!r}: {parent!r} is a value, not a table")  # noqa: TRY004


def points(grid: dict[str, list]) -> list[dict]:
    """The Cartesian product of ``grid``, in the order of its keys (last key varies fastest)."""
    for k, vs in grid.items():
        if not isinstance(vs, (list, tuple)) or not vs:
            raise ValueError(f"sweep key {k!r}: expected a non-empty list of values, got {vs!r}")
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(grid[k] for k in keys))]


def _label(point: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in point.items()).replace("/", "_")


def _run_point(task):
    """Runs in a worker: one point of a sweep. Returns its summary as a dict."""
    index, label, text, base, trace, trace_format, trace_options, out, report = task
    sub = Path(out) / f"{index:04d}" if out else None
    try:
        r = run(
            text,
            base_dir=base,
            trace=trace,
            trace_format=trace_format,
            out=sub,
            progress=False,
            report=report,
            **trace_options,
        )
    except (ValueError, RuntimeError) as e:
        # What only the run finds (a footprint past a device's end, a trace refused): the
        # point it belongs to, as the up-front config check says it.
        raise type(e)(f"sweep point {index} ({label}): {e}") from None
    return index, r.summary


def _row(point: dict, s: dict) -> dict:
    row = dict(point)
    row.update(
        {
            "requests": s["requests"],
            "errors": s["errors"],
            "duration_s": s["duration_s"],
            "energy_j": s["energy_j"],
            "mean_latency_ms": s["mean_latency_ms"],
            "p99_latency_ms": s["p99_latency_ms"],
            "spin_ups": sum(d["spin_ups"] for d in s["devices"].values()),
        }
    )
    for name, d in s["devices"].items():
        row[f"energy_j.{name}"] = d["energy_j"]
    return row


def sweep(
    config,
    grid: dict[str, list],
    *,
    trace: str | Path | None = None,
    trace_format: str | None = None,
    out: str | Path | None = None,
    report: bool = False,
    jobs: int | None = None,
    executor=None,
    scheduler: str | None = None,
    base_dir: str | Path | None = None,
    progress: bool | None = None,
    **trace_options,
):
    """Run ``config`` once per point of ``grid`` and return a pandas DataFrame, one row per
    point in grid order: the swept values, then the summary figures (requests, energy,
    latency, spin-ups, energy per device).

    Where the points run: ``jobs`` local worker processes (default: the machine's cores);
    or ``executor``, a ``distributed.Client`` or any :class:`concurrent.futures.Executor`;
    or ``scheduler``, the address of a Dask scheduler (``tcp://HOST:PORT``) to connect to
    for this sweep. With ``out``, point *i* writes a normal run output to ``out/i``
    (``out/points.json`` says which point is which) and ``out/comparison.html`` compares
    the points. Python-written functions are imported by each worker from the config's
    ``class``; a trace and ``out`` must be paths the workers can reach. ``trace_options``
    are how to read the trace, as for :func:`wattio.run` (``lenient``, ``device``, ``action``,
    ``columns``, ``delimiter``, ``header``).
    """
    import pandas as pd

    text, origin, base = config_source(config, base_dir)
    _core.check_config(text, origin)
    cfg = tomllib.loads(text)
    pts = points(grid)
    tasks = []
    for i, p in enumerate(pts):
        c = copy.deepcopy(cfg)
        for k, v in p.items():
            set_key(c, k, v)
        text = _dump_toml(c)
        try:
            _core.check_config(text, f"{origin} [{_label(p)}]")
        except ValueError as e:
            raise ValueError(f"sweep point {i} ({_label(p)}): {e}") from None
        tasks.append(
            (
                i,
                _label(p),
                text,
                str(base),
                str(trace) if trace else None,
                trace_format,
                trace_options,
                str(out) if out else None,
                report,
            )
        )
    if executor is not None and scheduler is not None:
        raise ValueError("sweep: give executor= or scheduler=, not both")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, "points.json").write_text(
            json.dumps([{"dir": f"{i:04d}", **p} for i, p in enumerate(pts)], indent=2, default=str) + "\n"
        )
    with _executor(executor, scheduler, jobs, len(tasks)) as ex, steps(len(tasks), "sweep", progress) as done:
        results = []
        for r in (ex.map(_run_point, tasks) if ex is not None else map(_run_point, tasks)):
            results.append(r)
            done()
    by_index = dict(results)
    if out:
        from wattio.report import comparison_row, write_comparison

        rows = [
            comparison_row(by_index[i], _label(p), link=f"{i:04d}/report.html" if report else f"{i:04d}/summary.json")
            for i, p in enumerate(pts)
        ]
        write_comparison(Path(out, "comparison.html"), rows, f"wattio sweep: {origin}",
                         f"{len(pts)} points of {', '.join(grid)}.")
    return pd.DataFrame([_row(p, by_index[i]) for i, p in enumerate(pts)])


@contextlib.contextmanager
def _executor(executor, scheduler, jobs, n):
    """Where the points run (None: in this process). A Dask client is used through its
    ``concurrent.futures`` face; one made here from ``scheduler`` is closed afterwards."""
    if scheduler is not None:
        try:
            from distributed import Client
        except ImportError:
            raise ValueError(
                f"--scheduler {scheduler}: Dask's `distributed` is not installed (pip install 'wattio[dask]')"
            ) from None
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except OSError as e:
            raise ValueError(f"--scheduler {scheduler}: cannot connect to the Dask scheduler: {e}") from None
        with client:
            yield client.get_executor()
        return
    if executor is not None:
        yield executor.get_executor() if hasattr(executor, "get_executor") else executor
        return
    workers = max(1, min(jobs or os.cpu_count() or 1, n))
    if workers == 1:
        yield None
        return
    # Imported here: it pulls in multiprocessing, a third of `wattio run`'s start-up,
    # which only a parallel sweep needs.
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as ex:
        yield ex


def parse_set(arg: str) -> tuple[str, list]:
    """``KEY=V1,V2,…`` from the command line; each value is read as a TOML value (number,
    boolean, quoted string) and otherwise kept as a bare string."""
    if "=" not in arg:
        raise ValueError(f"--set {arg!r}: expected KEY=VALUE[,VALUE…]")
    key, values = arg.split("=", 1)
    key = key.strip()
    if not key:
        raise ValueError(f"--set {arg!r}: empty key")
    out = []
    for raw in values.split(","):
        raw = raw.strip()
        if not raw:
            raise ValueError(f"--set {arg!r}: empty value")
        try:
            out.append(tomllib.loads(f"v = {raw}")["v"])
        except tomllib.TOMLDecodeError:
            out.append(raw)
    return key, out
