"""HTML pages: ``report.html`` for one run, ``comparison.html`` for runs that belong together
(the demo's policies, a sweep's points).

Both are self-contained files with inline SVG figures drawn by :mod:`wattio.charts`. The
figure functions take data (DataFrames, summaries, rows), not directories, so other pages
can reuse them: :func:`timeline_figure`, :func:`energy_figure`, :func:`latency_figure`,
:func:`blocks_figure`, :func:`wear_figure`, :func:`wear_table` for a run;
:func:`comparison_row`, :func:`tradeoff_figure`, :func:`wear_comparison_figure` and
:func:`comparison_page` / :func:`write_comparison` for a set of runs.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

import numpy as np

from wattio.charts import (
    CYCLE,
    OP_COLORS,
    Axis,
    Figure,
    format_duration,
    format_number,
    natural_key,
    pareto_front,
    state_color,
    state_fractions,
)
from wattio.progress import steps

#: A device's timeline is drawn interval by interval up to this many intervals; beyond it,
#: as the fraction of each time bin spent in each state (a day of 5 s timeouts is ~10⁴
#: intervals: drawn one by one they merge into a solid band).
RAW_INTERVALS = 600
#: Bins across the timeline when aggregated (a day: 10-minute bins; finer ones are noise at
#: this width).
TIMELINE_BINS = 180
#: Stacking order of states in an aggregated timeline, bottom up: powered down first, so
#: the band of sleep is a stable floor and spin-ups sit on top of it.
STATE_ORDER = ["off", "sleep", "standby", "spin_down", "spin_up", "idle", "seek", "active"]
#: Points drawn per device in the block-access plot (evenly spaced in completion order).
BLOCK_POINTS = 3000
#: Points kept per latency CDF line.
CDF_POINTS = 600
#: Seconds in a year, for projecting wear to a rate.
YEAR_S = 365 * 86400
#: A drive rated for N start/stop cycles lasts five years (a common warranty) at N/5 a year.
SERVICE_YEARS = 5

#: Bin widths a timeline may use (seconds): round numbers a reader can say out loud.
_BIN_WIDTHS = [1e-3, 1e-2, 0.1, 1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400]


def _np(col) -> np.ndarray:
    """A numeric Arrow column without nulls as a numpy array, read from its buffer: pyarrow's
    own ``to_numpy`` imports pandas, a second or more of a one-run report's time."""
    arr = col.combine_chunks() if hasattr(col, "combine_chunks") else col
    if arr.null_count:
        raise ValueError(f"unexpected nulls in a {arr.type} column")
    dtype = np.dtype({"double": "float64", "float": "float32"}.get(str(arr.type), str(arr.type)))
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)


def _dictionary(col) -> tuple[np.ndarray, list[str]]:
    """A dictionary-encoded (or plain string) Arrow column as (codes, names)."""
    import pyarrow as pa

    arr = col.combine_chunks() if hasattr(col, "combine_chunks") else col
    if not pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_encode()
    return _np(arr.indices).astype(np.int64), [str(v) for v in arr.dictionary]


def _device_order(codes: np.ndarray, names: list[str]) -> list[int]:
    """The codes present, by device name (natural order: disk2 before disk10)."""
    return sorted(np.unique(codes).tolist(), key=lambda c: natural_key(names[c]))


def _stack_rank(state: str):
    return (STATE_ORDER.index(state), "") if state in STATE_ORDER else (len(STATE_ORDER), state)


def _bin_width(span_s: float, bins: int) -> float:
    raw = span_s / bins
    return next((w for w in _BIN_WIDTHS if w >= raw), _BIN_WIDTHS[-1] * math.ceil(raw / _BIN_WIDTHS[-1]))


