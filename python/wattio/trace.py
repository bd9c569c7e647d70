"""Traces from Python: read any supported format into a pandas DataFrame, summarize it.

Formats: columnar (wattio's Parquet trace), msr, fiu, blktrace (the binary per-CPU files,
merged), blkparse, biosnoop, spc, alibaba, tencent, systor, disksim, disksim-validate, fio, mqsim,
srt (HP Labs' traces: hplajw, cello, snake).
``format=None`` detects the format from the extension, a binary magic and the first line
(never mqsim, whose lines are also DiskSim ascii lines: give it). gzip and zstd files (the
MSR Cambridge ``.csv.gz``) are read through their decompressor, and a tar archive of one
trace file (a Tencent CBS ``.tgz``) as that file. Every
reader normalizes to nanoseconds and bytes and reports what it assumed; ``read`` puts that
report in ``df.attrs["assumptions"]``.

A DataFrame with these columns (``read``'s, or built by hand) is itself a trace:
``wattio.run(config, trace=df)`` replays it (:func:`write_frame` is how).
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
#: ``op`` names in the order of the request model's codes (0 read, 1 write, …).
OPS = ["read", "write", "flush", "discard"]
#: Columns a DataFrame trace must have; the others default (dev and stream 0, ids null).
REQUIRED = ["arrival_ns", "op", "offset", "len"]
#: The columnar trace's format version (crates/formats/src/columnar.rs, VERSION_KEY).
_VERSION = {b"wattio.trace.version": b"1"}


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
    sort: bool = False,
    sort_window: int | None = None,
):
    """The trace at ``path`` as a DataFrame with the columnar trace's columns.

    ``arrival_ns``, ``offset``, ``len`` and ``measured_ns`` are int64 (nanoseconds, bytes; a
    missing ``measured_ns`` is ``<NA>``), ``op`` a categorical of :data:`OPS`. Non-columnar
    traces are converted through a temporary columnar file, so the result is identical to
    ``wattio trace convert`` followed by a read.
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
                str(p), str(out), format, "columnar", lenient=lenient, device=device, action=action,
                sort=sort,
                sort_window=sort_window,
            )
            table = pq.read_table(out)
    df = _pandas_types(table.to_pandas())
    df.attrs["assumptions"] = list(assumptions)
    return df


def _pandas_types(df):
    """The columnar trace's unsigned columns as pandas works with them: quantities as int64
    (differences of uint64 wrap around), ``op`` as named categories."""
    import pandas as pd

    for c in ("arrival_ns", "offset", "len"):
        df[c] = df[c].astype("int64")
    df["measured_ns"] = df["measured_ns"].astype("Int64")
    df["op"] = pd.Categorical.from_codes(df["op"].astype("int64"), categories=OPS)
    return df


