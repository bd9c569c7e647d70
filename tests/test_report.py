"""The HTML pages and the chart helpers behind them: hand-computed aggregates, and pages
built from real runs checked for what a reader needs (a panel per device, units, wear)."""

import json

import numpy as np
import pytest
import wattio
from conftest import EXAMPLES
from wattio.charts import Axis, pareto_front, state_fractions, time_unit
from wattio.report import (
    YEAR_S,
    comparison_page,
    comparison_row,
    wear_rows,
    write_report,
)

SERVER = """
[run]
name = "two-disks"
seed = 3

[[device]]
name = "disk"
model = "seagate-constellation-es3-4tb"
count = 2

[[function]]
kind = "spindown"
policy = "fixed"
timeout_s = 2

[workload]
arrivals = "poisson"
duration_s = DURATION
rate = 0.3
devices = 2
"""


def test_state_fractions_hand_computed():
    starts, ends = [0, 3, 7], [3, 7, 10]
    states = ["idle", "standby", "idle"]
    fr = state_fractions(starts, ends, states, [0, 5, 10])
    assert fr["idle"].tolist() == pytest.approx([0.6, 0.6])
    assert fr["standby"].tolist() == pytest.approx([0.4, 0.4])
    fr = state_fractions(starts, ends, states, [0, 2, 10])
    assert fr["idle"].tolist() == pytest.approx([1.0, 0.5])
    assert fr["standby"].tolist() == pytest.approx([0.0, 0.5])


def test_pareto_front_hand_computed():
    x = [1, 2, 3, 5, 2]
    y = [5, 2, 3, 1, 2]
    # (3, 3) is beaten by (2, 2) in both; the two (2, 2) tie and stay.
    assert pareto_front(x, y).tolist() == [True, True, False, True, True]


def test_time_axes_use_hours_and_minutes():
    assert time_unit(86400) == ("h", 3600.0)
    assert time_unit(7200) == ("min", 60.0)
    assert time_unit(60) == ("s", 1.0)
    assert time_unit(0.5) == ("ms", 1e-3)
    day = Axis(0, 86400, time=True)
    assert day.label == "time (h)"
    assert [t for _, t in day.ticks()] == ["0", "3", "6", "9", "12", "15", "18", "21", "24"]
    assert [v for v, _ in day.ticks()][1] == 3 * 3600


def _run(tmp_path, duration):
    out = tmp_path / f"run{duration}"
    r = wattio.run(SERVER.replace("DURATION", str(duration)), out=out, progress=False)
    return r, out, (out / "report.html").read_text()


def test_report_of_a_long_run_aggregates_the_timeline(tmp_path):
    r, _, page = _run(tmp_path, 14400)
    s = r.summary
    intervals = r.timeline().groupby("device", observed=True).size()
    assert (intervals > 600).all(), intervals  # enough to aggregate
    # One panel per device, in the timeline and in the block-access plot.
    assert page.count('class="pt">disk0</text>') == 2
    assert page.count('class="pt">disk1</text>') == 2
    assert "time (h)" in page and "time (s)" not in page
    assert page.count("share of each 2 min bin") == 2
    # Wear: the Constellation's 600,000 rated cycles against the run's rate, per year.
    w = {x["device"]: x for x in wear_rows(s)}
    d0 = s["devices"]["disk0"]
    assert w["disk0"]["cycles_per_year"] == pytest.approx(d0["spin_ups"] / s["duration_s"] * YEAR_S)
    assert w["disk0"]["rating_used_per_year"] == pytest.approx(d0["spin_ups"] / s["duration_s"] * YEAR_S / 600_000)
    assert f"<td>{d0['spin_ups']:,}</td><td>600,000</td>" in page
    assert page.count("<svg") == 5  # states, energy, latency, blocks, wear


def test_report_of_a_short_run_draws_intervals(tmp_path):
    _, out, page = _run(tmp_path, 60)
    assert "intervals, as they are" in page
    assert "time (s)" in page
    # Rewriting gives the same bytes (a report is a function of the run's files).
    assert write_report(out).read_text() == page


def test_comparison_page_marks_the_front():
    base = json.loads(json.dumps({
        "requests": 10, "duration_s": 86400.0, "energy_j": 100.0, "mean_latency_ms": 1.0,
        "p99_latency_ms": 5.0,
        "devices": {"d": {"model": "m", "spin_ups": 0, "rated_start_stop": 50_000, "model_counters": {}}},
    }))
    rows = []
    for label, e, mean, p99, ups in [("a", 100, 1, 5, 0), ("b", 80, 2, 4, 365), ("c", 90, 3, 6, 3650)]:
        s = dict(base, energy_j=float(e), mean_latency_ms=float(mean), p99_latency_ms=float(p99))
        s["devices"] = {"d": dict(base["devices"]["d"], spin_ups=ups)}
        rows.append(comparison_row(s, label, link=f"{label}/report.html"))
    # 3,650 cycles a day-long run -> 1,332,250 a year = 2,664.5 % of 50,000.
    assert rows[2]["rating_used_per_year"] == pytest.approx(3650 * 365 / 50_000)
    page = comparison_page(rows, "t")
    assert '<tr class="front"><td><a href="a/report.html">a</a>' in page  # least mean latency
    assert '<tr class="front"><td><a href="b/report.html">b</a>' in page  # least energy
    assert '<tr class=""><td><a href="c/report.html">c</a>' in page  # beaten by b in both
    assert page.count("<svg") == 3  # energy vs mean, energy vs p99, cycles vs rating


def test_figures_take_data_not_directories(tmp_path):
    """The figure helpers are reusable: they take tables and summaries."""
    import pyarrow.parquet as pq
    from wattio.report import energy_figure, latency_figure, timeline_figure

    r = wattio.run((EXAMPLES / "laptop-fixed.toml").read_text().replace("86400", "600"), out=tmp_path / "o",
                   progress=False, report=False)
    assert not (tmp_path / "o" / "report.html").exists()
    svg = timeline_figure(pq.read_table(tmp_path / "o" / "timeline.parquet"), r.summary["duration_s"])
    assert svg.startswith("<svg") and "time (min)" in svg
    assert "energy (J)" in energy_figure(pq.read_table(tmp_path / "o" / "energy.parquet"))
    assert "latency (ms)" in latency_figure(pq.read_table(tmp_path / "o" / "requests.parquet"))
    assert np.isfinite(r.summary["energy_j"])


def test_report_of_a_run_with_an_absent_disk(tmp_path):
    """A disk pulled from the run (`[device.fault] missing = true`): every request fails at
    once, the disk draws nothing, and the report still draws its panel, in state `absent`."""
    cfg = SERVER.replace("DURATION", "600").replace("count = 2", "").replace("devices = 2", "devices = 1")
    cfg = cfg.replace('model = "seagate-constellation-es3-4tb"\n',
                      'model = "seagate-constellation-es3-4tb"\n[device.fault]\nmissing = true\n')
    out = tmp_path / "absent"
    r = wattio.run(cfg, out=out, progress=False)
    s = r.summary
    d = s["devices"]["disk"]
    assert s["requests"] > 0 and s["errors"] == s["requests"]
    assert d["energy_j"] == 0.0 and d["spin_ups"] == 0
    assert {k: v for k, v in d["residency_s"].items() if v > 0} == {"absent": pytest.approx(600.0)}
    assert d["ios"] == s["requests"] and d["bytes_read"] == 0
    states = r.timeline()
    assert set(states["state"].astype(str)) == {"absent"}
    page = (out / "report.html").read_text()
    assert 'class="pt">disk</text>' in page and "absent" in page