def timeline_figure(timeline, duration_s: float) -> str | None:
    """Power state over time, one panel per device. ``timeline``: the ``timeline.parquet``
    table (pyarrow). A device with few intervals is drawn as they are; one with many as the
    fraction of each bin spent in each state, so a day stays readable."""
    if timeline is None or timeline.num_rows == 0:
        return None
    dev_codes, dev_names = _dictionary(timeline.column("device"))
    st_codes, st_names = _dictionary(timeline.column("state"))
    start = _np(timeline.column("start_ns")) / 1e9
    end = _np(timeline.column("end_ns")) / 1e9
    span = max(float(end.max()), duration_s)
    fig = Figure()
    xaxis = Axis(0, span, time=True)
    order = _device_order(dev_codes, dev_names)
    width = _bin_width(span, TIMELINE_BINS)
    edges = np.arange(0, span + width, width)
    edges[-1] = min(edges[-1], span) if edges[-1] > span and len(edges) > 2 else edges[-1]
    colors = {name: state_color(name, i) for i, name in enumerate(st_names)}
    seen = set()
    for k, code in enumerate(order):
        m = dev_codes == code
        s, e, st = start[m], end[m], np.asarray(st_names, dtype=object)[st_codes[m]]
        last = k == len(order) - 1
        p = fig.panel(xaxis, Axis(0, 1), 48, gap=22)
        if m.sum() <= RAW_INTERVALS:
            for name in dict.fromkeys(st.tolist()):
                sel = st == name
                p.rects(s[sel], e[sel], 0, 1, colors[name], title=name)
            how = f"{int(m.sum())} intervals, as they are"
        else:
            fr = state_fractions(s, e, st, edges)
            lower = np.zeros(len(edges) - 1)
            for name in sorted(fr, key=_stack_rank):
                upper = lower + fr[name]
                if fr[name].any():
                    p.band(edges, lower, upper, colors[name], title=name)
                lower = upper
            how = f"{int(m.sum()):,} intervals: share of each {format_duration(width)} bin"
        p.frame(xticks=last, ylabels=[], grid=False, title=dev_names[code], title_right=how)
        seen.update(st.tolist())
    fig.legend([(n, colors[n]) for n in sorted(seen, key=_stack_rank, reverse=True)])
    fig.space(36)
    return fig.svg()


def energy_figure(energy) -> str | None:
    """Energy by device and state (``energy.parquet`` as a pyarrow table): stacked bars."""
    if energy is None or energy.num_rows == 0:
        return None
    dev_codes, dev_names = _dictionary(energy.column("device"))
    st_codes, st_names = _dictionary(energy.column("state"))
    joules = _np(energy.column("energy_j"))
    order = _device_order(dev_codes, dev_names)
    totals = np.array([joules[dev_codes == c].sum() for c in order])
    kilo = totals.max() >= 1e4
    scale = 1e3 if kilo else 1.0
    fig = Figure()
    bar = 26
    p = fig.panel(Axis(0, totals.max() / scale, label="energy (kJ)" if kilo else "energy (J)"),
                  Axis(len(order), 0), bar * len(order) + 8, gap=8)
    colors = {name: state_color(name, i) for i, name in enumerate(st_names)}
    used = []
    for sc, name in enumerate(st_names):
        left = np.zeros(len(order))
        for i, c in enumerate(order):
            left[i] = joules[(dev_codes == c) & (st_codes < sc)].sum() / scale
        vals = np.array([joules[(dev_codes == c) & (st_codes == sc)].sum() for c in order]) / scale
        if vals.sum() > 0:
            ys = np.arange(len(order))
            p.rects(left, left + vals, ys + 0.15, ys + 0.85, colors[name], title=name)
            used.append((name, colors[name]))
    p.frame(ylabels=[(float(p.py(i + 0.5)), dev_names[c]) for i, c in enumerate(order)])
    fig.legend(used)
    fig.space(40)
    return fig.svg()


