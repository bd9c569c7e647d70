"""What a new user meets first: outputs that never mix runs, traces whose duration and units
are what they seem, `check` refusing what `run` refuses, one CLI vocabulary, the generic
delimited-text reader."""

import json
import subprocess
import sys

import pytest
from conftest import EXAMPLES

SMALL = (EXAMPLES / "laptop-fixed.toml").read_text().replace("duration_s = 86400", "duration_s = 3600")

# MSR Cambridge: Windows filetime (100 ns ticks). Arrivals at 0, 1 s, 2 s and 20 s.
MSR = """128166372000000000,hm,0,Read,1048576,4096,100
128166372010000000,hm,0,Write,2097152,8192,100
128166372020000000,hm,0,Read,4096,4096,100
128166372200000000,hm,0,Read,1048576,65536,100
"""


@pytest.fixture
def small(tmp_path):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    return cfg


@pytest.fixture
def msr(tmp_path):
    t = tmp_path / "hm_0.csv"
    t.write_text(MSR)
    return t


def _error(p) -> str:
    """The one `wattio: error:` line of a failed command (and no traceback)."""
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("wattio: error:")]
    assert len(lines) == 1, p.stderr
    return lines[0]


# --- 1. outputs never mix runs -------------------------------------------------------------


def test_a_reused_out_directory_holds_only_the_new_run(tmp_path, small, msr, wattio_cli):
    out = tmp_path / "out"
    first = wattio_cli("run", small, "--out", out, "--quiet")
    assert "wrote" in first.stdout and (out / "report.html").exists()
    # The second run writes no report and replays a 4-request trace: nothing of the first
    # run (its report, its 3,600 s of requests) may remain beside the new summary.
    second = wattio_cli("run", small, "--trace", msr, "--out", out, "--quiet", "--no-report")
    assert f"replaced the previous run in {out}/" in second.stdout
    assert not (out / "report.html").exists()
    s = json.loads((out / "summary.json").read_text())
    import pyarrow.parquet as pq

    assert s["requests"] == 4 == pq.read_table(out / "requests.parquet").num_rows
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")], list(tmp_path.iterdir())


def test_a_directory_wattio_did_not_write_is_never_replaced(tmp_path, small, wattio_cli):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    e = _error(wattio_cli("run", small, "--out", out, "--quiet", check=False))
    assert "not a wattio output directory (it holds thesis.tex)" in e
    assert (out / "thesis.tex").read_text() == "precious"


def test_a_failed_run_leaves_the_previous_outputs_alone(tmp_path, small, wattio_cli):
    out = tmp_path / "out"
    wattio_cli("run", small, "--out", out, "--quiet", "--no-report")
    before = (out / "summary.json").read_bytes()
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    _error(wattio_cli("run", small, "--trace", empty, "--format", "msr", "--out", out, "--quiet", check=False))
    assert (out / "summary.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.csv", "out", "small.toml"]


def test_the_api_never_returns_tables_of_another_run(tmp_path, small, msr):
    import wattio

    out = tmp_path / "out"
    a = wattio.run(small, out=out, progress=False, report=False)
    assert len(a.requests()) == a.summary["requests"]
    b = wattio.run(small, trace=msr, out=out, progress=False, report=False)
    assert len(b.requests()) == 4
    with pytest.raises(ValueError, match="now holds another run's outputs"):
        a.requests()
    assert len(wattio.load(out).requests()) == 4


# --- 2. trace semantics --------------------------------------------------------------------


def test_a_trace_run_lasts_the_trace_not_the_workloads_day(tmp_path, msr, wattio_cli):
    cfg = tmp_path / "day.toml"
    cfg.write_text((EXAMPLES / "laptop-fixed.toml").read_text())
    out = tmp_path / "out"
    wattio_cli("run", cfg, "--trace", msr, "--out", out, "--quiet", "--no-report")
    s = json.loads((out / "summary.json").read_text())
    # The last request arrives at 20 s after a spin-down: it completes after the spin-up.
    assert 20.0 < s["duration_s"] < 40.0, s["duration_s"]
    # Set explicitly, the end is the user's.
    wattio_cli("run", cfg, "--trace", msr, "--set", "run.until_s=100", "--out", out, "--quiet", "--no-report")
    assert json.loads((out / "summary.json").read_text())["duration_s"] == 100


