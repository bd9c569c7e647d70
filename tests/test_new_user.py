"""README.md's tutorial as a new user meets it: its commands, taken from README.md itself, run
in an empty directory with nothing but the installed package (no repository files, no
PYTHONPATH), and what they print and write is checked, numbers included.

Every ```sh block of the tutorial section runs in bash, every ```python block in Python, in
order, in one directory. A block that shows a shipped example file (``wattio example``) must
be that file byte for byte, and is not run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Five-minute tutorial"


def tutorial_blocks(readme: str) -> list[tuple[str, str]]:
    """(language, text) of each fenced block of the tutorial section, in order."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    section = readme[start : end if end > 0 else None]
    return re.findall(r"^```(\w+)\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)


def shipped() -> dict[str, str]:
    root = resources.files("wattio") / "examples"
    return {p.name: p.read_text() for p in root.iterdir() if p.is_file()}


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    """Runs the tutorial once; returns (directory, outputs of the blocks run, README text)."""
    readme = (ROOT / "README.md").read_text()
    blocks = tutorial_blocks(readme)
    files = shipped()
    cwd = tmp_path_factory.mktemp("new-user")
    assert not any(cwd.iterdir())
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    outputs, shown = [], []
    for lang, text in blocks:
        if text in files.values():
            shown.append(text)
            continue
        if lang == "sh":
            cmd = ["bash", "-euo", "pipefail", "-c", text]
        elif lang == "python":
            cmd = [sys.executable, "-c", text]
        else:
            raise AssertionError(f"tutorial block in {lang} is neither run nor a shipped example:\n{text}")
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
        assert p.returncode == 0, f"tutorial block failed ({p.returncode}):\n{text}\n{p.stderr}"
        outputs.append((text, p.stdout))
    return cwd, outputs, shown, readme


@pytest.mark.slow
def test_blocks_that_show_files_are_the_shipped_files(tutorial):
    _, _, shown, _ = tutorial
    files = shipped()
    # The inline Python function IS spindown.py, and the config shown IS laptop-fixed.toml.
    assert files["spindown.py"] in shown
    assert files["laptop-fixed.toml"] in shown


@pytest.mark.slow
def test_demo_table_comparison_and_reports(tutorial):
    cwd, outputs, _, _ = tutorial
    demo = cwd / "demo"
    text = next(out for cmd, out in outputs if cmd.startswith("wattio demo"))
    assert "oracle" in text and "always-on" in text
    rows = json.loads((demo / "demo.json").read_text())
    assert len(rows) == 12
    for machine in ["laptop", "server"]:
        r = {x["policy"]: x for x in rows if x["machine"] == machine}
        # Same workload under every policy.
        assert len({x["requests"] for x in r.values()}) == 1
        # The oracle is the lower bound and never makes a request wait for a spin-up.
        for policy, x in r.items():
            assert r["oracle"]["energy_j"] <= x["energy_j"] + 1e-6, policy
        assert r["always-on"]["spin_ups"] == 0
        assert r["fixed-5s"]["spin_ups"] >= r["fixed-30s"]["spin_ups"]
        assert r["oracle"]["mean_latency_ms"] <= r["always-on"]["mean_latency_ms"] * 1.01
        s = json.loads((demo / f"{machine}-oracle" / "summary.json").read_text())
        assert s["requests"] == r["oracle"]["requests"]
        for policy in r:
            assert (demo / f"{machine}-{policy}" / "report.html").exists()
    page = (demo / "comparison.html").read_text()
    for x in rows:
        assert f'href="{x["machine"]}-{x["policy"]}/report.html"' in page
    # The oracle has the least energy, so it is on both Pareto fronts of each machine.
    assert page.count('<tr class="front"><td><a href="laptop-oracle/report.html">oracle</a>') == 1
    assert page.count('<tr class="front"><td><a href="server-oracle/report.html">oracle</a>') == 1


@pytest.mark.slow
def test_own_config_numbers_are_the_readmes(tutorial):
    cwd, _, _, readme = tutorial
    s = json.loads((cwd / "out" / "fixed" / "summary.json").read_text())
    d = s["devices"]["disk"]
    assert s["duration_s"] == 86400
    # What the README says the run prints is what it prints.
    claim = f"{s['requests']:,} requests, {s['energy_j']:,.1f} J and {d['spin_ups']:,} spin-ups"
    assert claim in readme
    assert (s["requests"], round(s["energy_j"], 1), d["spin_ups"]) == (25_354, 63_754.3, 2_655)
    assert (cwd / "out" / "fixed" / "report.html").exists()


@pytest.mark.slow
def test_python_function_gives_the_builtin_numbers(tutorial):
    cwd, _, _, readme = tutorial
    a = json.loads((cwd / "out" / "fixed" / "summary.json").read_text())
    b = json.loads((cwd / "out" / "python" / "summary.json").read_text())
    for key in ["duration_s", "requests", "errors", "mean_latency_ms", "p50_latency_ms", "p99_latency_ms",
                "max_latency_ms", "mean_power_wait_ms", "energy_j", "devices"]:
        assert a[key] == b[key], key
    assert a["functions"][0]["counters"] == b["functions"][0]["counters"]
    assert f"exactly the built-in policy's numbers: {b['energy_j']:,.1f} J and " \
           f"{b['devices']['disk']['spin_ups']:,} spin-ups" in readme


@pytest.mark.slow
def test_pandas_step_and_trace_replay(tutorial):
    cwd, outputs, _, _ = tutorial
    text = next(out for cmd, out in outputs if cmd.startswith("import wattio"))
    energy, p99 = map(float, text.splitlines()[0].split())
    s = json.loads((cwd / "out" / "fixed" / "summary.json").read_text())
    assert (energy, p99) == (s["energy_j"], s["p99_latency_ms"])
    assert "read" in text and "write" in text
    n, replayed = map(int, text.splitlines()[-1].split())
    assert n == replayed > 100
    hour = json.loads((cwd / "out" / "hour" / "summary.json").read_text())
    assert hour["requests"] == n
    stats = next(out for cmd, out in outputs if cmd.startswith("wattio trace stats"))
    assert re.search(rf"requests\s+{n}\b", stats)