def latency_figure(requests) -> str | None:
    """Latency CDF per device (and of all requests) beside each device's mean latency split
    into queueing, power wait (spin-up) and service. ``requests``: ``requests.parquet``."""
    if requests is None or requests.num_rows == 0:
        return None
    lat = _np(requests.column("latency_ns")) / 1e6
    dev_codes, dev_names = _dictionary(requests.column("device"))
    order = _device_order(dev_codes, dev_names)
    fig = Figure()
    cdf_w = fig.plot_width * 0.62
    lo = max(float(lat[lat > 0].min()) if (lat > 0).any() else 1e-3, 1e-3)
    xaxis = Axis(lo, float(lat.max()), log=True, label="latency (ms)")
    p = fig.panel(xaxis, Axis(0, 1, label="fraction of requests"), 230, gap=24, width=cdf_w,
                  advance=False)

    def cdf(v, color, label, width=1.5):
        v = np.sort(v)
        n = len(v)
        idx = np.unique(np.linspace(0, n - 1, min(n, CDF_POINTS)).round().astype(int))
        p.line(np.maximum(v[idx], lo), (idx + 1) / n, color, width=width, step=True, title=label)
        fig.legend([(label, color)], "line")

    if len(order) > 1:
        for i, c in enumerate(order[: len(CYCLE) - 1]):
            cdf(lat[dev_codes == c], CYCLE[i], dev_names[c])
    cdf(lat, "#000000", "all requests" if len(order) > 1 else dev_names[order[0]], width=2)
    p99 = float(np.quantile(lat, 0.99))
    p.vline(p99, label=f"p99 {format_number(p99)} ms")
    p.frame(title="CDF (log scale)")

    parts = {k: _np(requests.column(k)) / 1e6 for k in ("queue_ns", "power_wait_ns", "service_ns")}
    means = {k: np.array([v[dev_codes == c].mean() for c in order]) for k, v in parts.items()}
    total = sum(means.values())
    gap = 40 + 7 * max(len(dev_names[c]) for c in order)
    bx = fig.left + cdf_w + gap
    q = fig.panel(Axis(0, float(total.max()), label="mean latency (ms)"), Axis(len(order), 0),
                  min(230, 26 * len(order) + 8), gap=24, x0=bx, width=fig.plot_width - cdf_w - gap,
                  advance=False)
    left = np.zeros(len(order))
    ys = np.arange(len(order))
    for key, label, color in [("queue_ns", "queueing", "#E69F00"), ("power_wait_ns", "power wait", "#CC79A7"),
                              ("service_ns", "service", "#56B4E9")]:
        q.rects(left, left + means[key], ys + 0.15, ys + 0.85, color, title=label)
        left = left + means[key]
        fig.legend([(label, color)])
    q.frame(ylabels=[(float(q.py(i + 0.5)), dev_names[c]) for i, c in enumerate(order)], title="mean split")
    fig.space(24 + 230 + 40)
    return fig.svg()


def blocks_figure(requests, duration_s: float = 0.0) -> str | None:
    """Block accesses over time, one panel per device (as IOLab's Fig. 2): offset against
    arrival, reads and writes in two colours."""
    if requests is None or requests.num_rows == 0:
        return None
    arrival = _np(requests.column("arrival_ns")) / 1e9
    offset = _np(requests.column("offset")) / 1e9
    dev_codes, dev_names = _dictionary(requests.column("device"))
    op_codes, op_names = _dictionary(requests.column("op"))
    order = _device_order(dev_codes, dev_names)
    fig = Figure()
    xaxis = Axis(0, max(float(arrival.max()), duration_s), time=True)
    used = set()
    for k, c in enumerate(order):
        m = np.flatnonzero(dev_codes == c)
        if len(m) > BLOCK_POINTS:
            m = m[np.linspace(0, len(m) - 1, BLOCK_POINTS).round().astype(int)]
        p = fig.panel(xaxis, Axis(0, max(float(offset[m].max()), 1e-9), label="offset (GB)"), 90, gap=22)
        for oc, name in enumerate(op_names):
            sel = m[op_codes[m] == oc]
            if len(sel):
                p.dots(arrival[sel], offset[sel], OP_COLORS.get(name, "#444"))
                used.add(name)
        shown = f"{len(m):,} of {int((dev_codes == c).sum()):,} requests" if (dev_codes == c).sum() > len(m) else \
            f"{len(m):,} requests"
        p.frame(xticks=k == len(order) - 1, title=dev_names[c], title_right=shown)
    fig.legend([(n, OP_COLORS.get(n, "#444")) for n in op_names if n in used], "dot")
    fig.space(36)
    return fig.svg()


