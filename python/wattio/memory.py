"""Memory runs (Huang 2006 ch. 2–4): DRAM ranks, processes scheduled on CPUs, DMA devices and
a memory policy deciding when ranks sleep, through the memory simulator
(``wattio_engine::memory``). The config is a ``[memory]`` table, ``[[process]]`` tables and
optional ``[[dma]]`` tables (docs/memory.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from wattio import _core
from wattio.api import _dump_toml, config_source


def run(config, base_dir: str | Path | None = None) -> dict:
    """Run a memory config (a path to a TOML file, TOML text or a dict); trace paths resolve
    against the file's directory (or ``base_dir``). Returns the summary: runtime, energy,
    average power, accesses, per-rank residency and energy, the policy's counters, ``dma``."""
    text, origin, base = config_source(config, base_dir)
    try:
        return json.loads(_core.memory_run(text, str(base)))
    except ValueError as e:
        raise ValueError(f"{origin}: {e}") from None


def ranks(summary: dict):
    """Per-rank rows of a summary as a DataFrame: energy, mean power, accesses, waits for an
    exit, and seconds in each state."""
    import pandas as pd

    runtime_s = summary["runtime_ns"] / 1e9
    rows = []
    for i, r in enumerate(summary["ranks"]):
        row = {
            "rank": i,
            "energy_j": r["energy_j"],
            "mean_power_w": r["energy_j"] / runtime_s if runtime_s > 0 else 0.0,
            "reads": r["reads"],
            "writes": r["writes"],
            "delayed_pd": r["delayed_pd"],
            "delayed_sr": r["delayed_sr"],
        }
        for state, ns in zip(summary["states"], r["residency_ns"]):
            row[f"{state}_s"] = ns / 1e9
        row["exit_s"] = r["exit_ns"] / 1e9
        rows.append(row)
    return pd.DataFrame(rows).set_index("rank")


def delay_hiding(traces, predictor: str = "af-mra-et", cache_share: float | None = None, storage=None,
                 **params) -> dict:
    """File-call traces (``wattio capture files``; several are merged by time) through the
    buffer cache and a delay-hiding predictor (docs/functions/delay-hiding.md). ``params``
    are other keys of the ``[delay_hiding]`` table (``ranks``, ``dram``, ``block_bytes``,
    ``blocks_per_rank``, ``threshold``, ``target``, ``dirty_expire_s``, …). ``cache_share``
    scales the cache to that share of the traces' footprint over the ranks (as the
    reproduction scales the paper's 4 GB to each stand-in), instead of ``blocks_per_rank``.
    ``storage`` puts a storage stack in the loop — a catalogue model name, a run config (a
    path to a TOML file, TOML text or a dict: devices and functions, no workload) — which
    serves the cache's misses and write-backs at the calls' times; the report then has
    ``written_back`` and ``storage`` (that run's summary, as ``summary.json``). Returns the
    report with ``slowdown_pct`` (file-I/O time over the ideal) and ``hit_pct``
    (prediction hits over the calls that needed one) added."""
    paths = _paths(traces)
    params = {"predictor": predictor, **params}
    if cache_share is not None:
        if "blocks_per_rank" in params:
            raise ValueError("cache_share and blocks_per_rank both size the cache: give one")
        params["blocks_per_rank"] = blocks_per_rank(paths, cache_share, int(params.get("ranks", 4)),
                                                    int(params.get("block_bytes", 4096)))
    if storage is None:
        r = json.loads(_core.delay_hiding_run(paths, _dump_toml(params)))
    else:
        # Errors name what they are about: the config by `origin`, the run by "storage:".
        text, origin, base = storage_config(storage)
        r = json.loads(_core.delay_hiding_storage(paths, _dump_toml(params), text, str(base), origin))
    predicted = r["prediction_hit"] + r["prediction_miss"] + r["prediction_wrong"]
    r["predictor"] = predictor
    r["blocks_per_rank"] = params.get("blocks_per_rank", 0)
    r["slowdown_pct"] = 100 * (r["normalized_time"] - 1)
    r["hit_pct"] = 100 * r["prediction_hit"] / predicted if predicted else 100.0
    return r


def storage_config(storage) -> tuple[str, str, Path]:
    """The storage stack of a delay-hiding run as (TOML text, its name for errors, base
    directory): a dict, TOML text or a ``.toml`` path is a run config; any other string
    a catalogue model, served alone as device ``storage``."""
    if isinstance(storage, (dict, Path)) or (isinstance(storage, str) and ("\n" in storage
                                                                       or storage.endswith(".toml"))):
        return config_source(storage)
    if not isinstance(storage, str) or not storage:
        raise ValueError(f"storage: expected a catalogue model, a run config or its path, got {storage!r}")
    text = _dump_toml({"device": [{"name": "storage", "model": storage}]})
    return text, f"storage model `{storage}`", Path(".")


def _paths(traces) -> list[str]:
    paths = [str(t) for t in ([traces] if isinstance(traces, (str, Path)) else traces)]
    if not paths:
        raise ValueError("delay-hiding: no trace given")
    return paths


def blocks_per_rank(traces, cache_share: float, ranks: int = 4, block_bytes: int = 4096) -> int:
    """Buffers per rank for a cache holding ``cache_share`` of the traces' footprint (their
    distinct ``block_bytes`` blocks) over ``ranks`` ranks, at least one."""
    import math

    if not 0 < cache_share <= 1e6:
        raise ValueError(f"cache_share: expected a positive share of the footprint, got {cache_share}")
    footprint = _core.delay_hiding_footprint(_paths(traces), block_bytes)
    return max(1, math.ceil(footprint * cache_share / ranks))
