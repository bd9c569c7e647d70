"""Traces from Python: read any supported format into a pandas DataFrame, summarize it.

Formats: columnar (wattio's Parquet trace), msr, fiu, blkparse, spc, alibaba, tencent,
disksim, disksim-validate, fio, mqsim. ``format=None`` detects the format from the extension
and the first line (never mqsim, whose lines are also DiskSim ascii lines: give it). Every reader normalizes to nanoseconds and bytes and reports what it assumed;
``read`` puts that report in ``df.attrs["assumptions"]``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from wattio import _core

COLUMNS = [
    "arrival_ns",
    "op",
    "offset",
    "len",
    "dev",
    "stream",
    "file",
    "call_site",
    "measured_ns",
]
OPS = {0: "read", 1: "write", 2: "flush", 3: "discard"}


def formats() -> tuple[list[str], list[str]]:
    """(formats that can be read, formats that can be written)."""
    r, w = _core.trace_formats()
    return list(r), list(w)


def _is_columnar(path: Path, format: str | None) -> bool:
    if format is not None:
        return format.lower() in ("columnar", "parquet", "wattio")
    if path.suffix.lower() in (".parquet", ".wattio"):
        return True
    with open(path, "rb") as f:
        return f.read(4) == b"PAR1"


def read(
    path: str | os.PathLike,
    format: str | None = None,
    *,
    lenient: bool = False,
    device: str | None = None,
    action: str | None = None,
):
    """The trace at ``path`` as a DataFrame with the columnar trace's columns.

    ``op`` is the request model's code (0 read, 1 write, 2 flush, 3 discard); ``OPS`` maps it
    to names. Non-columnar traces are converted through a temporary columnar file, so the
    result is identical to ``wattio trace convert`` followed by a read.
    """
    import pyarrow.parquet as pq

    p = Path(path)
    if _is_columnar(p, format) and device is None:
        table = pq.read_table(p)
        meta = table.schema.metadata or {}
        assumptions = [
            f"provenance: {k.decode()} = {v.decode()}"
            for k, v in meta.items()
            if not k.startswith(b"ARROW:")
        ]
    else:
        with tempfile.TemporaryDirectory(prefix="wattio-trace-") as d:
            out = Path(d) / "trace.parquet"
            _, assumptions = _core.trace_convert(
                str(p), str(out), format, "columnar", lenient, device, action
            )
            table = pq.read_table(out)
    df = table.to_pandas()
    df.attrs["assumptions"] = list(assumptions)
    return df


def stats(
    path: str | os.PathLike,
    format: str | None = None,
    *,
    lenient: bool = False,
    device: str | None = None,
    action: str | None = None,
) -> dict:
    """Requests, read fraction, size histogram, inter-arrival and idle-gap distributions,
    footprint, sequential fraction and a per-device breakdown (see docs/formats.md)."""
    return json.loads(_core.trace_stats(str(path), format, lenient, device, action, False))


def convert(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    from_format: str | None = None,
    to_format: str | None = None,
    *,
    lenient: bool = False,
    device: str | None = None,
    action: str | None = None,
) -> tuple[int, list[str]]:
    """Writes ``src`` as ``dst`` (columnar, disksim or fio); returns (requests, assumptions)."""
    n, a = _core.trace_convert(
        str(src), str(dst), from_format, to_format, lenient, device, action
    )
    return n, list(a)


def slice(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    from_format: str | None = None,
    to_format: str | None = None,
    start_s: float | None = None,
    end_s: float | None = None,
    dev: int | None = None,
    speedup: float = 1.0,
    lenient: bool = False,
    device: str | None = None,
    action: str | None = None,
) -> tuple[int, list[str]]:
    """Writes the requests of ``src`` arriving in [start_s, end_s), optionally of one device
    id, with inter-arrival times divided by ``speedup``; returns (requests, assumptions)."""
    n, a = _core.trace_slice(
        str(src),
        str(dst),
        from_format,
        to_format,
        start_s,
        end_s,
        dev,
        speedup,
        lenient,
        device,
        action,
    )
    return n, list(a)