def wear_rows(summary: dict) -> list[dict]:
    """Per device: start/stop cycles against the rating, projected to a year, and the SSD
    model's wear counters, from ``summary.json``."""
    dur = summary["duration_s"]
    rows = []
    for name, d in summary["devices"].items():
        rated = d.get("rated_start_stop")
        per_year = d["spin_ups"] / dur * YEAR_S if dur > 0 else 0.0
        mc = d.get("model_counters", {})
        rows.append(
            {
                "device": name,
                "model": d["model"],
                "spin_ups": d["spin_ups"],
                "rated_start_stop": rated,
                "cycles_per_year": per_year,
                "rating_used_per_year": per_year / rated if rated else None,
                "years_to_rating": rated / per_year if rated and per_year > 0 else None,
                "write_amplification": mc.get("write_amplification"),
                "erases": mc.get("erases"),
                "gc_runs": mc.get("gc_runs"),
                "host_pages_written": mc.get("host_pages_written"),
                "nand_pages_written": mc.get("nand_pages_written"),
            }
        )
    return rows


def wear_figure(summary: dict) -> str | None:
    """Start/stop cycles as a share of each drive's rating used per year at this run's rate,
    against the share that lasts a five-year service life."""
    rows = [r for r in wear_rows(summary) if r["rated_start_stop"]]
    if not rows:
        return None
    used = np.array([r["rating_used_per_year"] * 100 for r in rows])
    budget = 100 / SERVICE_YEARS
    fig = Figure(title="Start/stop cycles per year at this run's rate, as % of the drive's rating")
    p = fig.panel(Axis(0, max(float(used.max()), budget) * 1.1, label="% of rated start/stop cycles per year"),
                  Axis(len(rows), 0), 26 * len(rows) + 8, gap=18)
    over = used > budget
    for i in range(len(rows)):
        p.rects(0, used[i], i + 0.2, i + 0.8, "#D55E00" if over[i] else "#009E73",
                title=f"{rows[i]['spin_ups']:,} cycles in the run")
    p.vline(budget, label=f"{SERVICE_YEARS}-year life")
    p.frame(ylabels=[(float(p.py(i + 0.5)), r["device"]) for i, r in enumerate(rows)])
    fig.legend([("within 5-year life", "#009E73"), ("wears out sooner", "#D55E00")])
    fig.space(40)
    return fig.svg()


def _num(v, fmt="{:,.0f}") -> str:
    return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt.format(v)


def wear_table(summary: dict) -> str:
    rows = wear_rows(summary)
    ssd = any(r["erases"] is not None for r in rows)
    head = ["device", "model", "start/stop cycles", "rated", "per year (projected)", "% of rating / year",
            "years to rating"]
    if ssd:
        head += ["write amplification", "erases", "GC runs", "host pages written", "NAND pages written"]
    body = []
    for r in rows:
        cells = [r["device"], r["model"], _num(r["spin_ups"]), _num(r["rated_start_stop"]),
                 _num(r["cycles_per_year"]), _num(r["rating_used_per_year"], "{:.1%}"),
                 _num(r["years_to_rating"], "{:,.1f}")]
        if ssd:
            cells += [_num(r["write_amplification"], "{:.3f}"), _num(r["erases"]), _num(r["gc_runs"]),
                      _num(r["host_pages_written"]), _num(r["nand_pages_written"])]
        body.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return _table(head, body)


