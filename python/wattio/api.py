"""The Python API: run configs, read results as pandas DataFrames."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from wattio import _core
from wattio.outdir import fresh_output, run_id
from wattio.progress import RunProgress, enabled


def _load_class(spec: str, base: Path):
    """`module:Class` or `path/to/file.py:Class` (relative to the config's directory)."""
    if ":" not in spec:
        raise ValueError(f"function class {spec!r}: expected 'module:Class' or 'file.py:Class'")
    mod_name, cls_name = spec.rsplit(":", 1)
    if mod_name.endswith(".py"):
        path = (base / mod_name).resolve()
        if not path.exists():
            raise ValueError(f"function class {spec!r}: no file {path}")
        mspec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(mspec)
        sys.modules[path.stem] = module
        try:
            mspec.loader.exec_module(module)
        except Exception as e:  # the user's file: any error in it is a config error here
            raise ValueError(f"function class {spec!r}: {path} failed to load: {e!r}") from e
    else:
        if str(base) not in sys.path:
            sys.path.insert(0, str(base))
        try:
            module = importlib.import_module(mod_name)
        except ImportError as e:
            raise ValueError(f"function class {spec!r}: cannot import {mod_name!r}: {e}") from e
    try:
        return getattr(module, cls_name)
    except AttributeError:
        raise ValueError(f"function class {spec!r}: module has no {cls_name!r}") from None


def python_functions(cfg: dict, base: Path, given: dict | None = None) -> dict:
    """The parsed config's ``kind = "python"`` functions, instantiated from their ``class`` and
    ``params`` (stack position -> object), except the positions ``given`` already fills.
    Every failure (no module, no class, a bad file, wrong parameters) is a ValueError naming
    the function."""
    funcs = dict(given or {})
    for i, f in enumerate(cfg.get("function", [])):
        if f.get("kind") == "python" and i not in funcs:
            cls = _load_class(f["class"], base)
            try:
                funcs[i] = cls(**f.get("params", {}))
            except TypeError as e:
                raise ValueError(f"function[{i}].params: {f['class']}: {e}") from e
    return funcs


#: Set (to anything but ``0``) in the environment, every run checks its data as with
#: ``[run] check_data = true``: how ``wattio reproduce --check-data`` reaches the runs of its
#: worker processes (to a Dask scheduler's workers it travels with each run:
#: :func:`wattio.reproduce.workers.map_runs`).
CHECK_DATA_ENV = "WATTIO_CHECK_DATA"


def config_source(config, base_dir=None) -> tuple[str, str, Path]:
    """A config given as a path to a TOML file, TOML text or a dict, as (TOML text, where it
    came from for error messages, the directory its relative paths resolve against)."""
    if isinstance(config, dict):
        return _dump_toml(config), "config", Path(base_dir or ".")
    if isinstance(config, Path) or (isinstance(config, str) and "\n" not in config and config.endswith(".toml")):
        path = Path(config)
        return path.read_text(), str(path), Path(base_dir or path.parent)
    return str(config), "config", Path(base_dir or ".")


#: ``status`` values of ``requests.parquet`` (crates/engine/src/tables.rs, STATUS_NAMES).
STATUSES = ["ok", "io-error", "invalid", "no-space", "not-supported"]


@dataclass
class Run:
    """A finished run: its summary and, if it wrote them, its tables."""

    summary: dict
    out_dir: Path | None = None
    config_text: str = ""
    _cache: dict = field(default_factory=dict, repr=False)
    #: The id in ``out_dir``'s marker when this run wrote it (see ``wattio.outdir``).
    run_id: str | None = None

    def _table(self, name: str):
        import pandas as pd

        if self.out_dir is None:
            raise ValueError("this run wrote no tables (give out=DIR)")
        if self.run_id is not None and run_id(self.out_dir) != self.run_id:
            raise ValueError(f"{self.out_dir}: now holds another run's outputs, not this run's")
        path = self.out_dir / f"{name}.parquet"
        if not path.exists():
            raise ValueError(f"{path}: not written (see [output] in the config)")
        df = pd.read_parquet(path)
        # Every device, state, op and status can be counted, even those without rows.
        if "device" in df:
            df["device"] = df["device"].cat.set_categories(list(self.summary["devices"]))
        return df

    def requests(self):
        """One row per host request, in completion order: ``arrival_ns``, ``finish_ns``,
        ``latency_ns`` and its split ``queue_ns`` + ``power_wait_ns`` + ``service_ns``
        (int64 nanoseconds), ``op`` and ``status`` (categoricals), ``device`` (categorical
        name) and ``dev`` (its index), ``offset`` and ``len`` (bytes)."""
        from wattio.trace import OPS

        df = self._table("requests")
        df["op"] = df["op"].cat.set_categories(OPS)
        df["status"] = df["status"].cat.set_categories(STATUSES)
        return df

    def timeline(self):
        """Power-mode intervals per device: ``device``, ``state`` (categoricals),
        ``start_ns``, ``end_ns`` (int64 nanoseconds)."""
        return self._table("timeline")

    def energy(self):
        """The closed energy ledger: ``device`` × ``state`` with ``is_transition``,
        ``watts``, ``residency_ns``, ``entries`` and ``energy_j``."""
        return self._table("energy")

    def devices(self):
        """Per-device summary as a DataFrame."""
        import pandas as pd

        rows = []
        for name, d in self.summary["devices"].items():
            rows.append(
                {
                    "device": name,
                    "model": d["model"],
                    "energy_j": d["energy_j"],
                    "mean_power_w": d["mean_power_w"],
                    "spin_ups": d["spin_ups"],
                    "utilization": d["utilization"],
                }
            )
        return pd.DataFrame(rows)


def run(
    config,
    *,
    trace=None,
    trace_format: str | None = None,
    out: str | Path | None = None,
    functions: dict | None = None,
    progress: bool | None = None,
    base_dir: str | Path | None = None,
    report: bool | None = None,
    **trace_options,
) -> Run:
    """Run a config: a path to a TOML file, TOML text, or a dict.

    ``trace`` replays a trace instead of the config's workload: a path (any format wattio
    reads; ``trace_format`` names it when detection cannot) or a pandas DataFrame with the
    columns of :func:`wattio.trace.read` (at least ``arrival_ns``, ``op``, ``offset``,
    ``len``). ``trace_options`` are how to read the trace, as on the command line:
    ``lenient``, ``device``, ``action``, ``columns``, ``delimiter``, ``header``.
    ``functions`` maps stack positions of ``kind = "python"`` functions to objects; by
    default they are built from the config's ``class`` and ``params``. ``out`` is replaced
    as a whole (``wattio.outdir``). ``progress`` shows bars (default: on a terminal or in a
    notebook).
    """
    text, origin, base = config_source(config, base_dir)
    _core.check_config(text, origin)
    cfg = tomllib.loads(text)
    if os.environ.get(CHECK_DATA_ENV, "") not in ("", "0") and not cfg.get("run", {}).get("check_data"):
        cfg.setdefault("run", {})["check_data"] = True
        text = _dump_toml(cfg)
    funcs = python_functions(cfg, base, given=functions)
    out_dir = Path(out) if out is not None else None
    want_report = cfg.get("output", {}).get("report", True) if report is None else report

    def simulate(into: Path | None) -> str:
        with _trace_path(trace, trace_format) as (trace_path, fmt):
            bar = None
            if enabled(progress):
                run_sec = cfg.get("run", {})
                horizon = run_sec.get("until_s") or cfg.get("workload", {}).get("duration_s")
                bar = RunProgress(
                    label=run_sec.get("name", ""),
                    total_sim_ns=int(horizon * 1e9) if horizon and trace is None else None,
                )
            try:
                text_summary = _core.run_config(
                    text,
                    origin=origin,
                    base_dir=str(base),
                    trace=trace_path,
                    trace_format=fmt,
                    out_dir=str(into) if into is not None else None,
                    progress=bar,
                    functions=funcs,
                    **trace_options,
                )
            finally:
                if bar:
                    bar.close()
        if into is not None and want_report:
            from wattio.report import write_report

            write_report(into, progress=progress)
        return text_summary

    if out_dir is None:
        return Run(summary=json.loads(simulate(None)), config_text=text)
    with fresh_output(out_dir) as tmp:
        text_summary = simulate(tmp)
    return Run(summary=json.loads(text_summary), out_dir=out_dir, config_text=text, run_id=run_id(out_dir))


def check(config, *, trace=None, trace_format=None, functions=None, base_dir=None, **trace_options) -> dict:
    """Everything ``run`` validates — config, catalogue, devices, functions (Python classes
    imported and constructed), the whole trace read and judged — without simulating; raises
    what ``run`` would raise. Returns what was checked (devices, functions, trace requests
    and span, the reader's assumptions and, with ``lenient``, warnings). ``trace`` may be a
    DataFrame, as for ``run``."""
    text, origin, base = config_source(config, base_dir)
    _core.check_config(text, origin)
    funcs = python_functions(tomllib.loads(text), base, given=functions)
    with _trace_path(trace, trace_format) as (trace_path, fmt):
        return json.loads(
            _core.check_run(
                text,
                origin=origin,
                base_dir=str(base),
                trace=trace_path,
                trace_format=fmt,
                functions=funcs,
                **trace_options,
            )
        )


@contextlib.contextmanager
def _trace_path(trace, trace_format):
    """``trace`` as (path, format) for the core: a DataFrame is written to a temporary
    columnar file that lives while the run reads it."""
    if trace is None or isinstance(trace, (str, os.PathLike)):
        yield (os.fspath(trace) if trace is not None else None), trace_format
        return
    from wattio.trace import write_frame

    with tempfile.TemporaryDirectory(prefix="wattio-frame-") as d:
        path = Path(d) / "trace.parquet"
        write_frame(trace, path)
        yield str(path), "columnar"


def load(out_dir: str | Path) -> Run:
    """A run previously written to ``out_dir``."""
    out_dir = Path(out_dir)
    return Run(
        summary=json.loads((out_dir / "summary.json").read_text()), out_dir=out_dir, run_id=run_id(out_dir)
    )


def _dump_toml(d: dict, prefix: str = "") -> str:
    """A minimal TOML writer for config dicts (tables, arrays of tables, scalars, lists)."""

    def scalar(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(scalar(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {scalar(x)}" for k, x in v.items()) + "}"
        raise ValueError(f"cannot write {v!r} as TOML")

    lines, tables = [], []
    for k, v in d.items():
        if isinstance(v, dict):
            tables.append((k, v, False))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables.append((k, v, True))
        else:
            lines.append(f"{k} = {scalar(v)}")
    out = "\n".join(lines) + ("\n" if lines else "")
    for k, v, is_array in tables:
        name = f"{prefix}{k}"
        if is_array:
            for item in v:
                out += f"\n[[{name}]]\n" + _dump_toml(item, name + ".")
        else:
            out += f"\n[{name}]\n" + _dump_toml(v, name + ".")
    return out
