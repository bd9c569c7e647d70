#!/usr/bin/env python3
"""`make rust-test`: every Rust test of the workspace (`cargo test --release`), in two streams
at once.

The live crate's tests mostly wait (on emulated disks' service times, fio's think time,
servers starting and syncing) while the other crates' tests compute, so the live tests but
the soak run in a background stream beside the other crates' tests, and the soak (which
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
    """The package name of a Cargo.toml (its [package] name)."""
    in_package = False
    for line in manifest.read_text().splitlines():
        s = line.strip()
        if s.startswith("["):
            in_package = s == "[package]"
        elif in_package and s.startswith("name") and "=" in s:
            return s.split("=", 1)[1].strip().strip('"')
    return manifest.parent.name


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
    failed = []
    with tempfile.TemporaryFile("w+") as log:
        # The background stream: a child of this script running the live binaries in turn.
        child = subprocess.Popen(
            [sys.executable, __file__, "--run", json.dumps(live)],
            stdout=log, stderr=subprocess.STDOUT,
        )
        failed += run_all(rest + soak, sys.stdout)
        doc = subprocess.run([*CARGO, "--doc"], cwd=ROOT, check=False).returncode
        if doc != 0:
            failed.append("doc tests")
        live_rc = child.wait()
        print(f"--- {LIVE}'s tests but the soak (run beside the above):", flush=True)
        log.seek(0)
        sys.stdout.write(log.read())
        if live_rc != 0:
            failed.append(f"{LIVE}'s (named above)")
    if failed:
        print("rust-test: failed: " + "; ".join(failed))
        return 1
    print(f"rust-test: {len(bins)} test binaries and the doc tests passed")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run"]:
        bad = run_all(json.loads(sys.argv[2]), sys.stdout)
        if bad:
            print("failed: " + "; ".join(bad))
        sys.exit(1 if bad else 0)
    sys.exit(main())