def _table(head: list[str], body: list[str]) -> str:
    return ("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
            + "".join(body) + "</table>")


def _summary_table(s: dict) -> str:
    rows = [
        ("duration", f"{format_duration(s['duration_s'])} ({s['duration_s']:,.1f} s)"),
        ("requests", f"{s['requests']:,} ({s['errors']:,} errors)"),
        ("energy", f"{s['energy_j']:,.1f} J"),
        ("latency", (f"mean {s['mean_latency_ms']:.3f} ms · p50 {s['p50_latency_ms']:.3f} ms · "
                     f"p99 {s['p99_latency_ms']:.3f} ms · max {s['max_latency_ms']:.3f} ms")),
        ("mean power wait", f"{s['mean_power_wait_ms']:.3f} ms"),
    ]
    head = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    dev_rows = [
        f"<tr><td>{html.escape(n)}</td><td>{html.escape(d['model'])}</td><td>{d['energy_j']:,.1f}</td>"
        f"<td>{d['mean_power_w']:.3f}</td><td>{d['spin_ups']:,}</td><td>{d['utilization'] * 100:.2f}%</td></tr>"
        for n, d in s["devices"].items()
    ]
    return (f"<table>{head}</table><h2>Devices</h2>"
            + _table(["device", "model", "energy (J)", "mean power (W)", "spin-ups", "utilization"], dev_rows))


STYLE = """body{font-family:sans-serif;max-width:1000px;margin:1.5em auto;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
td{font-variant-numeric:tabular-nums}th{background:#f4f4f4}figure{margin:1.2em 0}
h2{margin-top:1.6em;border-bottom:1px solid #ddd}.note{color:#555;font-size:90%}
tr.front td{font-weight:bold}"""


def _page(title: str, body: str) -> str:
    return (f'<!doctype html>\n<html><head><meta charset="utf-8"><title>wattio — {html.escape(title)}</title>'
            f"<style>{STYLE}</style></head>\n<body>{body}</body></html>\n")


def _read(out: Path, name: str, columns: list[str] | None = None):
    import pyarrow.parquet as pq

    path = out / f"{name}.parquet"
    # ParquetFile, not read_table: the dataset machinery behind the latter costs more than
    # reading a demo run's tables.
    return pq.ParquetFile(path).read(columns=columns, use_threads=False) if path.exists() else None


def write_report(out: str | Path, progress: bool | None = False) -> Path:
    """Write ``report.html`` into a run's output directory from its files."""
    out = Path(out)
    s = json.loads((out / "summary.json").read_text())
    title = s.get("name") or out.name
    with steps(7, f"report {title}", progress, leave=False) as step:
        requests = _read(out, "requests", ["arrival_ns", "latency_ns", "queue_ns", "power_wait_ns", "service_ns",
                                           "op", "device", "offset"])
        timeline, energy = _read(out, "timeline"), _read(out, "energy")
        step()
        sections = [("Power state over time", timeline_figure(timeline, s["duration_s"]))]
        step()
        sections.append(("Energy", energy_figure(energy)))
        step()
        sections.append(("Latency", latency_figure(requests)))
        step()
        sections.append(("Block accesses over time", blocks_figure(requests, s["duration_s"])))
        step()
        wear = wear_figure(s)
        step()
        body = (f"<h1>wattio run: {html.escape(title)}</h1>{_summary_table(s)}"
                + "".join(f"<h2>{h}</h2><figure>{f}</figure>" for h, f in sections if f)
                + f"<h2>Wear</h2>{wear or ''}{wear_table(s)}"
                + '<p class="note">Projected rates assume the run\'s pattern repeats; ratings are the '
                  "catalogue's (docs/catalogue.md).</p>"
                + f"<h2>summary.json</h2><details><summary>raw</summary><pre>"
                  f"{html.escape(json.dumps(s, indent=2))}</pre></details>")
        path = out / "report.html"
        path.write_text(_page(title, body))
        step()
    return path


