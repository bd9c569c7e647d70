"""`wattio memory run` and `wattio.memory`: a memory config from the command line and from
Python, with DMA devices (docs/memory.md)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from wattio import memory
from wattio.cli_examples import examples

CONFIG = """
[memory]
part = "ddr-400-thesis"
ranks = 2
line_bytes = 128
seed = 1
[memory.policy]
kind = "nopm"
[[process]]
kind = "compute"
total_ns = 1000000
[[dma]]
period_ns = 10000
bytes = 1500
ring_pages = 4
"""


def wattio(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "wattio.cli", *args], capture_output=True, text=True,
                          cwd=cwd, check=False)


def test_a_dma_device_by_hand(tmp_path):
    """A frame of 1,500 B (12 lines of 128 B, 70 ns each on DDR-400: tRCD 15 + CL 15 + 40 ns
    burst) every 10 µs from 0 while a process computes for 1 ms: 101 transfers of 840 ns, none
    waiting (no power management), into four buffers on rank 0; the last ends at 1,000,840 ns."""
    cfg = tmp_path / "mem.toml"
    cfg.write_text(CONFIG)
    p = wattio("memory", "run", str(cfg), "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["runtime_ns"] == 1_000_840
    assert s["dma"] == {"transfers": 101, "dropped": 0, "lines": 1212, "delayed": 0, "mean_latency_ns": 840.0,
                        "max_latency_ns": 840, "pages_per_rank": [4, 0]}
    # Rank 0 wrote 1,212 lines (70 ns each) and stood by the rest; rank 1 stood by throughout.
    assert s["ranks"][0]["residency_ns"] == [1_000_840 - 1212 * 70, 0, 1212 * 70, 0, 0]
    assert s["energy_j"] == pytest.approx(2.2 * (2 * 1_000_840 - 1212 * 70) * 1e-9 + 4.2 * 1212 * 70e-9,
                                          rel=1e-12)
    p = wattio("memory", "run", str(cfg))
    assert p.returncode == 0, p.stderr
    assert "dma        101 transfers, 1,212 lines, 0 waited for a rank; latency mean 840.0 ns" in p.stdout
    # The table: rank 0 wrote 1,212 lines, 8.5 % of the run writing.
    row0 = next(line for line in p.stdout.splitlines() if line.split()[:1] == ["0"])
    assert row0.split()[3:5] == ["0", "1,212"] and "8.5%" in row0


def test_the_package_exports_the_memory_front_door():
    import wattio

    assert wattio.memory is memory and "memory" in wattio.__all__
    s = wattio.memory.run(CONFIG)
    assert (s["dma"]["transfers"], s["runtime_ns"]) == (101, 1_000_840)


def test_set_out_and_ranks_table(tmp_path):
    cfg = tmp_path / "mem.toml"
    cfg.write_text(CONFIG)
    out = tmp_path / "out"
    p = wattio("memory", "run", str(cfg), "--set", 'memory.dma_zone="anywhere"', "--set",
               'memory.placement="sequential"', "--set", "dma.0.ring_pages=16385", "--out", str(out))
    assert p.returncode == 0, p.stderr
    s = json.loads((out / "summary.json").read_text())
    # Sequential placement fills rank 0 (16,384 pages of 4 KiB in 64 MB) before rank 1.
    assert s["dma"]["pages_per_rank"] == [16384, 1]
    table = (out / "ranks.csv").read_text().splitlines()
    assert table[0].startswith("rank,energy_j,mean_power_w,reads,writes,delayed_pd,delayed_sr,standby_s")
    df = memory.ranks(s)
    # Every rank's time in its states and exits is the run's.
    total = df[[c for c in df.columns if c.endswith("_s")]].sum(axis=1)
    assert total.tolist() == pytest.approx([s["runtime_ns"] / 1e9] * 2, rel=1e-12)


def test_bad_configs_name_the_key(tmp_path):
    cfg = tmp_path / "mem.toml"
    cfg.write_text(CONFIG.replace("bytes = 1500", "bytes = 5000"))
    p = wattio("memory", "run", str(cfg))
    assert p.returncode == 2
    assert "dma[0].bytes: expected 1..=4096 (one buffer page per transfer), got 5000" in p.stderr
    assert str(cfg) in p.stderr
    cfg.write_text(CONFIG.replace("ring_pages = 4", "ring_pages = 4\nburst = 2"))
    p = wattio("memory", "run", str(cfg))
    assert p.returncode == 2 and "dma" in p.stderr and "burst" in p.stderr, p.stderr
    p = wattio("memory", "run", str(tmp_path / "missing.toml"))
    assert p.returncode == 2 and "missing.toml" in p.stderr


def test_the_shipped_example_runs_and_the_first_rank_rule_saves_energy(tmp_path):
    """The example's programs map no shared page, so rank 0 is in no active set and the
    first transfer after a switch waits either way; with the buffers anywhere, transfers wake
    every rank, and the run takes more energy."""
    cfg = tmp_path / "mem.toml"
    cfg.write_text(examples()["memory-pavm-dma.toml"])
    first = memory.run(cfg)
    anywhere = memory.run(cfg.read_text().replace('dma_zone = "first-rank"', 'dma_zone = "anywhere"'))
    assert first["dma"]["pages_per_rank"] == [256, 0, 0, 0]
    assert all(p > 0 for p in anywhere["dma"]["pages_per_rank"])
    assert first["dma"]["transfers"] == anywhere["dma"]["transfers"] > 300
    assert first["dma"]["delayed"] < anywhere["dma"]["delayed"]
    assert first["energy_j"] < anywhere["energy_j"]


GLIMPSE = Path(__file__).resolve().parent.parent / "workloads" / "glimpse" / "trace.parquet"


def test_delay_hiding_from_the_command_line_matches_the_reproduction():
    """The glimpse stand-in with the reproduction's cache (4 GB over the paper's 4,237 MB data
    set, as a share of the footprint): the command's figures are the reproduction's."""
    from wattio.reproduce import delay_hiding as dh

    share = 4096 / 4237
    p = wattio("memory", "delay-hiding", str(GLIMPSE), "--cache-share", str(share), "--predictor", "isr",
               "--predictor", "af-mra-et", "--json")
    assert p.returncode == 0, p.stderr
    got = {r["predictor"]: r for r in json.loads(p.stdout)}
    for pred in ("isr", "af-mra-et"):
        want = dh.run("glimpse", pred)
        for key in ("calls", "prediction_hit", "prediction_miss", "prediction_wrong", "energy_j", "slowdown_pct",
                    "hit_pct"):
            assert got[pred][key] == want[key], (pred, key)
    # ISR guesses nothing: every call that needs a rank waits for its exit.
    assert got["isr"]["prediction_hit"] == 0 and got["isr"]["prediction_miss"] > 0
    p = wattio("memory", "delay-hiding", str(GLIMPSE), "--cache-share", str(share))
    assert p.returncode == 0, p.stderr
    assert "isr" in p.stdout and "af-mra-et" in p.stdout and "vs isr" in p.stdout


def test_delay_hiding_errors_name_the_key(tmp_path):
    p = wattio("memory", "delay-hiding", str(GLIMPSE), "--predictor", "oracle")
    assert p.returncode == 2 and "predictor" in p.stderr and "oracle" in p.stderr, p.stderr
    p = wattio("memory", "delay-hiding", str(GLIMPSE), "--set", "ranks=0")
    assert p.returncode == 2 and "ranks" in p.stderr, p.stderr
    p = wattio("memory", "delay-hiding", str(GLIMPSE), "--set", "blocks_per_rank=10", "--cache-share", "0.5")
    assert p.returncode == 2 and "give one" in p.stderr, p.stderr
    p = wattio("memory", "delay-hiding", str(tmp_path / "none.parquet"))
    assert p.returncode == 2 and "none.parquet" in p.stderr, p.stderr


def _storage_traffic(trace: Path, capacity: int, expire_ns: int = 30_000_000_000, interval_ns: int = 5_000_000_000):
    """A second implementation of the buffer cache's storage traffic (LRU over `capacity`
    blocks of 4 KiB; a miss reads its block unless a write covers it whole; dirty blocks
    written back at eviction, at fsync and by a flusher waking every `interval_ns` that
    writes back whole every file dirty for `expire_ns`): (blocks read, blocks written back
    by eviction, by fsync, by the flusher)."""
    from collections import OrderedDict

    import pyarrow.parquet as pq

    bs = 4096
    t = pq.read_table(trace, columns=["arrival_ns", "op", "offset", "len", "file"]).to_pylist()
    lru: OrderedDict = OrderedDict()
    dirty: dict[int, set] = {}  # file -> dirty blocks
    since: dict[int, int] = {}  # file -> when it went from clean to dirty
    reads = evicted = synced = expired = 0

    def flush(upto: int) -> None:
        nonlocal expired
        while since:
            t0 = min(since.values())
            wake = -(-(t0 + expire_ns) // interval_ns) * interval_ns
            if wake > upto:
                return
            for g in [g for g, t1 in since.items() if t1 + expire_ns <= wake]:
                expired += len(dirty.pop(g))
                del since[g]

    for row in t:
        now, op, off, n, f = row["arrival_ns"], row["op"], row["offset"], row["len"], row["file"]
        flush(now)
        if op == 2:  # fsync
            if f in since:
                synced += len(dirty.pop(f))
                del since[f]
            continue
        if op not in (0, 1) or n == 0:
            continue
        write = op == 1
        for b in range(off // bs, (off + n - 1) // bs + 1):
            key = (f, b)
            if key in lru:
                lru.move_to_end(key)
            else:
                if len(lru) == capacity:
                    (g, c), _ = lru.popitem(last=False)
                    if c in dirty.get(g, ()):
                        evicted += 1
                        dirty[g].discard(c)
                        if not dirty[g]:
                            del dirty[g], since[g]
                lru[key] = True
                whole = write and max(off, b * bs) == b * bs and min(off + n, (b + 1) * bs) == (b + 1) * bs
                reads += not whole
            if write:
                if f not in since:
                    since[f], dirty[f] = now, set()
                dirty[f].add(b)
    flush(2**63)
    return reads, evicted, synced, expired


def test_delay_hiding_storage_traffic_matches_a_second_implementation(tmp_path):
    """The glimpse and TPC-H stand-ins with a cache of half their footprint, misses and
    write-backs served by the laptop disk: the blocks read and written back, by cause, are those of a plain
    Python LRU with Linux's flusher (above); the memory side is the run without storage; a
    run config with a spin-down function serves the same traffic."""
    share = 0.5
    plain = memory.delay_hiding(GLIMPSE, "af-mra-et", cache_share=share)
    r = memory.delay_hiding(GLIMPSE, "af-mra-et", cache_share=share, storage="toshiba-mk1234gsx")
    for key in ("calls", "cache_hits", "cache_misses", "prediction_hit", "prediction_wrong", "energy_j",
                "slowdown_pct"):
        assert r[key] == plain[key], key
    reads, evicted, synced, expired = _storage_traffic(GLIMPSE, 4 * r["blocks_per_rank"])
    assert (r["written_back"]["evicted"], r["written_back"]["synced"], r["written_back"]["expired"]) == (
        evicted, synced, expired)
    assert reads > 1000 and evicted > 100 and expired > 100
    disk = r["storage"]["devices"]["storage"]
    assert disk["bytes_read"] == 4096 * reads
    assert disk["bytes_written"] == 4096 * (evicted + synced + expired)
    assert sum(disk["residency_s"].values()) == pytest.approx(r["storage"]["duration_s"], abs=1e-9)
    # The same traffic through a config's stack: a disk under a 5 s spin-down timeout.
    cfg = tmp_path / "disk.toml"
    cfg.write_text('[[device]]\nname = "disk"\nmodel = "toshiba-mk1234gsx"\n\n[[function]]\nkind = "spindown"\n'
                   'policy = "fixed"\ntimeout_s = 5\ndevices = ["disk"]\n')
    p = wattio("memory", "delay-hiding", str(GLIMPSE), "--cache-share", str(share), "--storage", str(cfg))
    assert p.returncode == 0, p.stderr
    assert f"{evicted:,} evicted, 0 at fsync, {expired:,} by the flusher" in p.stdout, p.stdout
    assert "disk (toshiba-mk1234gsx)" in p.stdout, p.stdout
    # TPC-H's stand-in fsyncs: the blocks written at fsync agree too.
    tpch = GLIMPSE.parent.parent / "tpch" / "trace.parquet"
    r = memory.delay_hiding(tpch, "isr", cache_share=share, storage="toshiba-mk1234gsx")
    reads, evicted, synced, expired = _storage_traffic(tpch, 4 * r["blocks_per_rank"])
    assert synced > 10
    assert r["written_back"] == {"evicted": evicted, "synced": synced, "expired": expired}
    assert r["storage"]["devices"]["storage"]["bytes_read"] == 4096 * reads
    p = wattio("memory", "delay-hiding", str(GLIMPSE), "--storage", "no-such-drive")
    assert p.returncode == 2 and "no-such-drive" in p.stderr, p.stderr
