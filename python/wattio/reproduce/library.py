"""The workload library (`workloads/NAME/`): captured traces that experiments take by name.

The library lives at the repository's top level; ``WATTIO_WORKLOADS`` points elsewhere (a
directory holding ``NAME/`` folders). A workload's block trace is its columnar trace file.
"""

from __future__ import annotations

import os
from pathlib import Path

from wattio.reproduce.experiment import NotRunnable

#: The repository's `workloads/` (this file is python/wattio/reproduce/library.py).
REPO_LIBRARY = Path(__file__).resolve().parents[3] / "workloads"


def root() -> Path:
    env = os.environ.get("WATTIO_WORKLOADS")
    return Path(env) if env else REPO_LIBRARY


def block_trace(name: str) -> Path:
    """The columnar block trace of workload ``name``; NotRunnable (verdict not-run) when the
    library has no such workload or it has no block trace."""
    folder = root() / name
    if not folder.is_dir():
        raise NotRunnable(f"workload {name!r}: no {folder}/ (the workload library is not here)")
    traces = sorted(folder.glob("*.parquet"))
    block = [p for p in traces if p.stem in ("block", "trace")] or traces
    if not block:
        raise NotRunnable(f"workload {name!r}: {folder}/ holds no columnar (.parquet) trace")
    return block[0]
