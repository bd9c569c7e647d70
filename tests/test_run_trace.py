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
