"""`wattio disk validate MODEL TRACE` on a trace with measured response times other than
DiskSim's: blkparse's text, each request measured to its completion (the replay maths are
hand-computed in crates/devices' and crates/engine's tests; here the command line)."""

from __future__ import annotations

import json

from wattio import _core
from wattio.cli import main

BLKPARSE = """\
  8,16  0  1  0.010000000  7  D   R 0 + 8 [dd]
  8,16  0  2  0.011000000  7  D   R 800000 + 8 [dd]
  8,16  1  3  0.016000000  0  C   R 0 + 8 [0]
  8,16  1  4  0.024000000  0  C   R 800000 + 8 [0]
  8,16  0  5  0.025000000  7  D FWS [jbd2]
  8,16  1  6  0.025500000  0  C FWS 0 [0]
  8,16  0  7  0.040000000  7  D   W 1600 + 8 [dd]
  8,16  0  8  0.060000000  7  D   R 4000000 + 64 [dd]
  8,16  1  9  0.050000000  0  C   W 1600 + 8 [0]
  8,16  1 10  0.075000000  0  C   R 4000000 + 64 [0]
"""


def test_validate_a_blkparse_trace_on_a_catalogue_model(tmp_path, capsys):
    trace = tmp_path / "sdb.txt"
    trace.write_text(BLKPARSE)
    model = "wd800-fs2-mechanical"
    assert main(["disk", "validate", model, str(trace), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r == json.loads(_core.disk_validate(model, str(trace)))
    # Two reads were in flight at once: open-loop by default; the flush is not replayed.
    assert (r["drive"], r["requests"], r["replay"], r["max_outstanding"]) == (model, 4, "open", 2)
    assert (r["not_replayed"], r["unmeasured"]) == (1, 0)
    # Platters hold no mapping to fill (an SSD model's FTL would be filled first).
    assert r["preconditioned"] is False
    # Measured: 6, 13, 10 and 15 ms; the write alone 10 ms.
    assert abs(r["mean_measured_ms"] - 11.0) < 1e-9 and r["p90_measured_ms"] == 15.0
    assert r["reads"]["requests"] == 3 and abs(r["reads"]["mean_measured_ms"] - 34 / 3) < 1e-9
    assert r["writes"]["requests"] == 1 and r["writes"]["mean_measured_ms"] == 10.0
    closed = json.loads(_core.disk_validate(model, str(trace), replay="closed"))
    assert closed["replay"] == "closed" and closed["mean_measured_ms"] == r["mean_measured_ms"]
    # In the open replay the second read waits behind the first; closed, it never waits.
    assert r["mean_sim_ms"] > closed["mean_sim_ms"]
    assert main(["disk", "validate", model, str(trace)]) == 0
    out = capsys.readouterr().out
    assert "replay:   open-loop (the trace had at most 2 outstanding)" in out
    assert "1 flushes, discards and empty requests not replayed" in out
    assert "writes:   1 requests, demerit" in out


def test_a_trace_without_completions_is_refused_by_name(tmp_path, capsys):
    trace = tmp_path / "sdb.txt"
    trace.write_text(BLKPARSE)
    assert main(["disk", "validate", "wd800-fs2-mechanical", str(trace), "--action", "C"]) == 2
    err = capsys.readouterr().err
    assert "sdb.txt" in err and "no request has a measured response time" in err


def test_the_per_request_table_and_the_cdf_figure(tmp_path, capsys):
    from wattio import validation

    trace = tmp_path / "sdb.txt"
    trace.write_text(BLKPARSE)
    model = "wd800-fs2-mechanical"
    report, table = validation.validate(model, trace, device="8,16")
    assert report == json.loads(_core.disk_validate(model, str(trace)))
    # One row per compared request in trace order: the measured times hand-read above.
    assert list(table["op"]) == ["read", "read", "write", "read"]
    assert list(table["measured_ms"]) == [6.0, 13.0, 10.0, 15.0]
    assert abs(table["simulated_ms"].mean() - report["mean_sim_ms"]) < 1e-9
    assert (
        abs(table[table["op"] == "write"]["simulated_ms"].mean() - report["writes"]["mean_sim_ms"])
        < 1e-9
    )
    svg = validation.cdf_figure(report, table)
    assert svg.startswith("<svg") and svg.count('class="frame"') == 3
    assert "all requests: 4 requests" in svg and "writes: 1 requests" in svg
    assert f"demerit {report['demerit_ms']:.3f} ms" in svg
    csv, plot = tmp_path / "t.csv", tmp_path / "cdf.svg"
    assert (
        main(["disk", "validate", model, str(trace), "--table", str(csv), "--plot", str(plot)]) == 0
    )
    assert csv.read_text().splitlines()[0] == "op,simulated_ms,measured_ms"
    assert len(csv.read_text().splitlines()) == 5 and plot.read_text() == svg
    assert "demerit:" in capsys.readouterr().out


BIOSNOOP = """\
TIME(s)     COMM           PID    DISK    T    SECTOR     BYTES   LAT(ms)
0.008000    dd             7      sdb     R    800000     4096     13.000
0.000000    dd             7      sdb     R    0          4096      6.000
0.009500    jbd2           7      sdb     F    0          0         0.500
0.034000    dd             7      sdb     W    1600       4096     10.000
0.059000    dd             7      sdb     R    4000000    32768    15.000
"""


def test_biosnoop_gives_the_blkparse_traces_validation(tmp_path, capsys):
    """The same five I/Os as biosnoop prints them — at completion, with their latency, the
    second completion first as per-CPU buffers can — validate as the blkparse trace does:
    arrivals are TIME − LAT, sorted, counted from the earliest (so the blkparse trace is
    moved to start at 0 too: a platter's angle depends on the absolute time)."""

    def earlier(line: str) -> str:
        f = line.split()
        f[3] = f"{float(f[3]) - 0.010:.9f}"
        return " ".join(f)

    blk = tmp_path / "sdb.txt"
    blk.write_text("".join(earlier(ln) + "\n" for ln in BLKPARSE.splitlines()))
    bio = tmp_path / "biosnoop.txt"
    bio.write_text(BIOSNOOP)
    model = "wd800-fs2-mechanical"
    for replay in (None, "closed"):
        a = json.loads(_core.disk_validate(model, str(blk), replay=replay))
        b = json.loads(_core.disk_validate(model, str(bio), replay=replay))
        for k in (
            "requests",
            "replay",
            "max_outstanding",
            "not_replayed",
            "demerit_ms",
            "mean_sim_ms",
            "mean_measured_ms",
            "p90_measured_ms",
            "reads",
            "writes",
        ):
            assert a[k] == b[k], (replay, k, a[k], b[k])
    assert main(["disk", "validate", model, str(bio)]) == 0
    assert "replay:   open-loop (the trace had at most 2 outstanding)" in capsys.readouterr().out
