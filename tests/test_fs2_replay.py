"""The closed-loop replay behind `wattio reproduce fs2` (``_core.trace_replay``): per-run
device windows, and FS2's mechanism on a workload built to have what it exploits."""

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT
from wattio import _core
from wattio.reproduce import fs2

CHECKOUT = ROOT / "workloads" / "checkout" / "trace.parquet"
DISK = '[run]\nseed = 1\n[[device]]\nname = "disk"\nmodel = "wd800-fs2-mechanical"\n'


def _plain(path, reads):
    """A plain block trace (`wattio capture block`'s format) of one process's 4 KiB reads
    `(arrival_ns, offset, measured_ns)`."""
    schema = pq.read_schema(CHECKOUT)
    n = len(reads)
    cols = {
        "arrival_ns": [a for a, _, _ in reads], "op": [0] * n,
        "offset": [o for _, o, _ in reads], "len": [4096] * n, "dev": [0] * n,
        "stream": [7] * n, "file": [None] * n, "call_site": [None] * n,
        "measured_ns": [m for _, _, m in reads],
    }
    meta = dict(pq.read_metadata(CHECKOUT).metadata)
    del meta[b"ARROW:schema"]
    pq.write_table(pa.Table.from_pydict(cols, schema=schema.with_metadata(meta)), path)
    return str(path)


def test_windows_account_for_every_run():
    r = json.loads(_core.trace_replay(str(CHECKOUT), DISK, 3, 2.0))
    runs = r["runs"]
    assert len(runs) == 3 and r["errors"] == 0 and r["requests"] == 3 * 180
    for w, d in zip(runs, r["durations_s"], strict=True):
        disk = w["devices"]["disk"]
        span = w["end_s"] - w["start_s"]
        assert span == pytest.approx(d)
        # Every request of the run reached the disk, nothing else (no function).
        assert disk["ios"] == 180
        # Residency covers the run exactly; the states' energy is the device's.
        assert sum(disk["residency_s"].values()) == pytest.approx(span, rel=1e-9)
        assert sum(disk["energy_by_state_j"].values()) == pytest.approx(disk["energy_j"])
        # One I/O at a time: busy time is the service components' sum.
        parts = disk["seek_s"] + disk["rotate_s"] + disk["transfer_s"] + disk["overhead_s"]
        assert parts == pytest.approx(disk["busy_s"], rel=1e-6)
    # Runs after the first start with the heads where the previous run left them: the same
    # but for the platter's angle at their start (a few ns of rotation).
    a, b = runs[1]["devices"]["disk"], runs[2]["devices"]["disk"]
    assert a["ios"] == b["ios"]
    for k in ("busy_s", "seek_s", "rotate_s", "transfer_s", "energy_j"):
        assert a[k] == pytest.approx(b[k], rel=1e-6), k
    assert runs[2]["start_s"] == pytest.approx(runs[1]["end_s"] + 2.0)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="runs: expected 1 to 16, got 0"):
        _core.trace_replay(str(CHECKOUT), DISK, 0, 1.0)
    with pytest.raises(ValueError, match="gap_s"):
        _core.trace_replay(str(CHECKOUT), DISK, 2, -1.0)