# --- comparison page ------------------------------------------------------------------------


def comparison_row(summary: dict, label: str, group: str = "", link: str | None = None) -> dict:
    """One run as a row of a comparison page: energy, latency, and its wear against the
    rating (the device worn fastest)."""
    wear = [w for w in wear_rows(summary) if w["rated_start_stop"]]
    worst = max(wear, key=lambda w: w["rating_used_per_year"], default=None)
    return {
        "label": label,
        "group": group,
        "link": link,
        "requests": summary["requests"],
        "duration_s": summary["duration_s"],
        "energy_j": summary["energy_j"],
        "mean_latency_ms": summary["mean_latency_ms"],
        "p99_latency_ms": summary["p99_latency_ms"],
        "spin_ups": sum(d["spin_ups"] for d in summary["devices"].values()),
        "rated_start_stop": worst["rated_start_stop"] if worst else None,
        "max_cycles_per_year": worst["cycles_per_year"] if worst else None,
        "rating_used_per_year": worst["rating_used_per_year"] if worst else None,
    }


def tradeoff_figure(rows: list[dict], latency: str = "mean_latency_ms", title: str = "") -> str:
    """Energy against latency, one point per row (``label``), the Pareto front (no other
    row has both less energy and less latency) filled and joined."""
    x = np.array([r[latency] for r in rows], dtype=float)
    e = np.array([r["energy_j"] for r in rows], dtype=float)
    kilo = e.max() >= 1e4
    y = e / (1e3 if kilo else 1)
    front = pareto_front(x, y)
    name = {"mean_latency_ms": "mean latency (ms)", "p99_latency_ms": "p99 latency (ms)"}.get(latency, latency)
    fig = Figure(width=480, legend_width=0, left=64, title=title)
    log = x.min() > 0 and x.max() / x.min() > 30
    p = fig.panel(Axis(x.min(), x.max(), log=log, pad=0 if log else 0.08, label=name),
                  Axis(y.min(), y.max(), pad=0.08, label="energy (kJ)" if kilo else "energy (J)"), 260, gap=14)
    order = np.flatnonzero(front)[np.argsort(x[front])]
    p.line(x[order], y[order], "#444", width=1.2, step=True, dash="5 3", title="Pareto front")
    label_all = len(rows) <= 14
    for i, r in enumerate(rows):
        p.marker(x[i], y[i], "#0072B2" if front[i] else "#888", filled=bool(front[i]),
                 label=r["label"] if (label_all or front[i]) else "",
                 title=f"{r['label']}: {e[i]:,.1f} J, {x[i]:,.3f} ms")
    p.frame()
    fig.space(40)
    return fig.svg()


def wear_comparison_figure(rows: list[dict], title: str = "") -> str | None:
    """Start/stop cycles per year of the fastest-worn drive, as % of its rating, per row."""
    rows = [r for r in rows if r["rated_start_stop"]]
    if not rows:
        return None
    used = np.array([r["rating_used_per_year"] * 100 for r in rows])
    budget = 100 / SERVICE_YEARS
    fig = Figure(width=960, left=110, legend_width=150, title=title)
    p = fig.panel(Axis(0, max(float(used.max()), budget) * 1.1, label="% of rated start/stop cycles per year"),
                  Axis(len(rows), 0), 22 * len(rows) + 8, gap=18)
    for i, r in enumerate(rows):
        p.rects(0, used[i], i + 0.18, i + 0.82, "#D55E00" if used[i] > budget else "#009E73",
                title=f"{r['label']}: {r['spin_ups']:,} spin-ups, {r['max_cycles_per_year']:,.0f}/year "
                      f"vs {r['rated_start_stop']:,} rated")
    p.vline(budget, label=f"{SERVICE_YEARS}-year life")
    p.frame(ylabels=[(float(p.py(i + 0.5)), r["label"]) for i, r in enumerate(rows)])
    fig.legend([("within 5-year life", "#009E73"), ("wears out sooner", "#D55E00")])
    fig.space(40)
    return fig.svg()


