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
    if isinstance(config, dict):
        config = _dump_toml(config)
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
