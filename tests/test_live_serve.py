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

import pandas as pd
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


def _start(
    tmp_path: Path, *extra: str, sigint_ignored: bool = False
) -> tuple[subprocess.Popen, Path]:
    sock = tmp_path / "s.sock"
    cmd = _wattio("serve", "--socket", str(sock), "--status", "0", *extra)
    if sigint_ignored:
        # As a shell starts a script's background job: SIG_IGN, inherited across exec.
        cmd = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *cmd]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
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
    # --poll-us 0: the reader blocks at once (the other tests use the default poll).
    proc, sock = _start(
        tmp_path, "--image", str(img), "--out", str(out), "--capture", str(cap), "--poll-us", "0"
    )
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
    live = s["live"]
    # One write; two flushes: the explicit one and qemu's flush when it closes the image.
    assert live["requests"]["writes"] == 1
    assert live["requests"]["flushes"] == 2
    assert live["requests"]["bytes_written"] == 8192
    assert s["errors"] == 0
    # A pass-through device: the simulator's per-device keys, real I/O counted, no energy.
    dev = s["devices"]["disk.img"]
    assert (dev["model"], dev["energy_j"], dev["bytes_written"]) == ("pass-through", 0.0, 8192)
    assert live["devices"]["disk.img"] == {"emulated": False, "final_state": "real"}
    lines = [ln.split() for ln in cap.read_text().splitlines() if not ln.startswith("#")]
    assert ["write", "4096", "8192"] in [ln[1:4] for ln in lines]
    assert len(lines) == s["requests"]


def test_serve_stops_cleanly_on_sigint_even_when_started_with_it_ignored(tmp_path):
    """A background job of a non-interactive shell starts with SIGINT ignored; the server
    still stops on it, and writes its summary."""
    img = tmp_path / "disk.img"
    img.write_bytes(bytes(1 << 20))
    out = tmp_path / "out"
    proc, _ = _start(
        tmp_path,
        "--image",
        str(img),
        "--out",
        str(out),
        sigint_ignored=True,
    )
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("SIGINT did not stop wattio serve") from None
    assert proc.returncode == 0, err
    assert json.loads((out / "summary.json").read_text())["requests"] == 0


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
        "1.0",
        "--out",
        str(out),
    )
    uri = f"nbd+unix:///disk.img?socket={sock}"
    subprocess.run(
        ["qemu-io", "-f", "raw", "-c", "read 0 4096", uri], check=True, capture_output=True
    )
    # idle 1 s, then a 0.1 s spin-down: the disk ends in standby. 1 s, not less: qemu-io's
    # closing flush may come a few hundred ms after its read on a loaded machine, and a
    # shorter timeout then spins the disk down twice.
    time.sleep(1.5)
    _stop(proc)
    s = json.loads((out / "summary.json").read_text())
    (name,) = s["devices"]
    dev = s["devices"][name]
    assert s["live"]["devices"][name] == {"emulated": True, "final_state": "standby"}
    assert dev["entries"]["spin_down"] == 1
    # 0.1 s of spin-down at 0.065 J / 0.1 s; the wall clock ends it a timer wake-up late.
    assert dev["residency_s"]["spin_down"] == pytest.approx(0.1, abs=0.005)
    assert dev["energy_by_state_j"]["spin_down"] == pytest.approx(0.065, rel=0.05)
    assert dev["energy_j"] == pytest.approx(sum(dev["energy_by_state_j"].values()), rel=1e-9)
    assert sum(dev["residency_s"].values()) == pytest.approx(s["duration_s"], rel=1e-6)
    ledger = (out / "ledger.csv").read_text().splitlines()
    assert ledger[0] == "device,slot,is_transition,watts,residency_s,entries,energy_j"
    assert len(ledger) == 1 + len(dev["residency_s"])
    energy = pd.read_parquet(out / "energy.parquet")
    assert energy["energy_j"].sum() == pytest.approx(dev["energy_j"], rel=1e-9)


