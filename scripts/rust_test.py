#!/usr/bin/env python3
"""`make rust-test`: every Rust test of the workspace (`cargo test --release`), in two streams
at once.

The live crate's tests mostly wait (on emulated disks' service times, fio's think time,
servers starting and syncing) while the other crates' tests compute, so the live tests but
the soak run in a background thread beside the other crates' tests, and the soak (which
computes as much as it waits) after those. The live tests count events rather than wait
fixed times, and pass with both cores kept busy beside them.

Everything is built once by one `cargo test --workspace --no-run`, and the test binaries it
reports are run directly, each in its package's directory as cargo runs it. Two cargo
invocations selecting different packages (`-p wattio-live`, `--exclude wattio-live`) would
resolve different features for shared dependencies and rebuild them (minutes of CI); the doc
tests then run through cargo with the same `--workspace` selection. The background stream's
output is printed when it ends; any binary failing fails the stage, named at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIVE = "wattio-live"
SOAK = "soak"  # the live crate's soak test target, run last in the foreground stream

CARGO = ["cargo", "test", "--release", "--workspace", "-q"]


def binaries() -> list[dict]:
    """Build every test target; (package, target, executable, package dir) of each."""
    p = subprocess.run(
        [*CARGO, "--no-run", "--message-format=json-render-diagnostics"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False,
    )
    if p.returncode != 0:
        sys.exit(p.returncode)
    out = []
    for line in p.stdout.splitlines():
        m = json.loads(line)
        if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
            manifest = Path(m["manifest_path"])
            out.append({
                "package": package_name(manifest),
                "target": m["target"]["name"],
                "kind": m["target"]["kind"][0],
                "exe": m["executable"],
                "dir": str(manifest.parent),
            })
    return out


def package_name(manifest: Path) -> str:
    """The package name of a Cargo.toml."""
    return tomllib.loads(manifest.read_text())["package"]["name"]


def run(b: dict, out) -> int:
    """One test binary as cargo runs it: in its package's directory, quiet."""
    print(f"     Running {b['package']} {b['kind']} {b['target']}", file=out, flush=True)
    env = dict(os.environ, CARGO_MANIFEST_DIR=b["dir"], CARGO_PKG_NAME=b["package"])
    return subprocess.run([b["exe"], "-q"], cwd=b["dir"], env=env, stdout=out,
                          stderr=subprocess.STDOUT, check=False).returncode


def run_all(bins: list[dict], out) -> list[str]:
    """Runs `bins` in turn; the failed ones' names."""
    return [f"{b['package']} {b['target']}" for b in bins if run(b, out) != 0]


def main() -> int:
    bins = binaries()
    live = [b for b in bins if b["package"] == LIVE and b["target"] != SOAK]
    soak = [b for b in bins if b["package"] == LIVE and b["target"] == SOAK]
    rest = [b for b in bins if b["package"] != LIVE]
    failed, live_failed = [], []
    with tempfile.TemporaryFile("w+") as log:
        # The background stream: a thread running the live binaries in turn into `log`.
        background = threading.Thread(target=lambda: live_failed.extend(run_all(live, log)))
        background.start()
        failed += run_all(rest + soak, sys.stdout)
        doc = subprocess.run([*CARGO, "--doc"], cwd=ROOT, check=False).returncode
        if doc != 0:
            failed.append("doc tests")
        background.join()
        print(f"--- {LIVE}'s tests but the soak (run beside the above):", flush=True)
        log.seek(0)
        sys.stdout.write(log.read())
        failed += live_failed
    if failed:
        print("rust-test: failed: " + "; ".join(failed))
        return 1
    print(f"rust-test: {len(bins)} test binaries and the doc tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
