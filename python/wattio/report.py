"""`report.html`: one self-contained page per run, figures inline as SVG."""

from __future__ import annotations

import html
import io
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pyarrow.parquet as pq

#: Points drawn at most in the LBA scatter and the latency CDF.
MAX_POINTS = 50_000

PALETTE = {
    "active": "#d62728",
    "seek": "#ff7f0e",
    "idle": "#2ca02c",
    "standby": "#1f77b4",
    "sleep": "#17becf",
    "spin_up": "#9467bd",
    "spin_down": "#8c564b",
}


def _color(state: str, i: int) -> str:
    return PALETTE.get(state, plt.cm.tab20(i % 20))


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg") :]


def _sample(n: int, rng_seed: int = 0) -> np.ndarray | None:
    if n <= MAX_POINTS:
        return None
    return np.sort(np.random.default_rng(rng_seed).choice(n, MAX_POINTS, replace=False))


def timeline_figure(out: Path) -> str | None:
    path = out / "timeline.parquet"
    if not path.exists():
        return None
    t = pq.read_table(path).to_pandas()
    if t.empty:
        return None
    devices = list(dict.fromkeys(t["device"]))
    states = list(dict.fromkeys(t["state"]))
    fig, ax = plt.subplots(figsize=(10, 0.5 + 0.45 * len(devices)))
    for y, dev in enumerate(devices):
        rows = t[t["device"] == dev]
        for i, st in enumerate(states):
            r = rows[rows["state"] == st]
            if len(r):
                ax.broken_barh(
                    list(zip(r["start_s"], r["end_s"] - r["start_s"])),
                    (y - 0.4, 0.8),
                    facecolors=_color(st, i),
                    label=st if y == 0 or st not in ax.get_legend_handles_labels()[1] else None,
                )
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), loc="upper right", fontsize=8, ncol=min(len(uniq), 6))
    ax.set_yticks(range(len(devices)), devices)
    ax.set_xlabel("time (s)")
    ax.set_title("Power state per device (busy periods folded into idle)")
    return _svg(fig)


def energy_figure(out: Path) -> str | None:
    path = out / "energy.parquet"
    if not path.exists():
        return None
    e = pq.read_table(path).to_pandas()
    pivot = e.pivot_table(index="device", columns="state", values="energy_j", aggfunc="sum", sort=False).fillna(0)
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.4 * len(pivot)))
    left = np.zeros(len(pivot))
    for i, st in enumerate(pivot.columns):
        vals = pivot[st].to_numpy()
        if vals.sum() > 0:
            ax.barh(pivot.index, vals, left=left, color=_color(st, i), label=st)
            left += vals
    ax.set_xlabel("energy (J)")
    ax.set_title("Energy by device and state")
    ax.legend(fontsize=8, loc="lower right")
    return _svg(fig)


def latency_figure(out: Path) -> str | None:
    path = out / "requests.parquet"
    if not path.exists():
        return None
    lat = pq.read_table(path, columns=["latency_ns"]).column(0).to_numpy()
    if len(lat) == 0:
        return None
    lat = np.sort(lat) / 1e6
    y = np.arange(1, len(lat) + 1) / len(lat)
    idx = _sample(len(lat))
    if idx is not None:
        lat, y = lat[idx], y[idx]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.step(np.maximum(lat, 1e-3), y, where="post")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("Latency CDF")
    ax.grid(True, which="both", alpha=0.3)
    return _svg(fig)


def lba_figure(out: Path) -> str | None:
    path = out / "requests.parquet"
    if not path.exists():
        return None
    t = pq.read_table(path, columns=["arrival_ns", "offset", "op", "dev"]).to_pandas()
    if t.empty:
        return None
    idx = _sample(len(t))
    if idx is not None:
        t = t.iloc[idx]
    fig, ax = plt.subplots(figsize=(10, 3.5))
    for op, name, color in [(0, "read", "#1f77b4"), (1, "write", "#d62728")]:
        r = t[t["op"] == op]
        ax.scatter(r["arrival_ns"] / 1e9, r["offset"] / 512, s=1, c=color, label=name, rasterized=True)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("LBA (512 B sectors)")
    ax.set_title("Block accesses over time (as IOLab's Fig. 2)")
    ax.legend(markerscale=8, fontsize=8, loc="upper right")
    return _svg(fig)


def _summary_table(s: dict) -> str:
    rows = [
        ("duration", f"{s['duration_s']:,.1f} s"),
        ("requests", f"{s['requests']:,}"),
        ("energy", f"{s['energy_j']:,.1f} J"),
        ("mean latency", f"{s['mean_latency_ms']:.3f} ms"),
        ("p99 latency", f"{s['p99_latency_ms']:.3f} ms"),
        ("mean power wait", f"{s['mean_power_wait_ms']:.3f} ms"),
    ]
    head = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    dev_rows = "".join(
        f"<tr><td>{html.escape(n)}</td><td>{html.escape(d['model'])}</td><td>{d['energy_j']:,.1f}</td>"
        f"<td>{d['mean_power_w']:.3f}</td><td>{d['spin_ups']}</td><td>{d['utilization'] * 100:.2f}%</td></tr>"
        for n, d in s["devices"].items()
    )
    return (
        f"<table>{head}</table><h2>Devices</h2><table><tr><th>device</th><th>model</th>"
        f"<th>energy (J)</th><th>mean power (W)</th><th>spin-ups</th><th>utilization</th></tr>{dev_rows}</table>"
    )


def write_report(out: str | Path) -> Path:
    """Write ``report.html`` into a run's output directory from its files."""
    out = Path(out)
    s = json.loads((out / "summary.json").read_text())
    figures = [f for f in (timeline_figure(out), energy_figure(out), latency_figure(out), lba_figure(out)) if f]
    title = html.escape(s.get("name") or out.name)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>wattio — {title}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}figure{{margin:1em 0}}</style></head>
<body><h1>wattio run: {title}</h1>
{_summary_table(s)}
<h2>Figures</h2>
{''.join(f'<figure>{f}</figure>' for f in figures)}
<h2>summary.json</h2><pre>{html.escape(json.dumps(s, indent=2))}</pre>
</body></html>
"""
    path = out / "report.html"
    path.write_text(page)
    return path