@pytest.mark.skipif(shutil.which("qemu-io") is None, reason="qemu-io not installed")
def test_serve_with_emulated_ssd_writes_the_per_operation_energy_row(tmp_path):
    """An emulated SSD charges NAND energy per operation on top of state power; the live
    energy.parquet and ledger.csv carry it as the simulator's `per_operation` row, so the
    tables sum to summary.json's energy as a simulated run's do."""
    img = tmp_path / "ssd.img"
    img.write_bytes(bytes(1 << 20))
    out = tmp_path / "out"
    proc, sock = _start(
        tmp_path, "--image", str(img), "--model", "samsung-870-evo-1tb", "--out", str(out)
    )
    uri = f"nbd+unix:///ssd.img?socket={sock}"
    subprocess.run(
        ["qemu-io", "-f", "raw", "-c", "write -P 0x5a 0 65536", "-c", "read -P 0x5a 0 65536", uri],
        check=True,
        capture_output=True,
    )
    _stop(proc)
    s = json.loads((out / "summary.json").read_text())
    (name,) = s["devices"]
    dev = s["devices"][name]
    energy = pd.read_parquet(out / "energy.parquet")
    op = energy[energy["state"] == "per_operation"]
    assert op["entries"].tolist() == [dev["ios"]] and dev["ios"] >= 2
    assert op["residency_ns"].tolist() == [0] and op["energy_j"].iloc[0] > 0
    assert energy["energy_j"].sum() == pytest.approx(dev["energy_j"], rel=1e-9)
    ledger = (out / "ledger.csv").read_text().splitlines()
    assert any(line.startswith(f"{name},per_operation,false,0,0,{dev['ios']},") for line in ledger)


CONFIG = """
catalogue = [{catalogue!r}]

[run]
name = "served-config"
seed = 7

[[device]]
name = "laptop"
model = "fast-spinup-laptop-disk"

[[function]]
kind = "spindown"
policy = "fixed"
timeout_s = 1.0
"""


def _serve_laptop(
    tmp_path: Path, function: str | None = None
) -> tuple[subprocess.Popen, Path, Path, Path]:
    """Serve CONFIG on a 1 MiB `laptop` image, its spin-down layer replaced by `function` (a
    [[function]] body) if given; returns (server, socket, image, output directory)."""
    text = CONFIG.format(catalogue=str(FIXTURE.parent))
    if function is not None:
        text = text.replace('kind = "spindown"\npolicy = "fixed"\ntimeout_s = 1.0', function)
        assert function in text
    cfg = tmp_path / "run.toml"
    cfg.write_text(text)
    img = tmp_path / "laptop.img"
    img.write_bytes(bytes(1 << 20))
    out = tmp_path / "out"
    proc, sock = _start(tmp_path, str(cfg), "--image", f"laptop={img}", "--out", str(out))
    return proc, sock, img, out


def _qemu_io(sock: Path, *commands: str, **kw) -> subprocess.CompletedProcess:
    """qemu-io on the `laptop` export, one -c per command."""
    args = [a for c in commands for a in ("-c", c)]
    uri = f"nbd+unix:///laptop?socket={sock}"
    return subprocess.run(
        ["qemu-io", "-f", "raw", *args, uri], check=False, capture_output=True, text=True, **kw
    )


