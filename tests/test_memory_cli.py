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
