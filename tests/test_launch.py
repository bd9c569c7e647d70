"""The launch bindings behind `wattio reproduce launch-…` (crates/py/src/launch.rs): a captured
launch replayed on catalogue devices, hybrid-disk pinning across budgets, and their errors."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT
from wattio import _core

TRACE = ROOT / "workloads" / "launch-python" / "trace.parquet"
HDD = '[[device]]\nname = "d0"\nmodel = "seagate-constellation-es3-4tb"\n'
#: SanDisk Ultra II CF: 10 MB/s, no per-page latency: a 4 KiB read takes 409,600 ns.
CF = '[[device]]\nname = "d0"\nmodel = "sandisk-ultra-cf-2gb"\n'
READ_4K = 409_600


def _launch(path, reads, end_ns):
    """A launch trace (`wattio capture launch`'s format) of one process's 4 KiB block reads
    `(arrival_ns, offset, measured_ns)`, ending at `end_ns`."""
    schema = pq.read_schema(TRACE)
    n = len(reads)
    cols = {
        "arrival_ns": [a for a, _, _ in reads],
        "op": [0] * n,
        "offset": [o for _, o, _ in reads],
        "len": [4096] * n,
        "dev": [0] * n,
        "stream": [7] * n,
        "file": [None] * n,
        "call_site": [None] * n,
        "measured_ns": [m for _, _, m in reads],
    }
    meta = dict(pq.read_metadata(TRACE).metadata)
    del meta[b"ARROW:schema"]
    meta[b"wattio.launch.end_ns"] = str(end_ns).encode()
    table = pa.Table.from_pydict(cols, schema=schema.with_metadata(meta))
    pq.write_table(table, path)
    return str(path)


def test_a_small_launch_replays_to_its_hand_computed_time(tmp_path):
    # Captured: read A at 0 (done at 100 µs), 200 µs of CPU, read B at 300 µs (done at
    # 400 µs), 100 µs of CPU, exit at 500 µs. B waits for A's completion plus 200 µs, the
    # end for B's plus 100 µs. On the CF card each read takes 409.6 µs: A 0 → 409.6 µs,
    # B 609.6 → 1019.2 µs, end 1119.2 µs; the relaunch (no prefetcher) the same.
    trace = _launch(tmp_path / "t.parquet", [(0, 0, 100_000), (300_000, 1 << 20, 100_000)], 500_000)
    r = json.loads(_core.launch_replay(trace, CF, 2, 1.0))
    end = 2 * READ_4K + 200_000 + 100_000
    assert r["durations_s"] == [end / 1e9, end / 1e9]
    assert r["captured_s"] == 500_000 / 1e9
    assert r["requests"] == 4 and r["errors"] == 0


def test_the_prefetcher_answers_the_launch_after_the_three_reads_that_detect_it(tmp_path):
    # Five reads 1 ms apart, each waiting for the previous one: the first launch is learned,
    # the relaunch detected at its third read; the prefetcher then fetches the five extents
    # (LBA order) and answers the fourth and fifth from them: hit ratio 2 / 5.
    reads = [(k * 1_000_000, (5 - k) << 20, 100_000) for k in range(5)]
    trace = _launch(tmp_path / "t.parquet", reads, 5_000_000)
    fn = '[[function]]\nkind = "iolab-prefetch"\ngap_s = 0.5\n'
    r = json.loads(_core.launch_replay(trace, CF + fn, 2, 1.0))
    c = r["counters"]
    assert c["learned_requests"] == 5 and c["learned_extents"] == 5
    assert c["launches_detected"] == 1 and c["prefetch_reads"] == 5
    assert c["launch_requests"] == 5 and c["prefetch_hits"] == 2 and c["hit_ratio"] == 2 / 5
    assert r["requests"] == 10 and r["errors"] == 0


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
    with pytest.raises(ValueError, match="function\\[0\\].gap_s"):
        _core.launch_replay(str(TRACE), HDD + '[[function]]\nkind = "iolab-prefetch"\ngap_s = -1\n', 2, 2.0)
    with pytest.raises(ValueError, match="runs: expected 1 to 16, got 0"):
        _core.launch_replay(str(TRACE), HDD, 0, 2.0)
    with pytest.raises(ValueError, match="budgets: expected fractions from 0 to 1, got 1.5"):
        _core.launch_pinning(str(TRACE), "seagate-constellation-es3-4tb", "sandisk-ultra-cf-2gb", [1.5], 16)
    with pytest.raises(ValueError, match="hdd-parametric"):
        _core.launch_pinning(str(TRACE), "samsung-870-evo-1tb", "sandisk-ultra-cf-2gb", [0.1], 16)