@pytest.mark.skipif(shutil.which("qemu-io") is None, reason="qemu-io not installed")
def test_serve_config_drives_the_configured_stack_and_sigterm_writes_the_sim_schema(tmp_path):
    """The config `wattio run` takes, served live: qemu-io writes and reads through the
    spin-down stack and the emulated laptop disk; SIGTERM writes the simulator's summary."""
    proc, sock, img, out = _serve_laptop(tmp_path)
    r = _qemu_io(sock, "write -P 0xa5 0 65536", "read -P 0xa5 0 65536")
    assert r.returncode == 0, r.stderr
    assert "Pattern verification failed" not in r.stdout
    time.sleep(1.5)  # idle 1 s, then the 0.1 s spin-down: the disk ends in standby
    _stop(proc)
    assert img.read_bytes()[:65536] == b"\xa5" * 65536
    s = json.loads((out / "summary.json").read_text())
    # The simulator's top-level keys, in its schema (with the clean unload every shutdown
    # ends with), plus the live section.
    sim_keys = {
        "wattio_version", "name", "seed", "duration_s", "requests", "errors",
        "mean_latency_ms", "p50_latency_ms", "p99_latency_ms", "max_latency_ms",
        "mean_power_wait_ms", "energy_j", "devices", "functions", "trace", "unload",
    }  # fmt: skip
    assert set(s) == sim_keys | {"live"}
    # A spin-down layer has nothing to write back: the unload is over at once (to the poll).
    assert 0 < s["unload"]["started_s"] <= s["duration_s"]
    assert 0 <= s["unload"]["took_s"] < 0.1
    assert (s["name"], s["seed"], s["errors"]) == ("served-config", 7, 0)
    dev = s["devices"]["laptop"]
    assert dev["model"] == "fast-spinup-laptop-disk"
    # qemu-io's write and read (and the flush it sends when it closes the image).
    assert (dev["bytes_written"], dev["bytes_read"]) == (65536, 65536)
    assert s["live"]["requests"]["writes"] == 1 and s["live"]["requests"]["reads"] == 1
    assert dev["entries"]["spin_down"] == 1 and dev["spin_ups"] == 0
    assert s["live"]["devices"]["laptop"]["final_state"] == "standby"
    assert s["functions"][0]["counters"]["spin_down_commands"] == 1
    assert s["energy_j"] == pytest.approx(sum(dev["energy_by_state_j"].values()), rel=1e-9)
    assert sum(dev["residency_s"].values()) == pytest.approx(s["duration_s"], rel=1e-6)
    assert dev["residency_s"]["spin_down"] == pytest.approx(0.1, abs=0.005)


@pytest.mark.skipif(shutil.which("qemu-io") is None, reason="qemu-io not installed")
def test_serve_config_runs_a_python_function_live(tmp_path):
    """The same Python spin-down class `wattio run` uses (examples/spindown.py), live: it
    sees the guest's requests, spins the emulated disk down after 1 s idle, and its
    counters reach the summary."""
    examples = Path(__file__).resolve().parent.parent / "examples"
    proc, sock, img, out = _serve_laptop(
        tmp_path,
        f'kind = "python"\nclass = "{examples / "spindown.py"}:FixedTimeout"\n'
        "params = { timeout_s = 1.0 }",
    )
    r = _qemu_io(sock, "write -P 0x3c 8192 4096")
    assert r.returncode == 0, r.stderr
    time.sleep(1.5)  # idle 1 s, then the 0.1 s spin-down
    _stop(proc)
    assert img.read_bytes()[8192 : 8192 + 4096] == b"\x3c" * 4096
    s = json.loads((out / "summary.json").read_text())
    assert s["functions"] == [{"name": "python-fixed", "counters": {"spin_down_commands": 1.0}}]
    dev = s["devices"]["laptop"]
    assert dev["entries"]["spin_down"] == 1
    assert s["live"]["devices"]["laptop"]["final_state"] == "standby"


@pytest.mark.skipif(shutil.which("qemu-io") is None, reason="qemu-io not installed")
def test_a_python_function_hears_the_clean_unload_once_at_shutdown(tmp_path):
    """`on_stop` reaches a Python function when the server shuts down (after the guest's
    requests, before the summary is built), exactly once; what its `unload_left` then says
    is in the summary and on stderr."""
    (tmp_path / "unload.py").write_text(
        "import wattio\n\n\n"
        "class Unload(wattio.Function):\n"
        "    name = 'unload'\n\n"
        "    def __init__(self):\n"
        "        self.stops = 0\n"
        "        self.requests_after = 0\n\n"
        "    def on_stop(self, now, out):\n"
        "        self.stops += 1\n\n"
        "    def on_request(self, now, io, out):\n"
        "        self.requests_after += self.stops\n"
        "        out.submit(io)\n\n"
        "    def unload_left(self):\n"
        "        return f'kept {self.stops} page(s)'\n\n"
        "    def counters(self):\n"
        "        return {'stops': float(self.stops), 'requests_after_stop': float(self.requests_after)}\n"
    )
    proc, sock, _, out = _serve_laptop(tmp_path, 'kind = "python"\nclass = "unload.py:Unload"')
    r = _qemu_io(sock, "write -P 0x5a 0 4096")
    assert r.returncode == 0, r.stderr
    err = _stop(proc)
    s = json.loads((out / "summary.json").read_text())
    assert s["functions"] == [
        {"name": "unload", "counters": {"stops": 1.0, "requests_after_stop": 0.0}}
    ]
    assert s["unload"]["left"] == ["unload: kept 1 page(s)"]
    assert "the clean unload left work undone: unload: kept 1 page(s)" in err


