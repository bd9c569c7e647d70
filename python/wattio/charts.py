"""Small SVG charts for the HTML reports, written directly from numpy arrays.

Why not matplotlib: rendering the old report's figures through it took 12–46 s per demo run
on a loaded 2-core machine against 0.2–6 s of simulation (docs/benchmarks.md). A report
needs a handful of chart types (stacked areas, bars, lines, point clouds) whose data is
aggregated first, so each figure is a few hundred SVG elements and takes milliseconds.

Everything here is a pure function of its inputs: the same run gives the same bytes.
The helpers (:func:`time_unit`, :func:`nice_ticks`, :class:`Axis`, :class:`Figure`) are
public so other pages (the comparison page, ``wattio reproduce``) draw the same way.
"""

from __future__ import annotations

import html
import math
import re

import numpy as np

#: Colours of power states and transitions (colour-blind-safe Okabe–Ito where possible).
STATE_COLORS = {
    "active": "#D55E00",
    "seek": "#E69F00",
    "idle": "#009E73",
    "standby": "#0072B2",
    "sleep": "#56B4E9",
    "off": "#999999",
    "spin_up": "#CC79A7",
    "spin_down": "#8c564b",
}
#: Colours for anything else (devices, policies, unknown states), in order.
CYCLE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000",
         "#8c564b", "#7f7f7f"]
OP_COLORS = {"read": "#0072B2", "write": "#D55E00", "flush": "#009E73", "discard": "#CC79A7"}

FONT = 12
TICK_FONT = 11


def state_color(state: str, i: int) -> str:
    return STATE_COLORS.get(state, CYCLE[i % len(CYCLE)])


def time_unit(span_s: float) -> tuple[str, float]:
    """The unit a time axis spanning ``span_s`` seconds is labelled in: (name, seconds)."""
    if span_s >= 3 * 3600:
        return "h", 3600.0
    if span_s >= 3 * 60:
        return "min", 60.0
    if span_s >= 3:
        return "s", 1.0
    return "ms", 1e-3


