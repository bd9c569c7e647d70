"""The run's tables as pandas sees them: int64 nanoseconds, categorical names, a device name
in every table, the same units everywhere; DataFrames accepted as traces."""

import subprocess
import sys

import pandas as pd
import pytest
import wattio
from wattio.api import STATUSES
from wattio.trace import OPS

CONFIG = """
[run]
seed = 5

[[device]]
name = "disk"
model = "seagate-constellation-es3-4tb"
count = 2

[[device]]
name = "flash"
model = "samsung-870-evo-1tb"

[[function]]
kind = "spindown"
policy = "fixed"
timeout_s = 2

[workload]
arrivals = "poisson"
duration_s = 600
rate = 2
devices = 3
read_fraction = 0.7
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return wattio.run(CONFIG, out=tmp_path_factory.mktemp("tables"), progress=False, report=False)


def test_requests_dtypes_and_names(run):
    req = run.requests()
    s = run.summary
    assert len(req) == s["requests"]
    for c in ["id", "arrival_ns", "finish_ns", "latency_ns", "queue_ns", "power_wait_ns", "service_ns",
              "offset", "len"]:
        assert req[c].dtype == "int64", c
    # Differences of times are signed: no wrap-around.
    assert (req.arrival_ns - req.finish_ns < 0).all()
    assert (req.latency_ns == req.queue_ns + req.power_wait_ns + req.service_ns).all()
    assert list(req.op.cat.categories) == OPS
    assert list(req.status.cat.categories) == STATUSES
    assert set(req.op) == {"read", "write"} and set(req.status) == {"ok"}
    names = ["disk0", "disk1", "flash"]
    assert list(req.device.cat.categories) == names
    assert (req.device.astype(str) == [names[d] for d in req.dev]).all()
    assert req.latency_ns.mean() / 1e6 == pytest.approx(s["mean_latency_ms"], rel=1e-12)


def test_timeline_and_energy_share_names_and_units(run):
    s = run.summary
    total_ns = round(s["duration_s"] * 1e9)
    tl = run.timeline()
    assert tl.start_ns.dtype == tl.end_ns.dtype == "int64"
    assert isinstance(tl.device.dtype, pd.CategoricalDtype) and isinstance(tl.state.dtype, pd.CategoricalDtype)
    per_dev = (tl.end_ns - tl.start_ns).groupby(tl.device, observed=False).sum()
    assert per_dev.to_dict() == dict.fromkeys(s["devices"], total_ns)
    en = run.energy()
    assert en.residency_ns.dtype == en.entries.dtype == "int64"
    assert en.groupby("device", observed=False).residency_ns.sum().to_dict() == dict.fromkeys(s["devices"], total_ns)
    for name, d in s["devices"].items():
        rows = en[en.device == name]
        assert rows.energy_j.sum() == pytest.approx(d["energy_j"], rel=1e-12)
        states = rows[rows.state != "per_operation"]
        assert dict(zip(states.state.astype(str), states.residency_ns / 1e9, strict=True)) == pytest.approx(
            d["residency_s"])
    # The SSD's NAND energy per operation is a row of its own, one entry per I/O; disks have none.
    op = en[en.state == "per_operation"]
    assert op.device.astype(str).tolist() == ["flash"]
    assert op.entries.tolist() == [s["devices"]["flash"]["ios"]]
    assert op.energy_j.iloc[0] > 0


def test_dataframe_as_trace_equals_the_file(run, tmp_path):
    req = run.requests().sort_values("arrival_ns")
    frame = req[["arrival_ns", "op", "offset", "len", "dev"]]
    cfg = CONFIG.replace("duration_s = 600", "duration_s = 600")
    from_frame = wattio.run(cfg, trace=frame, progress=False).summary
    path = tmp_path / "t.parquet"
    assert wattio.trace.write_frame(frame, path) == len(frame)
    from_file = wattio.run(cfg, trace=path, progress=False).summary
    assert from_frame["requests"] == from_file["requests"] == len(frame)
    assert from_frame["energy_j"] == from_file["energy_j"]
    back = wattio.trace.read(path)
    assert back.arrival_ns.tolist() == frame.arrival_ns.tolist()
    assert back.op.astype(str).tolist() == frame.op.astype(str).tolist()
    # Codes and names in any case mean the same ops.
    codes = frame.assign(op=frame.op.cat.codes.astype(int))
    upper = frame.assign(op=frame.op.astype(str).str.upper())
    for f in (codes, upper):
        assert wattio.run(cfg, trace=f, progress=False).summary["energy_j"] == from_file["energy_j"]


def test_dataframe_trace_errors_name_the_column(run):
    frame = run.requests()[["arrival_ns", "op", "offset", "len"]]
    with pytest.raises(ValueError, match=r"missing columns 'offset', 'len' \(needs arrival_ns, op, offset, len"):
        wattio.run(CONFIG, trace=frame[["arrival_ns", "op"]], progress=False)
    bad = frame.assign(op=frame.op.astype(str))
    bad.loc[bad.index[3], "op"] = "erase"
    with pytest.raises(ValueError, match=rf"column 'op' row {bad.index[3]}: 'erase' is not one of read, write"):
        wattio.run(CONFIG, trace=bad, progress=False)
    neg = frame.assign(offset=frame.offset - 10**12)
    with pytest.raises(ValueError, match=r"column 'offset' row \d+: -\d+ is not an integer in \[0, "):
        wattio.run(CONFIG, trace=neg, progress=False)
    with pytest.raises(TypeError, match="expected a path or a pandas DataFrame, got list"):
        wattio.run(CONFIG, trace=[1, 2], progress=False)


def test_trace_module_comes_with_wattio():
    p = subprocess.run([sys.executable, "-c", "import wattio; print(wattio.trace.OPS)"],
                       capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "['read', 'write', 'flush', 'discard']"


def test_progress_bar_reports_simulated_time(capsys):
    wattio.run(CONFIG.replace("duration_s = 600", "duration_s = 20"), progress=True)
    err = capsys.readouterr().err
    assert "20/20 sim s" in err and "requests" in err
