"""`wattio run CONFIG --trace FILE --format FMT`: a real trace format straight into the simulator."""

import json

CONFIG = """
[run]
name = "msr-replay"
[[device]]
name = "disk"
model = "wd800-fs2"
[[function]]
kind = "spindown"
policy = "fixed"
timeout_s = 5
"""

# MSR Cambridge: Windows filetime (100 ns ticks), bytes. Arrivals at 0, 1 s, 2 s and 20 s.
MSR = """128166372000000000,hm,0,Read,1048576,4096,100
128166372010000000,hm,0,Write,2097152,8192,100
128166372020000000,hm,0,Read,4096,4096,100
128166372200000000,hm,0,Read,1048576,65536,100
"""


def test_msr_trace_replays_with_the_units_converted(tmp_path, wattio_cli):
    cfg = tmp_path / "replay.toml"
    cfg.write_text(CONFIG)
    trace = tmp_path / "hm_0.csv"
    trace.write_text(MSR)
    out = tmp_path / "out"
    wattio_cli("run", cfg, "--trace", trace, "--format", "msr", "--out", out, "--quiet", "--no-report")
    s = json.loads((out / "summary.json").read_text())
    assert s["requests"] == 4
    d = s["devices"]["disk"]
    # Idle from 2 s to 20 s: the 5 s timeout spins the disk down once and the request at
    # 20 s spins it up; the run ends at that request's completion (after the spin-up).
    assert d["spin_ups"] == 1
    assert d["entries"]["spin_down"] == 1
    assert d["bytes_read"] == 4096 + 4096 + 65536
    assert d["bytes_written"] == 8192
    assert 20.0 < s["duration_s"] < 40.0
    assert any("msr" in a.lower() or "filetime" in a.lower() for a in s["trace"]), s["trace"]


def test_bad_trace_line_is_named(tmp_path, wattio_cli):
    cfg = tmp_path / "replay.toml"
    cfg.write_text(CONFIG)
    trace = tmp_path / "bad.csv"
    trace.write_text(MSR.replace("Write", "Wrte"))
    p = wattio_cli("run", cfg, "--trace", trace, "--format", "msr", "--quiet", check=False)
    assert p.returncode == 2
    assert "bad.csv:2" in p.stderr, p.stderr


def test_trace_speedup_is_a_key_a_sweep_can_vary(tmp_path):
    """`[trace] speedup` divides every arrival: at 4x the MSR trace's 18 s idle gap is 4.5 s,
    under the 5 s timeout, so the disk never spins down and the last request arrives at 5 s.
    Swept as any key; a value out of range is refused naming it."""
    import pytest
    import wattio

    (tmp_path / "hm_0.csv").write_text(MSR)
    cfg = tmp_path / "replay.toml"
    cfg.write_text(CONFIG + '[trace]\npath = "hm_0.csv"\nformat = "msr"\n')
    df = wattio.sweep(cfg, {"trace.speedup": [1.0, 4.0]}, jobs=1)
    assert list(df["spin_ups"]) == [1, 0]
    slow, fast = df["duration_s"]
    assert 20.0 < slow < 40.0
    assert 5.0 < fast < 5.5
    s = wattio.run(cfg.read_text().replace('format = "msr"', 'format = "msr"\nspeedup = 4.0'),
                   base_dir=tmp_path, progress=False, report=False).summary
    assert any("replayed at 4x" in a for a in s["trace"]), s["trace"]
    for bad in ("0.0", "-2.0", "2e6"):
        with pytest.raises(ValueError, match=r"trace\.speedup: expected a number from 0\.000001 to 1e6"):
            wattio.run(cfg.read_text() + f"speedup = {bad}\n", base_dir=tmp_path, progress=False)
