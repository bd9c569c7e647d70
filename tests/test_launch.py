"""The launch bindings behind `wattio reproduce launch-…` (crates/py/src/launch.rs): a captured
launch replayed on catalogue devices, hybrid-disk pinning across budgets, and their errors."""

import json

import pyarrow.parquet as pq
import pytest
from conftest import ROOT
from wattio import _core

TRACE = ROOT / "workloads" / "launch-python" / "trace.parquet"
HDD = '[[device]]\nname = "d0"\nmodel = "seagate-constellation-es3-4tb"\n'


def _block_requests() -> int:
    return sum(d == 0 for d in pq.read_table(TRACE, columns=["dev"]).column("dev").to_pylist())


def test_a_cold_launch_replayed_twice_answers_every_block_request_of_both_runs():
    r = json.loads(_core.launch_replay(str(TRACE), HDD, 2, 2.0))
    assert r["requests"] == 2 * _block_requests() and r["errors"] == 0
    # The capture's end (wattio.launch.end_ns): 616.655 ms after the trace's start or later.
    assert r["captured_s"] >= 0.616
    # A launch is never faster than its own think time, and the relaunch on a cold cache
    # (no prefetcher) costs about what the first launch did.
    first, second = r["durations_s"]
    assert first > 0.5 and abs(second - first) / first < 0.1
    assert r["counters"] == {}


def test_iolab_prefetcher_hits_on_the_relaunch():
    fn = '\n[[function]]\nkind = "iolab-prefetch"\ngap_s = 0.5\n'
    r = json.loads(_core.launch_replay(str(TRACE), HDD + fn, 2, 2.0))
    c = r["counters"]
    assert c["launches_detected"] == 1.0 and c["prefetch_hits"] > 0
    assert 0 < c["hit_ratio"] <= 1 and r["errors"] == 0


def test_pinning_rows_respect_their_budget():
    r = json.loads(_core.launch_pinning(str(TRACE), "seagate-constellation-es3-4tb", "sandisk-ultra-cf-2gb", [0.1], 16))
    schemes = [row["scheme"] for row in r["rows"]]
    assert schemes == ["none", "fcfp", "scf", "ilp"]
    for row in r["rows"]:
        assert row["pinned_fraction"] <= row["budget"] + 1e-12
    none = r["rows"][0]
    assert none["pinned_fraction"] == 0 and none["disk_s"] == pytest.approx(none["hdd_s"])


def test_bad_inputs_are_errors_naming_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="nothing.parquet"):
        _core.launch_replay(str(tmp_path / "nothing.parquet"), HDD, 2, 2.0)
    with pytest.raises(ValueError, match="function\\[1\\].gap_s"):
        _core.launch_replay(str(TRACE), HDD + '[[function]]\nkind = "iolab-prefetch"\ngap_s = -1\n', 2, 2.0)
    with pytest.raises(ValueError, match="runs: expected 1 to 16, got 0"):
        _core.launch_replay(str(TRACE), HDD, 0, 2.0)
    with pytest.raises(ValueError, match="budgets: expected fractions from 0 to 1, got 1.5"):
        _core.launch_pinning(str(TRACE), "seagate-constellation-es3-4tb", "sandisk-ultra-cf-2gb", [1.5], 16)
    with pytest.raises(ValueError, match="hdd-parametric"):
        _core.launch_pinning(str(TRACE), "samsung-870-evo-1tb", "sandisk-ultra-cf-2gb", [0.1], 16)