def natural_key(name: str):
    """Sort key putting ``disk2`` before ``disk10``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def format_number(v: float) -> str:
    """A latency or energy figure with a sensible number of digits: 3,834 / 12.5 / 0.0421."""
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 1:
        return f"{v:.3g}"
    return f"{v:.2g}"


def format_duration(s: float) -> str:
    """``s`` seconds in the unit a reader expects: 86,400 s → "24 h", 120 s → "2 min",
    600.5 s → "10.01 min"."""
    whole = [(n, k) for n, k in (("h", 3600.0), ("min", 60.0)) if s >= k and s % k == 0]
    name, scale = whole[0] if whole else time_unit(s)
    v = s / scale
    return f"{v:,.0f} {name}" if abs(v - round(v)) < 1e-9 else f"{v:,.2f} {name}"


def nice_ticks(lo: float, hi: float, target: int = 6, steps=(1, 2, 2.5, 5, 10)) -> list[float]:
    """Round tick values covering [lo, hi], about ``target`` of them."""
    if not hi > lo:
        return [lo]
    raw = (hi - lo) / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(s * mag for s in steps if s * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    n = math.floor((hi - first) / step + 1e-9) + 1
    return [round(first + i * step, 12) for i in range(n)]


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6 or a < 1e-3:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    if a >= 100 or float(v).is_integer():
        return f"{v:,.0f}"
    return f"{v:.3g}"


class Axis:
    """A linear, logarithmic or time axis mapping data values to pixels."""

    def __init__(self, lo: float, hi: float, *, log: bool = False, time: bool = False,
                 label: str = "", pad: float = 0.0):
        if log:
            lo, hi = max(lo, 1e-12), max(hi, 1e-12)
            if hi <= lo:
                hi = lo * 10
            lo = 10 ** math.floor(math.log10(lo) + 1e-9)
            hi = 10 ** math.ceil(math.log10(hi) - 1e-9)
        else:
            # hi < lo is a reversed axis (bar charts list their first bar at the top).
            if hi == lo:
                hi = lo + (abs(lo) or 1.0)
            span = hi - lo
            lo, hi = lo - pad * span, hi + pad * span
        self.lo, self.hi, self.log, self.time = lo, hi, log, time
        self.unit = time_unit(hi - lo) if time else None
        if time:
            label = f"{label or 'time'} ({self.unit[0]})"
        self.label = label

    def frac(self, v):
        """Position of ``v`` on the axis in [0, 1] (numpy arrays welcome)."""
        v = np.asarray(v, dtype=float)
        if self.log:
            v = np.log10(np.maximum(v, 1e-300))
            lo, hi = math.log10(self.lo), math.log10(self.hi)
        else:
            lo, hi = self.lo, self.hi
        return (v - lo) / (hi - lo)

    def ticks(self) -> list[tuple[float, str]]:
        if self.log:
            k0, k1 = round(math.log10(self.lo)), round(math.log10(self.hi))
            stride = max(1, math.ceil((k1 - k0) / 8))
            return [(10.0**k, _fmt(10.0**k)) for k in range(k0, k1 + 1, stride)]
        if self.time:
            name, scale = self.unit
            steps = {"h": (1, 2, 3, 4, 6, 12, 24), "min": (1, 2, 5, 10, 15, 30, 60)}.get(
                name, (1, 2, 2.5, 5, 10))
            lo, hi = self.lo / scale, self.hi / scale
            raw = (hi - lo) / 8
            if name in ("h", "min"):
                step = next((s for s in steps if s >= raw), steps[-1] * math.ceil(raw / steps[-1]))
                first = math.ceil(lo / step - 1e-9) * step
                vals = [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]
            else:
                vals = nice_ticks(lo, hi, 8)
            return [(v * scale, _fmt(v)) for v in vals]
        return [(v, _fmt(v)) for v in nice_ticks(min(self.lo, self.hi), max(self.lo, self.hi))]


def _n(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _ns(a) -> list[str]:
    """Pixel coordinates as text, a tenth of a pixel (vectorised: figures have 10⁴ of them)."""
    return [f"{v:.1f}" for v in np.round(np.asarray(a, dtype=float), 1).tolist()]


class Panel:
    """A plot area of a :class:`Figure` with an x and a y axis."""

    def __init__(self, fig: Figure, x0: float, y0: float, w: float, h: float, xaxis: Axis,
                 yaxis: Axis | None):
        self.fig, self.x0, self.y0, self.w, self.h = fig, x0, y0, w, h
        self.xaxis, self.yaxis = xaxis, yaxis
        #: Where this panel's elements start in the figure: :meth:`frame` puts the grid
        #: there, under the data.
        self.mark = len(fig.parts)
        #: Boxes of the point labels placed so far, kept apart by :meth:`marker`.
        self.labels: list[tuple[float, float, float, float]] = []

    def px(self, v):
        return self.x0 + np.clip(self.xaxis.frac(v), -0.01, 1.01) * self.w

    def py(self, v):
        return self.y0 + self.h - np.clip(self.yaxis.frac(v), -0.01, 1.01) * self.h

    def frame(self, *, xticks: bool = True, ylabels=None, grid: bool = True, title: str = "",
              title_right: str = "") -> None:
        """Axes, ticks and grid. ``ylabels``: (value, text) pairs instead of the y axis's
        ticks; ``xticks=False`` leaves the x labels to a panel below sharing the axis."""
        f = self.fig
        x1, y1 = self.x0 + self.w, self.y0 + self.h
        lines = []
        for v, text in self.xaxis.ticks():
            x = float(self.px(v))
            if grid:
                lines.append(f'<line x1="{_n(x)}" y1="{_n(self.y0)}" x2="{_n(x)}" y2="{_n(y1)}" class="g"/>')
            if xticks:
                f.add(f'<text x="{_n(x)}" y="{_n(y1 + 14)}" text-anchor="middle" class="t">{text}</text>')
        if xticks and self.xaxis.label:
            f.add(f'<text x="{_n(self.x0 + self.w / 2)}" y="{_n(y1 + 32)}" text-anchor="middle">'
                  f"{html.escape(self.xaxis.label)}</text>")
        labels = ylabels if ylabels is not None else (self.yaxis.ticks() if self.yaxis else [])
        for v, text in labels:
            y = float(self.py(v)) if ylabels is None else v
            if grid and ylabels is None:
                lines.append(f'<line x1="{_n(self.x0)}" y1="{_n(y)}" x2="{_n(x1)}" y2="{_n(y)}" class="g"/>')
            f.add(f'<text x="{_n(self.x0 - 5)}" y="{_n(y + 4)}" text-anchor="end" class="t">'
                  f"{html.escape(str(text))}</text>")
        if self.yaxis is not None and self.yaxis.label and ylabels is None:
            cx, cy = self.x0 - f.left + 14, self.y0 + self.h / 2
            f.add(f'<text transform="translate({_n(cx)},{_n(cy)}) rotate(-90)" text-anchor="middle">'
                  f"{html.escape(self.yaxis.label)}</text>")
        f.add(f'<rect x="{_n(self.x0)}" y="{_n(self.y0)}" width="{_n(self.w)}" height="{_n(self.h)}" '
              f'class="frame"/>')
        f.parts[self.mark:self.mark] = lines
        if title:
            f.add(f'<text x="{_n(self.x0)}" y="{_n(self.y0 - 6)}" class="pt">{html.escape(title)}</text>')
        if title_right:
            f.add(f'<text x="{_n(x1)}" y="{_n(self.y0 - 6)}" text-anchor="end" class="t">'
                  f"{html.escape(title_right)}</text>")

    def rects(self, x0, x1, y0, y1, color: str, title: str | None = None) -> None:
        """Rectangles [x0, x1] × [y0, y1] in data units, as one path."""
        X0, X1 = self.px(x0), self.px(x1)
        Y0, Y1 = self.py(y0), self.py(y1)
        X0, X1, Y0, Y1 = (a.ravel() for a in np.broadcast_arrays(X0, X1, Y0, Y1))
        w = np.maximum(X1 - X0, 0.4)
        d = "".join(
            f"M{x} {y}h{ww}v{hh}h-{ww}z"
            for x, y, ww, hh in zip(_ns(X0), _ns(np.minimum(Y0, Y1)), _ns(w), _ns(np.abs(Y1 - Y0)), strict=True)
        )
        if d:
            tip = f"<title>{html.escape(title)}</title>" if title else ""
            self.fig.add(f'<path d="{d}" fill="{color}">{tip}</path>')

    def band(self, edges, lower, upper, color: str, title: str | None = None) -> None:
        """A stacked-area band: between ``lower`` and ``upper`` (one value per bin between
        consecutive ``edges``), flat within each bin."""
        xs, lo, up = _ns(self.px(edges)), _ns(self.py(lower)), _ns(self.py(upper))
        top = [f"{xs[i]} {up[i]} {xs[i + 1]} {up[i]}" for i in range(len(up))]
        bot = [f"{xs[i + 1]} {lo[i]} {xs[i]} {lo[i]}" for i in reversed(range(len(lo)))]
        tip = f"<title>{html.escape(title)}</title>" if title else ""
        self.fig.add(f'<path d="M{" L".join(top + bot)}z" fill="{color}" stroke="none">{tip}</path>')

    def line(self, xs, ys, color: str, *, width: float = 1.5, step: bool = False, dash: str = "",
             title: str | None = None) -> None:
        X, Y = _ns(self.px(xs)), _ns(self.py(ys))
        if len(X) == 0:
            return
        pts = [f"{X[0]} {Y[0]}"]
        for i in range(1, len(X)):
            if step:
                pts.append(f"{X[i]} {Y[i - 1]}")
            pts.append(f"{X[i]} {Y[i]}")
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        tip = f"<title>{html.escape(title)}</title>" if title else ""
        self.fig.add(f'<path d="M{" L".join(pts)}" fill="none" stroke="{color}" '
                     f'stroke-width="{width}"{extra}>{tip}</path>')

    def dots(self, xs, ys, color: str, *, size: float = 1.2) -> None:
        """A point cloud as one path of small squares (cheap for thousands of points)."""
        s = _n(size)
        d = "".join(f"M{x} {y}h{s}v{s}h-{s}z" for x, y in zip(_ns(self.px(xs)), _ns(self.py(ys)), strict=True))
        if d:
            self.fig.add(f'<path d="{d}" fill="{color}"/>')

    def marker(self, x, y, color: str, *, filled: bool = True, r: float = 5, label: str = "",
               title: str | None = None) -> None:
        X, Y = float(self.px(x)), float(self.py(y))
        fill = color if filled else "white"
        tip = f"<title>{html.escape(title)}</title>" if title else ""
        self.fig.add(f'<circle cx="{_n(X)}" cy="{_n(Y)}" r="{_n(r)}" fill="{fill}" stroke="{color}" '
                     f'stroke-width="2">{tip}</circle>')
        if label:
            w, h = 6.2 * len(label), 11
            # The first spot beside the point that no earlier label covers.
            spots = [(X + r + 3, Y - r), (X + r + 3, Y + r + 9), (X - r - 3 - w, Y - r),
                     (X - r - 3 - w, Y + r + 9), (X + r + 3, Y - r - 11), (X + r + 3, Y + r + 20)]
            for tx, ty in spots:
                box = (tx, ty - h, tx + w, ty)
                if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                           for b in self.labels):
                    break
            else:
                tx, ty = spots[0]
                box = (tx, ty - h, tx + w, ty)
            self.labels.append(box)
            self.fig.add(f'<text x="{_n(tx)}" y="{_n(ty)}" class="t">{html.escape(label)}</text>')

    def vline(self, x, color: str = "#444", dash: str = "4 3", label: str = "") -> None:
        """A dashed vertical line with its label beside it, on the side with more room."""
        X = float(self.px(x))
        self.fig.add(f'<line x1="{_n(X)}" y1="{_n(self.y0)}" x2="{_n(X)}" y2="{_n(self.y0 + self.h)}" '
                     f'stroke="{color}" stroke-dasharray="{dash}"/>')
        if label:
            right = X < self.x0 + self.w / 2
            tx, anchor = (X + 4, "start") if right else (X - 4, "end")
            # Above the plot area, where no bar or curve can cover it.
            self.fig.add(f'<text x="{_n(tx)}" y="{_n(self.y0 - 4)}" text-anchor="{anchor}" class="t">'
                         f"{html.escape(label)}</text>")


class Figure:
    """An SVG canvas: panels on the left, legend in a column on the right (never on data)."""

    def __init__(self, width: float = 960, *, left: float = 70, legend_width: float = 130,
                 title: str = ""):
        self.width, self.left, self.legend_width = width, left, legend_width
        self.parts: list[str] = []
        self.y = 28 if title else 10
        self.title = title
        self.legend_items: list[tuple[str, str, str]] = []

    @property
    def plot_width(self) -> float:
        return self.width - self.left - self.legend_width - 20

    def add(self, s: str) -> None:
        self.parts.append(s)

    def panel(self, xaxis: Axis, yaxis: Axis | None, height: float, *, gap: float = 22,
              x0: float | None = None, width: float | None = None, advance: bool = True) -> Panel:
        """A panel below the previous one (``gap`` px above it for its title)."""
        p = Panel(self, self.left if x0 is None else x0, self.y + gap, width or self.plot_width,
                  height, xaxis, yaxis)
        if advance:
            self.y += gap + height
        return p

    def space(self, px: float) -> None:
        self.y += px

    def legend(self, items, kind: str = "box") -> None:
        """``items``: (label, colour) pairs; ``kind`` box, line or dot."""
        for label, color in items:
            if label not in {i[0] for i in self.legend_items}:
                self.legend_items.append((label, color, kind))

    def svg(self) -> str:
        lx = self.width - self.legend_width
        leg = []
        for i, (label, color, kind) in enumerate(self.legend_items):
            y = (34 if self.title else 16) + 18 * i
            if kind == "line":
                leg.append(f'<line x1="{lx}" y1="{y}" x2="{lx + 16}" y2="{y}" stroke="{color}" stroke-width="2.5"/>')
            elif kind == "dot":
                leg.append(f'<circle cx="{lx + 8}" cy="{y}" r="4" fill="{color}"/>')
            else:
                leg.append(f'<rect x="{lx}" y="{y - 6}" width="16" height="12" fill="{color}"/>')
            leg.append(f'<text x="{lx + 22}" y="{y + 4}">{html.escape(label)}</text>')
        # Tall enough for the legend too: a one-bar chart can have more legend rows than bars.
        height = max(self.y + 8, (34 if self.title else 16) + 18 * len(self.legend_items))
        head = f'<text x="{self.left}" y="18" class="ft">{html.escape(self.title)}</text>' if self.title else ""
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {_n(height)}" '
            f'width="{self.width}" height="{_n(height)}" font-family="sans-serif" font-size="{FONT}">'
            "<style>.g{stroke:#e4e4e4;stroke-width:1}.frame{fill:none;stroke:#888}"
            f".t{{font-size:{TICK_FONT}px;fill:#333}}.pt{{font-weight:bold}}.ft{{font-size:14px;font-weight:bold}}"
            "</style>" + head + "".join(self.parts) + "".join(leg) + "</svg>"
        )


def state_fractions(starts, ends, states, edges) -> dict[str, np.ndarray]:
    """Fraction of each bin ``[edges[i], edges[i+1])`` that a device spent in each state,
    from its intervals (``starts``/``ends`` sorted, non-overlapping, any unit).

    Exact, not sampled: the time spent in a state up to ``t`` is piecewise linear in ``t``
    (rising inside that state's intervals, flat elsewhere), so it is interpolated at the
    bin edges and differenced.
    """
    starts = np.asarray(starts, dtype=float)
    ends = np.asarray(ends, dtype=float)
    states = np.asarray(states)
    edges = np.asarray(edges, dtype=float)
    width = np.diff(edges)
    out = {}
    for st in dict.fromkeys(states.tolist()):
        m = states == st
        s, e = starts[m], ends[m]
        cum_end = np.cumsum(e - s)
        cum_start = cum_end - (e - s)
        xs = np.empty(2 * len(s))
        ys = np.empty(2 * len(s))
        xs[0::2], xs[1::2] = s, e
        ys[0::2], ys[1::2] = cum_start, cum_end
        cum = np.interp(edges, xs, ys, left=0.0, right=float(cum_end[-1]) if len(s) else 0.0)
        out[st] = np.diff(cum) / np.where(width > 0, width, 1)
    return out


def pareto_front(xs, ys) -> np.ndarray:
    """Mask of the points no other point beats in both coordinates (smaller is better in
    both; a point equal to another in both is on the front with it)."""
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    on = np.ones(len(x), dtype=bool)
    for i in range(len(x)):
        dominated = (x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i]))
        on[i] = not dominated.any()
    return on