def test_an_empty_trace_is_an_error_or_with_lenient_a_warning(tmp_path, small, wattio_cli):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    e = _error(wattio_cli("run", small, "--trace", empty, "--format", "msr", "--quiet", check=False))
    assert "the trace gave no requests; the trace was read as: format: msr" in e, e
    assert "--lenient" in e
    p = wattio_cli(
        "run", small, "--trace", empty, "--format", "msr", "--lenient", "--quiet", "--no-report",
        "--out", tmp_path / "o",
    )
    assert "wattio: WARNING: the trace gave no requests" in p.stderr
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["warnings"] == ["the trace gave no requests"]


def test_unix_seconds_in_an_msr_file_are_refused_as_implausible(tmp_path, small, wattio_cli):
    # 150 requests two seconds apart, stamped in Unix seconds instead of filetime ticks:
    # read as 100 ns ticks they would arrive within 30 µs.
    lines = [f"{1_700_000_000 + 2 * i},hm,0,Read,{4096 * i},4096,100" for i in range(150)]
    t = tmp_path / "unix.csv"
    t.write_text("\n".join(lines) + "\n")
    e = _error(wattio_cli("run", small, "--trace", t, "--quiet", check=False))
    assert "150 requests arrive within 0.030 ms" in e, e
    assert "Timestamp and ResponseTime are Windows filetime ticks of 100 ns" in e, e
    # `check` says the same without simulating.
    assert _error(wattio_cli("check", small, "--trace", t, check=False)) == e


def test_a_device_key_that_matches_nothing_is_an_error_naming_the_keys(tmp_path, small, msr, wattio_cli):
    e = _error(wattio_cli("run", small, "--trace", msr, "--device", "hm_9", "--quiet", check=False))
    assert "the trace gave no requests" in e, e
    assert "device: selected hm_9 only (as dev 0); 4 records of other devices skipped (keys seen: hm_0)" in e, e


# --- 3. check ≡ run -------------------------------------------------------------------------


def test_check_refuses_every_config_run_refuses_with_the_same_message(tmp_path, wattio_cli):
    (tmp_path / "spindown.py").write_text((EXAMPLES / "spindown.py").read_text())
    py = (EXAMPLES / "laptop-python.toml").read_text()
    bad_trace = tmp_path / "bad.csv"
    bad_trace.write_text(MSR.replace("Write", "Wrte"))
    cases = {
        "unknown model": SMALL.replace('"toshiba-mk1234gsx"', '"toshiba"'),
        "misspelt class": py.replace("spindown.py:FixedTimeout", "spindown.py:FixedTimout"),
        "wrong parameters": py.replace("timeout_s = 5 }", "timeout = 5 }"),
        "bad initial state": SMALL.replace('model = "toshiba-mk1234gsx"', 'model = "toshiba-mk1234gsx"\ninitial_state = "asleep"'),
        "bad trace line": SMALL + f'\n[trace]\npath = "{bad_trace}"\nformat = "msr"\n',
        "bad column mapping": SMALL + f'\n[trace]\npath = "{bad_trace}"\ncolumns = "time=1:fortnights,op=4,offset=5,size=6"\n',
    }
    for what, text in cases.items():
        cfg = tmp_path / "c.toml"
        cfg.write_text(text)
        run_err = _error(wattio_cli("run", cfg, "--quiet", "--out", tmp_path / "o", check=False))
        check_err = _error(wattio_cli("check", cfg, check=False))
        assert run_err == check_err, (what, run_err, check_err)


def test_an_exception_in_a_python_function_names_file_line_and_simulated_time(tmp_path, wattio_cli):
    (tmp_path / "boom.py").write_text(
        "from wattio import Function\n\n\n"
        "class Boom(Function):\n"
        "    def __init__(self):\n"
        "        self.n = 0\n\n"
        "    def on_request(self, now, io, out):\n"
        "        self.n += 1\n"
        "        if self.n == 3:\n"
        "            return 1 / 0\n"
        "        out.submit(io)\n\n"
        "    def on_completion(self, now, done, out):\n"
        "        out.reply(done)\n"
    )
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        SMALL.split("[[function]]")[0]
        + '[[function]]\nkind = "python"\nclass = "boom.py:Boom"\n\n[workload]'
        + SMALL.split("[workload]")[1]
    )
    e = _error(wattio_cli("run", cfg, "--quiet", "--out", tmp_path / "o", check=False))
    assert "function[0] (boom.py:Boom): on_request raised ZeroDivisionError: division by zero at " in e, e
    assert f"{tmp_path / 'boom.py'}:11, simulated time " in e, e
    # The time of the third request of the workload, in seconds.
    t = float(e.split("simulated time ")[1].split(" s")[0])
    assert 0 < t < 3600


# --- 4. one vocabulary ----------------------------------------------------------------------


