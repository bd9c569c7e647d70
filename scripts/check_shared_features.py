#!/usr/bin/env python3
"""Checks that `make rust-test` can reuse the dependencies `make install` compiled.

`make install` builds the extension module (`maturin develop --release`: crates/py with
`extension-module`), then `make rust-test` builds every crate's tests in the same release
profile and target directory. Cargo reuses a compiled dependency only if it resolved the same
features for it in both builds. A dev-dependency that turns on one more feature of a shared
crate (tempfile turning on bitflags' "std", say) makes the test build recompile that crate and
everything above it: once, that was the whole Arrow stack, about four minutes of CI.

This compares the features `cargo tree` resolves for each package in both builds and names
every package both builds compile whose features differ, with the fix: turn the same feature
on in crates/py/Cargo.toml (as it does for bitflags). Packages only one build compiles (pyo3's,
the test-only crates) are not compared. Exit status 1 when one differs.
"""

from __future__ import annotations

import re
import subprocess
import sys

LINE = re.compile(r"^(?P<pkg>\S+ v\S+)(?: \([^)]*\))*(?: \[(?P<features>[^\]]*)\])?")


def resolved(args: list[str]) -> dict[str, set[frozenset[str]]]:
    """Package (name and version) -> the feature sets `cargo tree` resolves for it."""
    out = subprocess.run(
        ["cargo", "tree", "-q", "--prefix", "none", "-f", "{p} [{f}]", *args],
        check=True, capture_output=True, text=True,
    ).stdout
    found: dict[str, set[frozenset[str]]] = {}
    for line in out.splitlines():
        m = LINE.match(line.replace(" (*)", ""))
        if m is None:
            continue
        features = frozenset(f for f in (m["features"] or "").split(",") if f)
        found.setdefault(m["pkg"], set()).add(features)
    return found


def main() -> int:
    install = resolved(["-p", "wattio-py", "--features", "extension-module", "-e", "normal,build"])
    # `make rust-test` resolves features with crates/py in the workspace (that is what makes
    # syn's and once_cell's match), but compiles nothing of it: pyo3's crates are not built.
    tests = resolved(["--workspace", "-e", "normal,build,dev"])
    built = resolved(["--workspace", "--exclude", "wattio-py", "-e", "normal,build,dev"])
    differ = []
    compared = 0
    for pkg, sets in sorted(install.items()):
        if pkg not in built:
            continue
        compared += 1
        if not sets <= tests[pkg]:
            only_tests = set().union(*tests[pkg]) - set().union(*sets)
            only_install = set().union(*sets) - set().union(*tests[pkg])
            differ.append(f"  {pkg}: tests add {sorted(only_tests)}, install adds {sorted(only_install)}")
    if differ:
        print("The test build resolves other features than `make install` for:", file=sys.stderr)
        print("\n".join(differ), file=sys.stderr)
        print("so `make rust-test` would recompile them and every crate above them. Turn the same "
              "features on in crates/py/Cargo.toml (see its bitflags line).", file=sys.stderr)
        return 1
    print(f"shared dependencies: the same features in both builds ({compared} packages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
