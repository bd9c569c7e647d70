"""`wattio run`: outputs, determinism, config errors."""

import json

import pyarrow.parquet as pq
from conftest import EXAMPLES

SMALL = (EXAMPLES / "laptop-fixed.toml").read_text().replace("duration_s = 86400", "duration_s = 7200")


def test_run_writes_outputs(tmp_path, wattio_cli):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    out = tmp_path / "out"
    wattio_cli("run", cfg, "--out", out, "--quiet")
    s = json.loads((out / "summary.json").read_text())
    for key in ["duration_s", "requests", "mean_latency_ms", "p99_latency_ms", "devices"]:
        assert key in s
    d = s["devices"]["disk"]
    assert set(d) >= {"energy_j", "spin_ups", "residency_s"}
    assert abs(sum(d["residency_s"].values()) - s["duration_s"]) < 1e-6
    assert s["duration_s"] == 7200
    req = pq.read_table(out / "requests.parquet")
    assert req.num_rows == s["requests"]
    lat = req.column("latency_ns").to_numpy()
    assert abs(lat.mean() / 1e6 - s["mean_latency_ms"]) < 1e-6
    tl = pq.read_table(out / "timeline.parquet").to_pandas()
    assert (tl.end_ns - tl.start_ns).sum() == round(s["duration_s"] * 1e9)
    en = pq.read_table(out / "energy.parquet").to_pandas()
    assert abs(en.energy_j.sum() - s["energy_j"]) < 1e-6
    html = (out / "report.html").read_text()
    # Power states, energy, latency, block accesses (this drive has no start/stop rating).
    assert html.count("<svg") == 4


def test_same_seed_same_summary_bytes(tmp_path, wattio_cli):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    for name in ["a", "b"]:
        wattio_cli("run", cfg, "--out", tmp_path / name, "--quiet", "--no-report")
    a = (tmp_path / "a" / "summary.json").read_bytes()
    assert a == (tmp_path / "b" / "summary.json").read_bytes()
    cfg.write_text(SMALL.replace("seed = 7", "seed = 8"))
    wattio_cli("run", cfg, "--out", tmp_path / "c", "--quiet", "--no-report")
    assert a != (tmp_path / "c" / "summary.json").read_bytes()


def test_config_errors_name_the_key(tmp_path, wattio_cli):
    cases = {
        "timeout_s = 5": ("timeout_s = -5", "function[0].timeout_s"),
        "read_fraction = 0.8": ("read_fraction = 1.8", "workload.read_fraction"),
        'policy = "fixed"': ('policy = "fixd"', "fixd"),
        "rate = 0.05": ("rate = 0.05\nrat = 3", "rat"),
        'model = "toshiba-mk1234gsx"': ('model = "toshiba"', "device[0].model: unknown device `toshiba`"),
        "footprint_bytes = 20_000_000_000": ("footprint_bytes = 20_000_000_000_000",
                                             "workload.footprint_bytes: expected at most"),
    }
    for good, (bad, expected) in cases.items():
        assert good in SMALL
        cfg = tmp_path / "bad.toml"
        cfg.write_text(SMALL.replace(good, bad))
        for cmd in ("run", "check"):
            p = wattio_cli(cmd, cfg, *(["--quiet"] if cmd == "run" else []), check=False)
            assert p.returncode == 2, (cmd, bad, p.stderr)
            assert expected in p.stderr, (cmd, bad, p.stderr)
            # Whether found parsing, validating or assembling the run: the file is named.
            assert p.stderr.startswith(f"wattio: error: {cfg}: "), (cmd, bad, p.stderr)
            assert "Traceback" not in p.stderr


def test_check_and_catalogue(tmp_path, wattio_cli):
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL)
    assert "ok" in wattio_cli("check", cfg).stdout
    names = wattio_cli("catalogue").stdout
    for n in ["fujitsu-map3367", "wd800-fs2", "toshiba-mk1234gsx", "samsung-980-pro-1tb"]:
        assert n in names


def test_functions_lists_the_registry(wattio_cli):
    out = wattio_cli("functions", "--long").stdout
    assert out.splitlines()[0].startswith("spindown     disk spin-down after idleness")
    assert "module power::idle; source: Douglis et al. 1995" in out
    assert "docs: docs/functions/spindown.md" in out
    assert "python" in out


def test_check_refuses_what_run_would(tmp_path, wattio_cli):
    """The audit's configs that passed `check` and then panicked or allocated gigabytes."""
    fixed = 'policy = "fixed"\ntimeout_s = 5'
    cases = {
        'policy = "adaptive"\nmin_timeout_s = 100\nmax_timeout_s = 10': (
            "function[0].min_timeout_s: 100 s is above max_timeout_s (10 s)"
        ),
        'policy = "share"\nexperts = 1000000000': (
            "function[0].experts: expected a whole number from 1 to 10000, got 1000000000"
        ),
        'policy = "fixed"\ntimeout_s = "5"': 'function[0].timeout_s: invalid type: string "5"',
    }
    assert fixed in SMALL
    for bad, expected in cases.items():
        cfg = tmp_path / "bad.toml"
        cfg.write_text(SMALL.replace(fixed, bad))
        for cmd in ["check", "run"]:
            p = wattio_cli(cmd, cfg, "--quiet", check=False) if cmd == "run" else wattio_cli(
                cmd, cfg, check=False
            )
            assert p.returncode == 2, (cmd, bad, p.stderr)
            assert expected in p.stderr, (cmd, bad, p.stderr)
            assert "Traceback" not in p.stderr