@pytest.mark.skipif(shutil.which("qemu-io") is None, reason="qemu-io not installed")
def test_a_python_function_that_raises_ends_the_session_with_its_exception(tmp_path):
    (tmp_path / "broken.py").write_text(
        "import wattio\n\n\n"
        "class Broken(wattio.Function):\n"
        "    def on_request(self, now, io, out):\n"
        "        raise ZeroDivisionError('boom in on_request')\n"
    )
    proc, sock, _, _ = _serve_laptop(tmp_path, 'kind = "python"\nclass = "broken.py:Broken"')
    # The request that raised is never answered; the server ends the session and the
    # client sees the connection close.
    _qemu_io(sock, "read 0 4096", timeout=60)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode not in (0, None), err
    assert "ZeroDivisionError: boom in on_request" in err


def test_serve_config_with_image_only_options_is_a_user_error(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text(CONFIG.format(catalogue=str(FIXTURE.parent)))
    img = tmp_path / "laptop.img"
    img.write_bytes(bytes(4096))
    for extra, expect in [
        (["--image", str(img)], "DEVICE=PATH"),
        (["--image", f"nosuch={img}"], "device `laptop` has no image"),
        (["--image", f"laptop={img}", "--image", f"nosuch={img}"], "no device named `nosuch`"),
        (["--image", f"laptop={img}", "--spindown", "1"], "spindown"),
    ]:
        r = subprocess.run(
            _wattio("serve", str(cfg), "--socket", str(tmp_path / "s"), *extra),
            check=False,
            capture_output=True,
            text=True,
        )
        assert r.returncode == 2, r.stderr
        assert expect in r.stderr, r.stderr


def test_replay_reports_every_request_of_a_capture(tmp_path):
    img = tmp_path / "disk.img"
    img.write_bytes(os.urandom(1 << 20))
    proc, sock = _start(tmp_path, "--image", str(img), "--name", "d")
    trace = tmp_path / "t.txt"
    trace.write_text("0 read 0 4096 0 0\n1000000 write 8192 4096 0 0\n2000000 flush 0 0 0 0\n")
    r = subprocess.run(
        _wattio(
            "replay", str(trace), "--nbd", f"nbd+unix:///d?socket={sock}", "--speed", "2", "--json"
        ),
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


def _certificates(pki: Path) -> None:
    """A CA and a server certificate for 127.0.0.1 signed by it (libnbd reads ca-cert.pem)."""
    pki.mkdir()

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=pki, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca-cert.pem",
        "-days",
        "2",
        "-subj",
        "/CN=wattio test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
    )
    ssl("req", *ec, "-keyout", "server-key.pem", "-out", "server.csr", "-subj", "/CN=localhost")
    (pki / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    ssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca-cert.pem",
        "-CAkey",
        "ca-key.pem",
        "-CAcreateserial",
        "-out",
        "server-cert.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    )


@pytest.mark.skipif(
    shutil.which("nbdinfo") is None or shutil.which("openssl") is None,
    reason="nbdinfo (libnbd-bin) or openssl not installed",
)
def test_serve_tls_require_serves_nbdinfo_over_tls_and_refuses_plain_clients(tmp_path):
    import socket

    pki = tmp_path / "pki"
    _certificates(pki)
    img = tmp_path / "disk.img"
    img.write_bytes(bytes(3 << 20))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        _wattio(
            "serve",
            "--image",
            str(img),
            "--listen",
            f"127.0.0.1:{port}",
            "--status",
            "0",
            "--tls",
            "require",
            "--tls-certificate",
            str(pki / "server-cert.pem"),
            "--tls-key",
            str(pki / "server-key.pem"),
        ),
        stderr=subprocess.PIPE,
        text=True,
    )
    t0 = time.time()
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, proc.stderr.read()
            assert time.time() - t0 < 20, "server did not come up"
            time.sleep(0.05)
    tls = subprocess.run(
        ["nbdinfo", f"nbds://127.0.0.1:{port}/disk.img?tls-certificates={pki}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert tls.returncode == 0, tls.stderr
    assert "export-size: 3145728" in tls.stdout
    plain = subprocess.run(
        ["nbdinfo", f"nbd://127.0.0.1:{port}/disk.img"], capture_output=True, text=True, check=False
    )
    assert plain.returncode != 0
    _stop(proc)


def test_serve_refuses_a_non_loopback_listen_without_allow_remote(tmp_path):
    img = tmp_path / "disk.img"
    img.write_bytes(bytes(1 << 20))
    r = subprocess.run(
        _wattio("serve", "--image", str(img), "--listen", "0.0.0.0:0", "--status", "0"),
        check=False,
        capture_output=True,
        text=True,
    )
    assert r.returncode != 0
    assert "--allow-remote" in r.stderr


def test_replay_reads_the_trace_formats_run_reads(tmp_path):
    """An MSR file (detected) and a CSV export through --columns replay like a capture."""
    img = tmp_path / "disk.img"
    img.write_bytes(os.urandom(1 << 20))
    proc, sock = _start(tmp_path, "--image", str(img), "--name", "d")
    msr = tmp_path / "hm_0.csv"
    msr.write_text(
        "128166372000000000,hm,0,Read,0,4096,100\n"
        "128166372000100000,hm,0,Write,8192,4096,100\n"
        "128166372000200000,hm,0,Read,4096,4096,100\n"
    )
    export = tmp_path / "export.txt"
    export.write_text("t_ms;rw;lba;n\n0;R;0;8\n5;W;16;8\n")
    runs = [
        [str(msr)],
        [
            str(export),
            "--columns",
            "time=t_ms:ms,op=rw,offset=lba:sectors,size=n:sectors",
            "--delimiter",
            ";",
        ],
    ]
    reps = []
    for args in runs:
        r = subprocess.run(
            _wattio("replay", *args, "--nbd", f"nbd+unix:///d?socket={sock}", "--json"),
            check=False,
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
        reps.append(json.loads(r.stdout))
    _stop(proc)
    assert [(x["sent"], x["errors"]) for x in reps] == [(3, 0), (2, 0)]


_CACHE_CFG = (
    "catalogue = [{cat!r}]\n\n[run]\ncheck_data = {check}\n\n"
    '[[device]]\nname = "laptop"\nmodel = "fast-spinup-laptop-disk"\n\n'
    '[[device]]\nname = "flash"\nmodel = "sandisk-ultra-cf-2gb"\n\n'
    '[[function]]\nkind = "python"\nclass = "{cls}"\n'
    'params = {{ blocks = 64, disk = "laptop", flash = "flash" }}\n'
)


def _serve_cache(tmp_path: Path, cls: str, check_data: bool = False):
    """Serve the laptop disk with a 2 GB card in front, through the Python cache class `cls`
    (`file.py:Class`), on two fresh 1 MiB images: (server, socket, disk, card, output dir)."""
    cfg = tmp_path / "run.toml"
    cfg.write_text(_CACHE_CFG.format(cat=str(FIXTURE.parent), cls=cls, check=str(check_data).lower()))
    disk, flash = tmp_path / "laptop.img", tmp_path / "flash.img"
    disk.write_bytes(bytes(1 << 20))
    flash.write_bytes(bytes(1 << 20))
    out = tmp_path / "out"
    proc, sock = _start(
        tmp_path, str(cfg), "--image", f"laptop={disk}", "--image", f"flash={flash}", "--out", str(out)
    )
    return proc, sock, disk, flash, out


@pytest.mark.skipif(shutil.which("qemu-io") is None, reason="qemu-io not installed")
def test_the_python_read_cache_moves_real_bytes_live(tmp_path):
    """examples/read_cache.py served live: a miss's blocks are copied through the function's
    scratch buffers onto the card, and the hit after it is answered from the card's bytes
    (docs/functions/python.md, "I/O of its own"). The card image is then changed behind the
    server's back: the next read returns the changed bytes, so the hit really read the card."""
    examples = Path(__file__).resolve().parent.parent / "examples"
    proc, sock, disk, flash, out = _serve_cache(tmp_path, f"{examples / 'read_cache.py'}:ReadCache")
    r = _qemu_io(sock, "write -P 0x5a 8192 8192", "read -P 0x5a 8192 8192", "read -P 0x5a 8192 8192")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Pattern verification failed" not in r.stdout
    # The two blocks land in slots 0 and 1 of the card (the fills run behind the reply, so
    # the second read may still have missed).
    deadline = time.monotonic() + 10
    while flash.read_bytes()[:8192] != b"\x5a" * 8192:
        assert time.monotonic() < deadline, "the fills never reached the card"
        time.sleep(0.05)
    with open(flash, "r+b") as f:  # the card's copy of block 3 (slot 1) changed under the cache
        f.seek(4096)
        f.write(b"\xa5" * 4096)
    r = _qemu_io(sock, "read -P 0xa5 12288 4096")
    _stop(proc)
    assert r.returncode == 0, r.stderr
    assert "Pattern verification failed" not in r.stdout
    assert disk.read_bytes()[8192:16384] == b"\x5a" * 8192
    s = json.loads((out / "summary.json").read_text())
    c = s["functions"][0]["counters"]
    # The first read missed; the second hit unless it came before the fills landed; the last hit.
    hits = int(c["hits"])
    assert (c["misses"] + hits, c["fills"], c["fills_dropped"]) == (3, 2, 0) and hits >= 1
    assert s["errors"] == 0
    # The card served the two fills and a block read per block of each hit.
    card = s["devices"]["flash"]
    blocks_read = 1 + 2 * (hits - 1)
    assert (card["ios"], card["bytes_written"], card["bytes_read"]) == (2 + blocks_read, 8192, 4096 * blocks_read)


@pytest.mark.skipif(shutil.which("qemu-io") is None, reason="qemu-io not installed")
@pytest.mark.parametrize("broken", [False, True], ids=["read-cache", "stale-cache"])
def test_serve_checks_the_data_live_with_run_check_data(tmp_path, broken):
    """[run] check_data served live: the read cache's reads are checked (a miss, a hit once the
    fills landed, a read after a rewrite of one block); a variant that does not invalidate
    cached blocks on a write answers the last read from the card's old copy, and the session
    ends with the checker's verdict as its error."""
    examples = Path(__file__).resolve().parent.parent / "examples"
    cls = f"{examples / 'read_cache.py'}:ReadCache"
    if broken:
        cls = f"{Path(__file__).resolve().parent / 'broken_caches.py'}:Stale"
    proc, sock, _, flash, out = _serve_cache(tmp_path, cls, check_data=True)
    r = _qemu_io(sock, "write -P 0x5a 8192 8192", "read -P 0x5a 8192 8192")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 10
    while flash.read_bytes()[:8192] != b"\x5a" * 8192:  # the fills landed
        assert time.monotonic() < deadline, "the fills never reached the card"
        time.sleep(0.05)
    r = _qemu_io(sock, "read -P 0x5a 8192 8192", "write -P 0xa5 8192 4096", "read 8192 8192")
    assert r.returncode == 0, r.stderr
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    if broken:
        assert proc.returncode != 0
        assert "a function misbehaved: integrity: host read" in err, err
        assert "block 2 (bytes 8192..12288) holds v1" in err, err
        return
    assert proc.returncode == 0, err
    s = json.loads((out / "summary.json").read_text())
    # Three reads of two blocks, every block checked; the second a hit, the third a miss (the
    # write dropped block 2's copy) whose block 2 came from the disk's new write.
    assert s["data_check"] == {"block_bytes": 4096, "reads_checked": 3, "blocks_checked": 6, "blocks_unverified": 0}
    c = s["functions"][0]["counters"]
    assert (c["hits"], c["misses"]) == (1, 2)


def _python_on_laptop(tmp_path: Path, cls: str, params: str = "", run: str = "") -> tuple[Path, Path]:
    """A config serving the emulated laptop disk through the Python class `cls` (`file.py:Class`)
    with `params` (a TOML inline table) and `run` (a `[run]` table), and a fresh 1 MiB image:
    (config, image)."""
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        f"catalogue = [{str(FIXTURE.parent)!r}]\n\n{run}\n"
        '[[device]]\nname = "laptop"\nmodel = "fast-spinup-laptop-disk"\n\n'
        f'[[function]]\nkind = "python"\nclass = "{cls}"\n' + (f"params = {params}\n" if params else "")
    )
    img = tmp_path / "laptop.img"
    img.write_bytes(bytes(1 << 20))
    return cfg, img


@pytest.mark.skipif(shutil.which("qemu-io") is None, reason="qemu-io not installed")
@pytest.mark.parametrize("check, claim", [(False, None), (True, None), (True, "all")], ids=["unchecked", "leak", "claimed"])
def test_serve_reports_scratch_buffers_a_function_keeps_and_a_checked_session_fails_a_leak(tmp_path, check, claim):
    """tests/broken_caches.py's Hoarder served: two host reads, each followed by a read-ahead
    into a scratch buffer it keeps. The live summary counts the two buffers held and what the
    function claims; with check_data, holding more than it claims ends the session with the
    leak as its error (as in simulation), and an honest scratch_buffers() passes."""
    hoarder = Path(__file__).resolve().parent / "broken_caches.py"
    params = "" if claim is None else f'{{ claim = "{claim}" }}'
    cfg, img = _python_on_laptop(tmp_path, f"{hoarder}:Hoarder", params, f"[run]\ncheck_data = {str(check).lower()}\n")
    out = tmp_path / "out"
    proc, sock = _start(tmp_path, str(cfg), "--image", f"laptop={img}", "--out", str(out))
    r = _qemu_io(sock, "read 0 4096", "read 65536 4096")
    assert r.returncode == 0, r.stderr
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    if check and claim is None:
        assert proc.returncode != 0
        assert ("data check: 2 scratch buffer(s) alive and idle at the end, the functions hold at most 0 "
                "(python 0): a leak") in err, err
        return
    assert proc.returncode == 0, err
    live = json.loads((out / "summary.json").read_text())["live"]
    assert (live["scratch_buffers_held"], live["scratch_buffers_claimed"]) == (2, 2 if claim else 0)


@pytest.mark.skipif(shutil.which("qemu-io") is None, reason="qemu-io not installed")
def test_a_python_function_s_metadata_persists_on_the_image_across_sessions(tmp_path):
    """tests/python_ledger.py served twice on the same image: the first session counts three
    writes and saves the count (FUA) in the record it reserved at the image's end when it shuts
    down; the second loads it at start and goes on from there."""
    ledger = Path(__file__).resolve().parent / "python_ledger.py"
    cfg, img = _python_on_laptop(tmp_path, f"{ledger}:Ledger", "{ every = 100 }")
    counters = []
    for n, out in [(3, tmp_path / "one"), (2, tmp_path / "two")]:
        proc, sock = _start(tmp_path, str(cfg), "--image", f"laptop={img}", "--out", str(out))
        r = _qemu_io(sock, *[f"write -P {i + 1} {i * 4096} 4096" for i in range(n)])
        assert r.returncode == 0, r.stderr
        _stop(proc)
        counters.append(json.loads((out / "summary.json").read_text())["functions"][0]["counters"])
    assert [(c["loaded"], c["count"], c["saves"], c["verified"]) for c in counters] == [(0, 3, 1, 1), (3, 5, 1, 1)]
    record = img.read_bytes()[(1 << 20) - 4096:]
    assert record[:20] == b"WATTIOLEDGER" + (5).to_bytes(8, "little")
