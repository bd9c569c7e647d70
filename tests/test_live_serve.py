"""`wattio serve` and `wattio replay` end to end: real NBD peers write through the export, SIGTERM
shuts the server down cleanly with summary.json, ledger.csv and the capture written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

FIXTURE = (
    Path(__file__).resolve().parent.parent / "crates/live/tests/data/fast-spinup-laptop-disk.toml"
)


def _wattio(*args: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "import sys; from wattio.cli import main; sys.exit(main())",
        *args,
    ]


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    sock = tmp_path / "s.sock"
    proc = subprocess.Popen(
        _wattio("serve", "--socket", str(sock), "--status", "0", *extra),
        stderr=subprocess.PIPE,
        text=True,
    )
    t0 = time.time()
    while not sock.exists():
        if proc.poll() is not None:
            raise AssertionError(f"wattio serve exited: {proc.stderr.read()}")
        if time.time() - t0 > 20:
            proc.kill()
            raise AssertionError("socket did not appear")
        time.sleep(0.05)
    return proc, sock


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


@pytest.mark.skipif(shutil.which("qemu-io") is None, reason="qemu-io not installed")
def test_serve_image_writes_reach_the_file_and_sigterm_writes_summary(tmp_path):
    img = tmp_path / "disk.img"
    img.write_bytes(bytes(1 << 20))
    out = tmp_path / "out"
    cap = tmp_path / "cap.txt"
    proc, sock = _start(tmp_path, "--image", str(img), "--out", str(out), "--capture", str(cap))
    uri = f"nbd+unix:///disk.img?socket={sock}"
    r = subprocess.run(
        [
            "qemu-io",
            "-f",
            "raw",
            "-c",
            "write -P 0x5a 4096 8192",
            "-c",
            "flush",
            "-c",
            "read -P 0x5a 4096 8192",
            uri,
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "Pattern verification failed" not in r.stdout
    _stop(proc)
    data = img.read_bytes()
    assert data[4096 : 4096 + 8192] == b"\x5a" * 8192
    assert data[:4096] == bytes(4096)
    s = json.loads((out / "summary.json").read_text())
    assert s["mode"] == "live"
    # One write; two flushes: the explicit one and qemu's flush when it closes the image.
    assert s["requests"]["writes"] == 1
    assert s["requests"]["flushes"] == 2
    assert s["requests"]["bytes_written"] == 8192
    assert s["requests"]["errors"] == 0
    lines = [ln.split() for ln in cap.read_text().splitlines() if not ln.startswith("#")]
    assert ["write", "4096", "8192"] in [ln[1:4] for ln in lines]
    assert len(lines) == s["requests"]["total"]


@pytest.mark.skipif(shutil.which("qemu-io") is None, reason="qemu-io not installed")
def test_serve_with_emulated_disk_accounts_energy_in_the_ledger(tmp_path):
    img = tmp_path / "disk.img"
    img.write_bytes(bytes(1 << 20))
    out = tmp_path / "out"
    proc, sock = _start(
        tmp_path,
        "--image",
        str(img),
        "--model",
        str(FIXTURE),
        "--spindown",
        "0.2",
        "--out",
        str(out),
    )
    uri = f"nbd+unix:///disk.img?socket={sock}"
    subprocess.run(
        ["qemu-io", "-f", "raw", "-c", "read 0 4096", uri], check=True, capture_output=True
    )
    time.sleep(0.6)  # idle 0.2 s, then a 0.1 s spin-down: the disk ends in standby
    _stop(proc)
    s = json.loads((out / "summary.json").read_text())
    (dev,) = s["devices"]
    assert dev["emulated"] is True
    assert dev["final_state"] == "standby"
    rows = {r["slot"]: r for r in dev["ledger"]}
    assert rows["spin_down"]["entries"] == 1
    # 0.1 s of spin-down at 0.065 J / 0.1 s; the wall clock ends it a timer wake-up late.
    assert rows["spin_down"]["residency_s"] == pytest.approx(0.1, abs=0.005)
    assert rows["spin_down"]["energy_j"] == pytest.approx(0.065, rel=0.05)
    total = sum(r["energy_j"] for r in dev["ledger"])
    assert dev["energy_j"] == pytest.approx(total, rel=1e-9)
    ledger = (out / "ledger.csv").read_text().splitlines()
    assert ledger[0] == "device,slot,is_transition,watts,residency_s,entries,energy_j"
    assert len(ledger) == 1 + len(dev["ledger"])


def test_replay_reports_every_request_of_a_capture(tmp_path):
    img = tmp_path / "disk.img"
    img.write_bytes(os.urandom(1 << 20))
    proc, sock = _start(tmp_path, "--image", str(img), "--name", "d")
    trace = tmp_path / "t.txt"
    trace.write_text("0 read 0 4096 0 0\n1000000 write 8192 4096 0 0\n2000000 flush 0 0 0 0\n")
    r = subprocess.run(
        _wattio("replay", str(trace), "--nbd", f"nbd+unix:///d?socket={sock}", "--speed", "2"),
        check=False,
        capture_output=True,
        text=True,
    )
    _stop(proc)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert (rep["sent"], rep["errors"], rep["skipped"]) == (3, 0, 0)
    assert rep["latency_p50_us"] > 0


def test_serve_without_image_or_socket_is_a_user_error(tmp_path):
    r = subprocess.run(
        _wattio("serve", "--socket", str(tmp_path / "s")),
        check=False,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert "--image" in r.stderr