def test_check_imports_and_constructs_python_functions(tmp_path, wattio_cli):
    """`check` refuses what `run` would: no module, no class, wrong parameters — no traceback."""
    src = (EXAMPLES / "laptop-python.toml").read_text()
    (tmp_path / "spindown.py").write_text((EXAMPLES / "spindown.py").read_text())
    klass, params = 'class = "spindown.py:FixedTimeout"', "params = { timeout_s = 5 }"
    assert klass in src and params in src
    cases = [
        (klass, 'class = "nosuchmodule:Fixed"', "cannot import 'nosuchmodule'"),
        (klass, 'class = "spindown.py:Nope"', "module has no 'Nope'"),
        (params, "params = { timeout_s = 5, bogus = 1 }", "function[0].params: spindown.py:FixedTimeout"),
    ]
    cfg = tmp_path / "c.toml"
    cfg.write_text(src)
    assert "ok" in wattio_cli("check", cfg).stdout
    for good, bad, expected in cases:
        cfg.write_text(src.replace(good, bad))
        for cmd in (["check", cfg], ["run", cfg, "--quiet"]):
            p = wattio_cli(*cmd, check=False)
            assert p.returncode == 2, (cmd, bad, p.stderr)
            assert expected in p.stderr, (cmd, bad, p.stderr)
            assert "Traceback" not in p.stderr


def test_an_unload_from_the_command_line_writes_back_and_is_timed(tmp_path, wattio_cli):
    # The EXCES example for an hour, once as the papers measure it and once ended with a
    # clean unload (`--set run.unload=true`): EXCES's buffered pages go back to the disk.
    cfg = tmp_path / "exces.toml"
    cfg.write_text((EXAMPLES / "laptop-exces.toml").read_text().replace("duration_s = 86400", "duration_s = 3600"))
    runs, stderr = {}, {}
    keep = ["--set", "run.unload=true", "--set", "function.0.clean_on_stop=false"]
    for name, extra in [("plain", []), ("unload", ["--set", "run.unload=true"]), ("keep", keep)]:
        p = wattio_cli("run", cfg, "--out", tmp_path / name, "--no-report", *extra)
        runs[name] = json.loads((tmp_path / name / "summary.json").read_text())
        stderr[name] = p.stderr

    def counter(s, name):
        return next(f for f in s["functions"] if f["name"].startswith("exces"))["counters"][name]

    plain, unload = runs["plain"], runs["unload"]
    assert "unload" not in plain
    dirty = counter(plain, "dirty_pages")
    assert dirty > 0
    assert counter(unload, "dirty_pages") == 0
    assert counter(unload, "pages_written_back") - counter(plain, "pages_written_back") == dirty
    # The host detaches at the end of the workload's hour; the unload adds its time.
    u = unload["unload"]
    assert u["started_s"] == plain["duration_s"] == 3600
    assert u["took_s"] > 0 and abs(unload["duration_s"] - (3600 + u["took_s"])) < 1e-9
    assert u["left"] == [] and "left undone" not in stderr["unload"]
    # An unload that leaves the dirty pages on the flash card says so, in the summary and
    # on stderr: the disk alone is not the volume.
    left = runs["keep"]["unload"]["left"]
    want = f"{int(dirty)} dirty page(s) stay on `ecd` (clean_on_stop = false): `disk` alone does not hold the volume"
    assert len(left) == 1 and left[0].startswith("exces") and left[0].endswith(want), left
    assert f"left undone: {left[0]}" in stderr["keep"]
    assert unload["devices"]["disk"]["energy_j"] > plain["devices"]["disk"]["energy_j"]


def test_set_run_check_data_checks_any_config_and_says_so(tmp_path, wattio_cli):
    """`--set run.check_data=true` on a shipped config: the run prints what the checker checked
    and summary.json carries the same counts; without it, neither."""
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    p = wattio_cli("run", cfg, "--set", "run.check_data=true", "--out", tmp_path / "c", "--no-report")
    c = json.loads((tmp_path / "c" / "summary.json").read_text())["data_check"]
    assert c["block_bytes"] == 4096 and c["reads_checked"] > 100 and c["blocks_unverified"] == 0
    line = next(x for x in p.stdout.splitlines() if x.startswith("data check "))
    assert line == (
        f"data check {c['reads_checked']:,} reads, {c['blocks_checked']:,} blocks of 4096 B checked, "
        "0 unverified: every read returned the latest acknowledged write"
    )
    p = wattio_cli("run", cfg, "--out", tmp_path / "u", "--no-report")
    assert "data check" not in p.stdout
    assert "data_check" not in json.loads((tmp_path / "u" / "summary.json").read_text())


def test_the_environment_turns_the_data_check_on_for_every_run(tmp_path, monkeypatch):
    """WATTIO_CHECK_DATA (what `wattio reproduce --check-data` sets for its worker processes)
    adds `[run] check_data = true` to any run; "0" or unset leaves the config as it is."""
    import wattio

    monkeypatch.setenv("WATTIO_CHECK_DATA", "1")
    assert wattio.run(SMALL, progress=False, report=False).summary["data_check"]["reads_checked"] > 100
    monkeypatch.setenv("WATTIO_CHECK_DATA", "0")
    assert "data_check" not in wattio.run(SMALL, progress=False, report=False).summary


def test_reproduce_check_data_runs_an_experiment_with_the_checker(wattio_cli):
    p = wattio_cli("reproduce", "--check-data", "--quick", "spindown-share-vs-one-minute")
    assert "[holds]" in p.stdout
