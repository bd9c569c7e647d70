#!/usr/bin/env python3
"""Live-mode benchmark: wattio pass-through vs nbdkit's file plugin vs qemu-nbd, on the same
image file, with fio's nbd engine (4 KiB random reads and writes at QD 1 and QD 32), plus the
latency a spin-down stack adds over pass-through. Prints the results side by side.

The machine this runs on is usually shared, so besides IOPS (wall clock, noisy) it reports each
server's CPU time per request (user + system time of the server process from
/proc/PID/stat over the fio run, divided by the requests fio completed): a measure of the
server's own cost that other processes on the machine do not inflate much.

    cargo build --release -p wattio-live
    python3 bench/live/bench.py [--runtime 10] [--size-mib 512] [--binary target/release/wattio-live]

Needs fio, nbdkit and qemu-nbd (scripts/apt-packages.txt). Everything runs over Unix sockets.

At QD 1 the round trip is dominated by where the scheduler puts the server's thread relative
to fio's: on a VM an idle vCPU must be woken by an interrupt, which costs tens of µs, while a
wake-up on the same CPU costs a few. Left to the scheduler, servers with different thread
layouts land differently, and the comparison measures that luck. `--cpus S,C` pins every
server to CPU list S and fio to C with taskset: `--cpus 0,0` (same CPU) and `--cpus 0,1`
(split) are the two honest configurations.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURE = os.path.join(REPO, "crates/live/tests/data/fast-spinup-laptop-disk.toml")

JOBS = [
    ("randread", 1),
    ("randread", 32),
    ("randwrite", 1),
    ("randwrite", 32),
]


def wait_socket(path: str, proc: subprocess.Popen, timeout: float = 10.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        time.sleep(0.05)
    raise RuntimeError(f"{path} did not appear")


RAMP_S = 1.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all threads (exited ones included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fio(sock: str, rw: str, qd: int, runtime: float, size: int, pid: int, pin: list[str]) -> dict:
    cmd = [
        *pin,
        "fio",
        "--name=b",
        "--ioengine=nbd",
        f"--uri=nbd+unix:///?socket={sock}",
        f"--rw={rw}",
        "--bs=4k",
        f"--iodepth={qd}",
        f"--size={size}",
        "--time_based",
        f"--runtime={runtime}",
        f"--ramp_time={RAMP_S:g}",
        "--norandommap",
        "--randrepeat=1",
        "--output-format=json",
        "--verify_state_save=0",
    ]
    c0 = cpu_seconds(pid)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    cpu = cpu_seconds(pid) - c0
    job = json.loads(out[out.index("{") :])["jobs"][0]
    side = job["read"] if rw == "randread" else job["write"]
    pct = side["clat_ns"].get("percentile", {})
    # fio's counts start after the ramp; the CPU time covers it too, at about the same rate.
    reqs = side["iops"] * (runtime + RAMP_S)
    return {
        "iops": side["iops"],
        "p50_us": pct.get("50.000000", 0) / 1e3,
        "cpu_us": cpu / reqs * 1e6 if reqs > 0 else 0.0,
    }


def servers(binary: str, image: str, sock: str) -> dict:
    return {
        "wattio": [binary, "serve", "--status", "0", "--image", image, "--socket", sock],
        "nbdkit-file": ["nbdkit", "-f", "-U", sock, "file", f"file={image}"],
        "qemu-nbd": ["qemu-nbd", "-f", "raw", "-t", "-e", "8", "-k", sock, image],
        "wattio+spindown": [
            binary,
            "serve",
            "--status",
            "0",
            "--image",
            image,
            "--socket",
            sock,
            "--model",
            FIXTURE,
            "--no-emulate",
            "--spindown",
            "3600",
        ],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(REPO, "target/release/wattio-live"))
    ap.add_argument("--runtime", type=float, default=10.0)
    ap.add_argument("--size-mib", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3, help="runs per job and server (median kept)")
    ap.add_argument("--dir", default=None, help="where to put the image (default: a temp dir)")
    ap.add_argument(
        "--cpus",
        default=None,
        metavar="SERVER,CLIENT",
        help="pin the servers to CPU list SERVER and fio to CLIENT (taskset), e.g. 0,0 or 0,1",
    )
    args = ap.parse_args()
    pin_server: list[str] = []
    pin_client: list[str] = []
    if args.cpus:
        try:
            server_cpus, client_cpus = args.cpus.split(",")
        except ValueError:
            print(f"--cpus {args.cpus!r}: expected SERVER,CLIENT (e.g. 0,1)", file=sys.stderr)
            return 2
        if shutil.which("taskset") is None:
            print("--cpus needs taskset (util-linux)", file=sys.stderr)
            return 2
        pin_server = ["taskset", "-c", server_cpus]
        pin_client = ["taskset", "-c", client_cpus]
    for tool in ("fio", "nbdkit", "qemu-nbd"):
        if shutil.which(tool) is None:
            print(f"missing {tool}: install it (scripts/apt-packages.txt)", file=sys.stderr)
            return 2
    if not os.path.exists(args.binary):
        print(f"{args.binary}: build it with cargo build --release -p wattio-live", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="wattio-bench-", dir=args.dir)
    image = os.path.join(tmp, "bench.img")
    size = args.size_mib << 20
    with open(image, "wb") as f:
        chunk = os.urandom(1 << 20)
        f.writelines(chunk for _ in range(args.size_mib))
        f.flush()
        # Write-back of the fresh image must not run during the first measurement.
        os.fsync(f.fileno())
    results: dict[str, dict] = {}
    sock = os.path.join(tmp, "s.sock")
    cmds = servers(args.binary, image, sock)
    try:
        # Job-major order: every server runs each job back to back, so background noise on
        # a shared machine hits them alike rather than whichever server ran first.
        for rw, qd in JOBS:
            for rep in range(args.repeat):
                for name, cmd in cmds.items():
                    if name == "wattio+spindown" and qd != 1:
                        continue
                    if os.path.exists(sock):
                        os.unlink(sock)
                    proc = subprocess.Popen(
                        [*pin_server, *cmd], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL
                    )
                    try:
                        wait_socket(sock, proc)
                        r = fio(sock, rw, qd, args.runtime, size, proc.pid, pin_client)
                        results.setdefault(f"{rw} QD{qd}", {}).setdefault(name, []).append(r)
                    finally:
                        proc.terminate()
                        proc.wait(timeout=30)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # The median of each metric over the runs of a (job, server): one noisy neighbour does
    # not decide it.
    for job in results.values():
        for name, runs in job.items():
            job[name] = {
                k: sorted(r[k] for r in runs)[len(runs) // 2] for k in ("iops", "p50_us", "cpu_us")
            }
    names = ["wattio", "nbdkit-file", "qemu-nbd"]
    print(
        f"\n4 KiB random I/O, fio nbd engine, {args.runtime:.0f} s per job, {args.size_mib} MiB "
        f"image, median of {args.repeat} interleaved runs"
        + (
            f", servers on CPU {args.cpus.split(',')[0]}, fio on CPU {args.cpus.split(',')[1]}"
            if args.cpus
            else ""
        )
    )
    print(f"{'job':<15}" + "".join(f"{n + ' IOPS':>18}" for n in names) + f"{'wattio/best':>13}")
    for job, r in results.items():
        row = f"{job:<15}" + "".join(f"{r[n]['iops']:>18.0f}" for n in names)
        best = max(r["nbdkit-file"]["iops"], r["qemu-nbd"]["iops"])
        row += f"{r['wattio']['iops'] / best:>13.2f}"
        print(row)
    print(f"\n{'job':<15}" + "".join(f"{n + ' p50 us':>18}" for n in names))
    for job, r in results.items():
        print(f"{job:<15}" + "".join(f"{r[n]['p50_us']:>18.1f}" for n in names))
    print(f"\n{'job':<15}" + "".join(f"{n + ' CPU us/req':>18}" for n in names))
    for job, r in results.items():
        print(f"{job:<15}" + "".join(f"{r[n]['cpu_us']:>18.1f}" for n in names))
    print("\nspin-down stack overhead (QD1 p50, emulation off, 3600 s timeout):")
    for job in ("randread QD1", "randwrite QD1"):
        r = results[job]
        d = r["wattio+spindown"]["p50_us"] - r["wattio"]["p50_us"]
        print(
            f"  {job:<15} pass-through {r['wattio']['p50_us']:.1f} us, "
            f"spin-down {r['wattio+spindown']['p50_us']:.1f} us, added {d:+.1f} us"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