def test_fs2_shortens_a_shuttle_between_two_far_areas(tmp_path):
    # What FS2 exploits, in isolation: reads alternating between two areas 39 GiB apart
    # (the thesis's CVS working copy and repository), the same order every run. The busier
    # region becomes the target, the other area's blocks are replicated into it in access
    # order, and from then on half the long seeks are gone. Expected before running: the
    # third run's seek time at most half of the disk's without FS2.
    rnd = random.Random(1)
    reads, t = [], 0
    for _ in range(200):
        for base in (1 << 30, 40 << 30):
            reads.append((t, base + rnd.randrange(0, 64 << 20, 4096), 10_000_000))
            t += 11_000_000
    path = _plain(tmp_path / "shuttle.parquet", reads)
    touched = sorted({o // 4096 for _, o, _ in reads})
    with_fs2 = (DISK + '[[function]]\nkind = "fs2"\ndisk = "disk"\nepoch_s = 0.2\n'
                f"free = {json.dumps(fs2._free(touched))}\n")
    base = json.loads(_core.trace_replay(path, DISK, 3, 2.0))["runs"]
    r = json.loads(_core.trace_replay(path, with_fs2, 3, 2.0))
    third, base3 = r["runs"][2]["devices"]["disk"], base[2]["devices"]["disk"]
    assert third["seek_s"] <= 0.5 * base3["seek_s"], (third, base3)
    assert r["durations_s"][2] < base[2]["end_s"] - base[2]["start_s"]
    assert r["counters"]["reads_redirected"] > 100


def test_a_trace_past_a_drive_s_end_is_compacted_in_order_to_fit_it():
    # The CVS capture spans a 72 GiB image: it fits the thesis's 80 GB disk as it is, and
    # is compacted in 1 GiB chunks for the 9.1 GB Atlas 10K (chunks 0, 28, 36, 48, 50 →
    # 0…4), every request's offset within its chunk and the requests' order unchanged.
    assert fs2._capacity("wd800-fs2-mechanical") == 156_301_488 * 512
    atlas = fs2._capacity("quantum-atlas-10k")
    assert 9_000_000_000 < atlas < 9_300_000_000
    with pytest.raises(ValueError, match="no-such-drive"):
        _core.device_capacity("no-such-drive")
    src = pq.read_table(ROOT / "workloads" / "cvs-update" / "trace.parquet").to_pandas()
    as_is, _, _, _ = fs2._trace("cvs-update", "wd800-fs2-mechanical")
    assert as_is.endswith("workloads/cvs-update/trace.parquet")
    path, touched, read, span = fs2._trace("cvs-update", "quantum-atlas-10k")
    got = pq.read_table(path).to_pandas()
    chunk = 1 << 30
    before = sorted(set(src["offset"] // chunk))
    assert before == [0, 28, 36, 48, 50], before
    mapping = {c: i for i, c in enumerate(before)}
    want = src["offset"].map(lambda o: mapping[o // chunk] * chunk + o % chunk)
    assert list(got["offset"]) == list(want)
    assert list(got["arrival_ns"]) == list(src["arrival_ns"])
    assert int((got["offset"] + got["len"]).max()) <= atlas
    assert max(touched) * 4096 < atlas and set(read) <= set(touched)
    assert span == pytest.approx(3.65, abs=0.01)


def test_a_trace_spread_over_its_volume_is_compacted_in_smaller_pieces_until_it_fits():
    # The web server's data lies in 71 of the 72 GiB image's 128 MiB block groups (36 of its
    # GiB): in 1 GiB pieces it would need 36 GiB of the 9.1 GB Atlas 10K, in 128 MiB pieces
    # 71 x 128 MiB = 9.5 GB, still past its end; in 64 MiB pieces (71 of them) 4.8 GB.
    atlas = fs2._capacity("quantum-atlas-10k")
    src = pq.read_table(ROOT / "workloads" / "webserver-volume" / "trace.parquet").to_pandas()
    data = src[src["len"] > 0]
    assert len(set(data["offset"] // (1 << 30))) == 36
    assert len(set(data["offset"] // (128 << 20))) == 71 and 70 * (128 << 20) > atlas
    assert len(set(data["offset"] // (64 << 20))) == 71
    path, _, _, _ = fs2._trace("webserver-volume", "quantum-atlas-10k")
    assert fs2._CHUNKS[("webserver-volume", "quantum-atlas-10k")] == 64 << 20
    got = pq.read_table(path).to_pandas()
    chunk = 64 << 20
    pieces = sorted(set(src["offset"] // chunk))
    mapping = {c: i for i, c in enumerate(pieces)}
    want = src["offset"].map(lambda o: mapping[o // chunk] * chunk + o % chunk)
    assert list(got["offset"]) == list(want)
    assert list(got["arrival_ns"]) == list(src["arrival_ns"])
    assert int((got["offset"] + got["len"]).max()) <= atlas


def test_the_cli_replays_a_trace_closed_loop(tmp_path, wattio_cli):
    cfg = tmp_path / "disk.toml"
    cfg.write_text(DISK)
    p = wattio_cli("trace", "replay", str(CHECKOUT), str(cfg), "--runs", "2", "--json")
    got = json.loads(p.stdout)
    want = json.loads(_core.trace_replay(str(CHECKOUT), DISK, 2, 2.0))
    assert got == want
    text = wattio_cli("trace", "replay", str(CHECKOUT), str(cfg), "--runs", "1").stdout
    assert "closed-loop replay of" in text and "1 run(s)" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("1 "))
    assert row.split()[3:5] == ["disk", "180"], row
    bad = wattio_cli("trace", "replay", str(CHECKOUT), str(tmp_path / "none.toml"), check=False)
    assert bad.returncode != 0 and "none.toml" in bad.stderr


def test_a_blkparse_trace_replays_closed_loop_on_its_completions(tmp_path, wattio_cli):
    # Three reads of one process as blkparse prints them: each D waits for its C (the
    # second one's completes before the first's); another device's requests, selected away.
    text = (
        "  8,0    0        1     0.001000000  7  D   R 2048 + 8 [dd]\n"
        "  8,0    0        2     0.001500000  7  D   R 8192 + 8 [dd]\n"
        "  8,16   0        3     0.001600000  9  D   W 64 + 8 [kw]\n"
        "  8,0    1        4     0.003500000  0  C   R 8192 + 8 [0]\n"
        "  8,0    1        5     0.004000000  0  C   R 2048 + 8 [0]\n"
        "  8,16   1        6     0.004100000  0  C   W 64 + 8 [0]\n"
        "  8,0    0        7     0.009000000  7  D   R 4096 + 8 [dd]\n"
        "  8,0    1        8     0.010000000  0  C   R 4096 + 8 [0]\n"
    )
    blk = tmp_path / "sda.txt"
    blk.write_text(text)
    cfg = tmp_path / "disk.toml"
    cfg.write_text(DISK)
    # The same requests as `wattio capture block` writes them: D times and D -> C.
    same = _plain(tmp_path / "same.parquet",
                  [(1_000_000, 2048 * 512, 3_000_000), (1_500_000, 8192 * 512, 2_000_000),
                   (9_000_000, 4096 * 512, 1_000_000)])
    want = json.loads(_core.trace_replay(same, DISK, 2, 2.0))
    got = json.loads(wattio_cli("trace", "replay", str(blk), str(cfg), "--device", "8,0",
                                "--json").stdout)
    assert got["captured_s"] == pytest.approx(0.009) and got["requests"] == 6
    assert got == want
    # All devices: refused, naming the option that keeps one.
    bad = wattio_cli("trace", "replay", str(blk), str(cfg), check=False)
    assert bad.returncode != 0 and "--device KEY" in bad.stderr, bad.stderr
    # Completions kept as the requests: nothing measured, nothing to close the loop on.
    bad = wattio_cli("trace", "replay", str(blk), str(cfg), "--action", "C", "--device", "8,0",
                     check=False)
    assert "no request has a measured response time" in bad.stderr, bad.stderr
