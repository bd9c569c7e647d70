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
    assert abs((tl.end_s - tl.start_s).sum() - s["duration_s"]) < 1e-6
    en = pq.read_table(out / "energy.parquet").to_pandas()
    assert abs(en.energy_j.sum() - s["energy_j"]) < 1e-6
    html = (out / "report.html").read_text()
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
    }
    for good, (bad, expected) in cases.items():
        cfg = tmp_path / "bad.toml"
        cfg.write_text(SMALL.replace(good, bad))
        p = wattio_cli("run", cfg, "--quiet", check=False)
        assert p.returncode == 2, (bad, p.stderr)
        assert expected in p.stderr, (bad, p.stderr)
        assert "Traceback" not in p.stderr


def test_check_and_catalogue(tmp_path, wattio_cli):
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL)
    assert "ok" in wattio_cli("check", cfg).stdout
    names = wattio_cli("catalogue").stdout
    for n in ["fujitsu-map3367", "wd800-fs2", "toshiba-mk1234gsx", "samsung-980-pro-1tb"]:
        assert n in names