def test_version_and_subcommand_usage(wattio_cli):
    import wattio

    assert wattio_cli("--version").stdout == f"wattio {wattio.__version__}\n"
    p = wattio_cli("run", "x.toml", "--bogus", check=False)
    assert p.returncode == 2
    assert p.stderr.startswith("usage: wattio run "), p.stderr
    assert "unrecognized arguments: --bogus" in p.stderr
    p = wattio_cli("trace", "stats", check=False)
    assert p.stderr.startswith("usage: wattio trace stats "), p.stderr


def test_a_closed_pipe_ends_quietly(tmp_path):
    # The reader goes away before wattio writes (as `| head` does after its lines).
    p = subprocess.Popen(
        [sys.executable, "-m", "wattio.cli", "functions", "--long"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait() == 141
    assert err == ""


def test_trace_options_without_a_trace_are_refused(small, wattio_cli):
    e = _error(wattio_cli("run", small, "--device", "hm_1", "--lenient", "--quiet", check=False))
    assert "--lenient, --device: how to read a trace, but this run has none" in e, e


def test_convert_keeps_from_and_to_as_aliases(tmp_path, msr, wattio_cli):
    for flags in (["--from", "msr", "--to", "fio"], ["--format", "msr", "--output-format", "fio"]):
        out = tmp_path / "t.log"
        p = wattio_cli("trace", "convert", msr, out, *flags)
        assert "wrote 4 requests" in p.stderr
        assert out.read_text().startswith("fio version 3 iolog")


# --- 5. the generic delimited-text reader ----------------------------------------------------

EXPORT = """timestamp_s,dev,rwbs,sector,nr_sectors
0.0,8:16,RS,2048,8
1.0,8:16,W,4096,16
2.0,8:32,WS,8192,8
20.0,8:16,R,2048,128
"""
SPEC = "time=timestamp_s:s,device=dev,op=rwbs:read=R/RS;write=W/WS,offset=sector:sectors,size=nr_sectors:sectors"


def test_csv_export_through_the_cli_and_through_a_config(tmp_path, small, wattio_cli):
    t = tmp_path / "export.csv"
    t.write_text(EXPORT)
    st = json.loads(wattio_cli("trace", "stats", t, "--columns", SPEC, "--device", "8:16", "--json").stdout)
    assert st["requests"] == 3
    out = tmp_path / "a"
    run = ("--columns", SPEC, "--device", "8:16", "--out", out, "--quiet", "--no-report")
    wattio_cli("run", small, "--trace", t, *run)
    a = json.loads((out / "summary.json").read_text())
    assert a["requests"] == 3
    assert a["devices"]["disk"]["bytes_read"] == (8 + 128) * 512
    assert a["devices"]["disk"]["bytes_written"] == 16 * 512
    assert any(x.startswith("csv: columns time=column `timestamp_s` (seconds)") for x in a["trace"]), a["trace"]
    # The same mapping as [trace] keys gives the same summary.
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL + f'\n[trace]\npath = "export.csv"\ncolumns = "{SPEC}"\ndevice = "8:16"\n')
    wattio_cli("run", cfg, "--out", tmp_path / "b", "--quiet", "--no-report")
    b = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert {k: v for k, v in a.items() if k != "name"} == {k: v for k, v in b.items() if k != "name"}
    # Errors point at the place.
    t.write_text(EXPORT.replace("W,4096", "T,4096"))
    e = _error(wattio_cli("run", small, "--trace", t, *run, check=False))
    assert f"{t}:3:10: op value `T` is not mapped" in e, e


def test_every_python_reader_takes_every_trace_reading_option():
    """The CLI's trace-reading options (`cli_options.read_options`) reach the Python functions
    that read traces by keyword: each must take all of them (a new option once reached
    `wattio disk validate --table` before `validation.validate` took it)."""
    import argparse
    import inspect

    from wattio import trace, validation
    from wattio.cli_options import add_trace_read_options, read_options

    p = argparse.ArgumentParser()
    add_trace_read_options(p)
    keys = set(read_options(p.parse_args([])))
    assert {"lenient", "device", "sort", "sort_window"} <= keys
    for f in [trace.read, trace.stats, trace.convert, trace.slice, validation.validate]:
        params = inspect.signature(f).parameters
        if any(q.kind is inspect.Parameter.VAR_KEYWORD for q in params.values()):
            continue
        missing = keys - set(params)
        # trace.read/stats/convert/slice take no csv options: they read what they detect.
        missing -= {"columns", "delimiter", "header"} if f.__module__ == "wattio.trace" else set()
        assert not missing, f"{f.__module__}.{f.__name__} lacks {sorted(missing)}"