def write_frame(df, path: str | os.PathLike) -> int:
    """Write a DataFrame as a columnar trace file; returns the number of requests.

    Needs ``arrival_ns`` (integers, or timedeltas), ``op`` (names in :data:`OPS`, any case,
    or their codes), ``offset`` and ``len`` (bytes); takes ``dev``, ``stream``, ``file``,
    ``call_site`` and ``measured_ns`` if present. Anything else is ignored. A missing column
    or a value out of its range is a ValueError naming the column.
    """
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"trace: expected a path or a pandas DataFrame, got {type(df).__name__}")
    types = _arrow_types()
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ValueError(
            f"trace DataFrame: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(c) for c in missing)} (needs {', '.join(REQUIRED)}; optional: dev, "
            f"stream, file, call_site, measured_ns; has: {', '.join(map(str, df.columns)) or 'none'})"
        )

    def ints(name, hi, nullable=False):
        col = df[name]
        if pd.api.types.is_timedelta64_dtype(col):
            col = col.dt.total_seconds() * 1e9 if col.isna().any() else col.astype("int64")
        if col.isna().any() and not nullable:
            raise ValueError(f"trace DataFrame: column {name!r} has missing values (row {int(col.isna().idxmax())})")
        values = col.dropna()
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            raise ValueError(f"trace DataFrame: column {name!r} is {col.dtype}, expected integers")
        if len(values) and (values.min() < 0 or values.max() > hi or (values != np.floor(values)).any()):
            bad = values[(values < 0) | (values > hi) | (values != np.floor(values))].index[0]
            raise ValueError(
                f"trace DataFrame: column {name!r} row {bad}: {values[bad].item()!r} is not an integer in [0, {hi}]"
            )
        if nullable:
            return pa.array([None if pd.isna(v) else int(v) for v in col], type=pa.uint64())
        return pa.array(values.to_numpy().astype(np.uint64)).cast(types[name])

    op = df["op"]
    if isinstance(op.dtype, pd.CategoricalDtype) or op.dtype == object or pd.api.types.is_string_dtype(op):
        names = op.astype(str).str.lower()
        codes = names.map({n: i for i, n in enumerate(OPS)})
        if codes.isna().any():
            bad = codes.isna().idxmax()
            raise ValueError(f"trace DataFrame: column 'op' row {bad}: {op[bad]!r} is not one of {', '.join(OPS)}")
        df = df.assign(op=codes.astype("int64"))
    n = len(df)
    cols = {
        "arrival_ns": ints("arrival_ns", 2**63 - 1),
        "op": ints("op", len(OPS) - 1),
        "offset": ints("offset", 2**63 - 1),
        "len": ints("len", 2**32 - 1),
        "dev": ints("dev", 2**16 - 1) if "dev" in df else pa.array(np.zeros(n, np.uint16)),
        "stream": ints("stream", 2**32 - 1) if "stream" in df else pa.array(np.zeros(n, np.uint32)),
    }
    for name in ("file", "call_site", "measured_ns"):
        cols[name] = ints(name, 2**64 - 1, nullable=True) if name in df else pa.nulls(n, pa.uint64())
    schema = pa.schema([pa.field(c, types[c], nullable=c in ("file", "call_site", "measured_ns")) for c in COLUMNS],
                       metadata=_VERSION)
    pq.write_table(pa.table(cols, schema=schema), path)
    return n


def _arrow_types():
    """The columnar trace's Arrow types (crates/formats/src/columnar.rs, `schema`)."""
    import pyarrow as pa

    return {"arrival_ns": pa.uint64(), "op": pa.uint8(), "offset": pa.uint64(), "len": pa.uint32(),
            "dev": pa.uint16(), "stream": pa.uint32(), "file": pa.uint64(), "call_site": pa.uint64(),
            "measured_ns": pa.uint64()}



def stats(
    path: str | os.PathLike,
    format: str | None = None,
    *,
    lenient: bool = False,
    device: str | None = None,
    action: str | None = None,
    sort: bool = False,
    sort_window: int | None = None,
) -> dict:
    """Requests, read fraction, size histogram, inter-arrival and idle-gap distributions,
    footprint, sequential fraction and a per-device breakdown (see docs/formats.md)."""
    return json.loads(
        _core.trace_stats(
            str(path), format, lenient=lenient, device=device, action=action, sort=sort,
            sort_window=sort_window,
        )
    )


def convert(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    from_format: str | None = None,
    to_format: str | None = None,
    *,
    lenient: bool = False,
    device: str | None = None,
    action: str | None = None,
    sort: bool = False,
    sort_window: int | None = None,
) -> tuple[int, list[str]]:
    """Writes ``src`` as ``dst`` (columnar, disksim or fio); returns (requests, assumptions)."""
    n, a = _core.trace_convert(
        str(src), str(dst), from_format, to_format, lenient=lenient, device=device, action=action,
        sort=sort,
        sort_window=sort_window,
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
    sort: bool = False,
    sort_window: int | None = None,
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
        lenient=lenient,
        device=device,
        action=action,
        sort=sort,
        sort_window=sort_window,
    )
    return n, list(a)