def comparison_page(rows: list[dict], title: str, intro: str = "") -> str:
    """The comparison page of ``rows`` (from :func:`comparison_row`), one section per
    ``group``: energy against mean and p99 latency with the Pareto fronts, wear against the
    rating, and a table."""
    body = [f"<h1>{html.escape(title)}</h1>"]
    if intro:
        body.append(f"<p>{intro}</p>")
    body.append('<p class="note">Filled points are on the Pareto front: no other run of the group used '
                "less energy <em>and</em> had lower latency. Wear: start/stop cycles per year of the "
                "fastest-worn drive at the run's rate, as a share of its rated cycles; the dashed line is "
                f"the share that lasts {SERVICE_YEARS} years.</p>")
    for group in dict.fromkeys(r["group"] for r in rows):
        g = [r for r in rows if r["group"] == group]
        if group:
            body.append(f"<h2>{html.escape(group)}</h2>")
        body.append('<figure style="display:flex;gap:0">' + tradeoff_figure(g, "mean_latency_ms", "energy vs mean latency")
                    + tradeoff_figure(g, "p99_latency_ms", "energy vs p99 latency") + "</figure>")
        wear = wear_comparison_figure(g, "start/stop cycles vs rating")
        body.append(f"<figure>{wear}</figure>" if wear else
                    '<p class="note">No drive of this group has a rated start/stop count in the catalogue.</p>')
        front_mean = pareto_front([r["mean_latency_ms"] for r in g], [r["energy_j"] for r in g])
        front_p99 = pareto_front([r["p99_latency_ms"] for r in g], [r["energy_j"] for r in g])
        base = g[0]["energy_j"]
        table_rows = []
        for r, fm, fp in zip(g, front_mean, front_p99, strict=True):
            label = html.escape(r["label"])
            if r.get("link"):
                label = f'<a href="{html.escape(r["link"])}">{label}</a>'
            on = " / ".join(n for n, f in [("mean", fm), ("p99", fp)] if f) or "–"
            table_rows.append(
                f'<tr class="{"front" if fm or fp else ""}"><td>{label}</td><td>{r["requests"]:,}</td>'
                f"<td>{r['energy_j']:,.1f}</td><td>{(r['energy_j'] / base - 1) * 100:+.1f}%</td>"
                f"<td>{r['mean_latency_ms']:,.3f}</td><td>{r['p99_latency_ms']:,.3f}</td><td>{r['spin_ups']:,}</td>"
                f"<td>{_num(r['rated_start_stop'])}</td><td>{_num(r['rating_used_per_year'], '{:.1%}')}</td>"
                f"<td>{on}</td></tr>")
        body.append(_table(["run", "requests", "energy (J)", f"vs {g[0]['label']}", "mean latency (ms)",
                            "p99 latency (ms)", "spin-ups", "rated cycles", "% of rating / year",
                            "Pareto front"], table_rows))
    return _page(title, "".join(body))


def write_comparison(path: str | Path, rows: list[dict], title: str, intro: str = "") -> Path:
    """Write :func:`comparison_page` to ``path``."""
    path = Path(path)
    path.write_text(comparison_page(rows, title, intro))
    return path


__all__ = [
    "blocks_figure",
    "comparison_page",
    "comparison_row",
    "energy_figure",
    "latency_figure",
    "timeline_figure",
    "tradeoff_figure",
    "wear_comparison_figure",
    "wear_figure",
    "wear_rows",
    "wear_table",
    "write_comparison",
    "write_report",
]
