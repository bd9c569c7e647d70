"""`wattio capture` from the command line (root, as CI runs): a real block capture read back
by `wattio trace stats`, a file-call capture, sizes, and Ctrl-C in the middle of a capture
leaving no mount, loop device or tracefs instance behind."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from wattio.cli_capture import parse_size

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="capture needs root (CI runs as root)")


def test_sizes_parse_with_binary_units():
    assert parse_size("512M") == 512 << 20
    assert parse_size("1G") == 1 << 30
    assert parse_size("1.5k") == 1536
    assert parse_size("4096") == 4096
    assert parse_size("2GiB") == 2 << 30
    with pytest.raises(Exception, match="not a number"):
        parse_size("lots")


def test_block_capture_is_a_trace_stats_reads(tmp_path, wattio_cli):
    out = tmp_path / "t.parquet"
    p = wattio_cli(
        "capture", "block", "--image", tmp_path / "i.img", "--size", "32M", "--json",
        "--out", out, "--", "dd", "if=/dev/zero", "of=z", "bs=65536", "count=3",
        "oflag=direct", "status=none",
    )
    res = json.loads(p.stdout)
    assert res["exit_code"] == 0 and res["interrupted"] is None
    assert "dd" in res["processes"].values()
    stats = json.loads(wattio_cli("trace", "stats", out, "--json").stdout)
    assert stats["requests"] == res["requests"]
    # Three 64 KiB direct writes, plus the file system's own metadata and journal writes.
    assert stats["requests"] >= 3


def test_a_failing_command_gives_its_status(tmp_path, wattio_cli):
    p = wattio_cli(
        "capture", "block", "--image", tmp_path / "i.img", "--size", "32M",
        "--out", tmp_path / "t.parquet", "--", "sh", "-c", "exit 7", check=False,
    )
    assert p.returncode == 7, p.stderr
    assert "status 7" in p.stderr
    assert (tmp_path / "t.parquet").exists()


def test_missing_image_without_size_is_a_clear_error(tmp_path, wattio_cli):
    p = wattio_cli("capture", "block", "--image", tmp_path / "none.img", "--out",
                   tmp_path / "t.parquet", "--", "true", check=False)
    assert p.returncode == 2
    assert "give --size" in p.stderr


def test_ctrl_c_midway_cleans_up(tmp_path):
    img = tmp_path / "i.img"
    proc = subprocess.Popen(
        [sys.executable, "-m", "wattio.cli", "capture", "block", "--image", str(img), "--size",
         "32M", "--out", str(tmp_path / "t.parquet"), "--", "sleep", "60"],
        stderr=subprocess.PIPE, text=True,
    )
    mnt = f"wattio-capture-{proc.pid}-mnt"
    deadline = time.monotonic() + 60
    while mnt not in Path("/proc/self/mounts").read_text():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the capture never mounted its image"
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert mnt not in Path("/proc/self/mounts").read_text()
    lo = subprocess.run(["losetup", "-j", str(img)], check=False, capture_output=True,
                        text=True).stdout
    for _ in range(50):
        if not lo.strip():
            break
        time.sleep(0.1)
        lo = subprocess.run(["losetup", "-j", str(img)], check=False, capture_output=True,
                        text=True).stdout
    assert lo.strip() == ""
    for root in ["/sys/kernel/tracing/instances", "/sys/kernel/debug/tracing/instances"]:
        if os.path.isdir(root):
            assert not [n for n in os.listdir(root) if n.startswith(f"wattio-capture-{proc.pid}-")]


def test_a_command_that_cannot_run_is_named_and_no_trace_is_written(tmp_path, wattio_cli):
    # Under strace the command's absence would only show as strace's exit status, after
    # an empty trace was written.
    out = tmp_path / "c.parquet"
    p = wattio_cli("capture", "files", "--out", out, "--", tmp_path / "nope", check=False)
    assert p.returncode == 2
    assert f"cannot run `{tmp_path / 'nope'}`: no such file" in p.stderr
    assert not out.exists()


def test_file_calls_capture(tmp_path, wattio_cli):
    data = tmp_path / "d"
    data.write_bytes(bytes(8192))
    out = tmp_path / "c.parquet"
    prog = f"import os; fd = os.open('{data}', os.O_RDONLY); os.pread(fd, 123, 4000); os.close(fd)"
    p = wattio_cli("capture", "files", "--json", "--out", out, "--", sys.executable, "-c", prog)
    res = json.loads(p.stdout)
    assert res["exit_code"] == 0
    t = pq.read_table(out)
    files = json.loads(pq.read_metadata(out).metadata[b"wattio.files"])
    fid = files.index(str(data))
    rows = [r for r in t.to_pylist() if r["file"] == fid]
    assert [(r["op"], r["offset"], r["len"], r["call_site"]) for r in rows] == [(0, 4000, 123, 3)]
