"""A device model against a real device's measured response times (``wattio disk validate``):
the report, the per-request table and the response-time CDFs drawn side by side, as DiskSim
and Ruemmler & Wilkes compare a model with its drive (docs/validation.md)."""

from __future__ import annotations

import json
import os

import numpy as np

from wattio import _core

#: Points per drawn CDF: the quantiles at 0, 0.1 %, …, 100 % (a figure of any trace length
#: stays a few hundred kilobytes).
CDF_POINTS = 1001


def validate(
    model: str | os.PathLike,
    trace: str | os.PathLike,
    *,
    format: str | None = None,
    replay: str | None = None,
    fresh: bool = False,
    lenient: bool = False,
    device: str | None = None,
    action: str | None = None,
    columns: str | None = None,
    delimiter: str | None = None,
    header: bool | None = None,
    sort: bool = False,
    sort_window: int | None = None,
):
    """Replays ``trace`` (any trace with measured response times) on ``model`` (a DiskSim
    ``.parv``, a catalogue TOML file or an embedded catalogue name), closed- or open-loop
    (``replay``; default by the trace's queue depth). A model with mapping state (an SSD)
    starts with its whole capacity written, as the traced drive held data, unless ``fresh``.
    Returns the report (a dict: demerit,
    means, 90th percentiles, overall and per op) and a pandas DataFrame with one row per
    compared request in trace order: ``op`` (read or write), ``simulated_ms``,
    ``measured_ms``."""
    import pandas as pd

    report = json.loads(_core.disk_validate(
        str(model), str(trace), format=format, replay=replay, per_request=True, fresh=fresh,
        lenient=lenient, device=device, action=action, columns=columns, delimiter=delimiter,
        header=header, sort=sort, sort_window=sort_window,
    ))
    per = report.pop("per_request")
    table = pd.DataFrame({
        "op": pd.Categorical(per["op"], categories=["read", "write"]),
        "simulated_ms": np.asarray(per["simulated_ms"], dtype=float),
        "measured_ms": np.asarray(per["measured_ms"], dtype=float),
    })
    return report, table


def cdf_figure(report: dict, table) -> str:
    """The simulated and measured response-time CDFs as SVG: all requests, then the reads
    and the writes apart (those there are), each panel titled with its demerit. The x axis
    ends at the larger 99.9th percentile of the two (the tail beyond is in the table)."""
    from wattio.charts import Axis, Figure

    probs = np.linspace(0.0, 1.0, CDF_POINTS)
    parts = [("all requests", report, table)]
    for op, key in (("read", "reads"), ("write", "writes")):
        if report.get(key):
            parts.append((f"{key}", report[key], table[table["op"] == op]))
    fig = Figure(760, title=f"{report['drive']}: response-time CDFs ({report['replay']}-loop)")
    for i, (name, rep, rows) in enumerate(parts):
        sim = np.quantile(rows["simulated_ms"].to_numpy(), probs)
        meas = np.quantile(rows["measured_ms"].to_numpy(), probs)
        hi = max(np.quantile(rows["simulated_ms"], 0.999), np.quantile(rows["measured_ms"], 0.999))
        p = fig.panel(Axis(0.0, float(hi) or 1.0, label="response time (ms)"),
                      Axis(0.0, 1.0, label="fraction of requests"), 190, gap=62 if i else 26)
        p.frame(title=f"{name}: {rep['requests']} requests",
                title_right=f"demerit {rep['demerit_ms']:.3f} ms; mean {rep['mean_sim_ms']:.3f} "
                f"simulated, {rep['mean_measured_ms']:.3f} measured")
        p.line(meas, probs, "#333333", dash="5 3", title="measured")
        p.line(sim, probs, "#0072B2", title="simulated")
    fig.legend([("measured", "#333333"), ("simulated", "#0072B2")], kind="line")
    fig.space(40)  # the last panel's x labels
    return fig.svg()
