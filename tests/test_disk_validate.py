"""`wattio disk import` / `wattio disk validate` on DiskSim's real-drive data.

Needs the compiled extension (`maturin develop`) and DiskSim's validation data in
`<repo>/../shared/disksim-valid` (or `$WATTIO_SHARED/disksim-valid`); skips otherwise.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("wattio._core")

from wattio.cli import main

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("WATTIO_SHARED", REPO.parent / "shared")) / "disksim-valid"

pytestmark = pytest.mark.skipif(
    not (SHARED / "README.md").exists(),
    reason=f"DiskSim validation data not found in {SHARED}",
)


def test_validate_json_reports_demerit(capsys):
    parv, trace = SHARED / "cheetah4LP.parv", SHARED / "cheetah4LP.trace"
    rc = main(["disk", "validate", str(parv), str(trace), "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["requests"] == 10000
    # DiskSim's own demerit on this drive is 0.318 ms; the model reaches 0.316 ms.
    assert report["demerit_ms"] <= 0.319
    assert abs(report["mean_measured_ms"] - 5.328) < 0.001
    assert (
        abs(report["mean_sim_ms"] - report["mean_measured_ms"]) < 0.1 * report["mean_measured_ms"]
    )


def test_import_writes_a_catalogue_timing_table(tmp_path, capsys):
    out = tmp_path / "hp_c2247a.toml"
    rc = main(["disk", "import", str(SHARED / "hp_c2247a.parv"), "--out", str(out)])
    assert rc == 0
    text = out.read_text()
    assert 'model = "hdd-mechanical"' in text
    # The unsupported DiskSim parameters are listed by name, in the file and on stderr; a
    # supported one is a key of the table.
    assert "Hold bus entire read xfer" in text
    assert "Hold bus entire read xfer" in capsys.readouterr().err
    assert "Stop prefetch in sector" not in text
    assert "stop_prefetch_in_sector = true" in text


def test_import_power_from_gives_a_runnable_entry(tmp_path):
    import tomllib

    out = tmp_path / "hp-c2247a.toml"
    rc = main(
        ["disk", "import", str(SHARED / "hp_c2247a.parv"), "--power-from", "wd800-fs2", "--out", str(out)]
    )
    assert rc == 0
    entry = tomllib.loads(out.read_text())
    assert entry["timing"]["model"] == "hdd-mechanical"
    watts = {s["name"]: s["watts"] for s in entry["power"]["state"]}
    assert watts == {"active": 8.0, "seek": 14.0, "idle": 8.0, "standby": 1.0}
    assert "`wd800-fs2`" in entry["description"]


def test_missing_file_is_a_user_error(tmp_path, capsys):
    rc = main(["disk", "import", str(tmp_path / "nope.parv")])
    assert rc == 2
    assert "nope.parv" in capsys.readouterr().err


def test_probe_finds_the_zone_table_of_a_drive(capsys):
    # hp_c2247a: eight zones, no spare sectors inside tracks, so every run is a zone;
    # the first zone's SPT and the run count are the model's (crates/engine/tests/probe.rs
    # checks every run of every drive against the layout itself).
    rc = main(["disk", "probe", "--model", str(SHARED / "hp_c2247a.parv"), "--json"])
    assert rc == 0
    r = json.loads(capsys.readouterr().out)
    assert r["done"] and r["stopped"] is None
    assert len(r["runs"]) == 8 and len(r["zones"]) == 8
    assert r["runs"][0]["first_lba"] == 0
    spts = [z["spt"] for z in r["zones"]]
    assert spts == sorted(spts, reverse=True), "outer zones hold more sectors per track"
    # Runs are contiguous and end where the tail begins.
    for a, b in zip(r["runs"], r["runs"][1:]):
        assert b["first_lba"] == a["last_lba"] + 1
    assert r["tail"][0] == r["runs"][-1]["last_lba"] + 1


def test_probe_scans_a_new_spt_twice_unless_told_the_thesis(capsys):
    # The catalogue's HP C2247A: eight zones, eight SPTs. In simulation the second scan of
    # a track always agrees, so each of the eight SPTs costs one track's probes more than
    # the thesis's single scan; the track runs are the same (docs/functions/geometry-probe.md).
    def probe(*extra):
        assert main(["disk", "probe", "--model", "hp-c2247a", "--json", *extra]) == 0
        return json.loads(capsys.readouterr().out)

    two, thesis, one = probe(), probe("--thesis"), probe("--scans", "1")
    assert (two["probes"], thesis["probes"], one["probes"]) == (42473, 41409, 41409)
    assert two["runs"] == thesis["runs"] and len(two["runs"]) == 8
    assert two["disagreed"] == 0
    assert main(["disk", "probe", "--model", "hp-c2247a", "--scans", "0"]) == 2
    assert "probe.scans: expected a whole number from 1 to 10, got 0" in capsys.readouterr().err


def test_probe_refuses_a_model_without_platters(capsys):
    rc = main(["disk", "probe", "--model", "samsung-870-evo-1tb"])
    assert rc == 2
    assert "has no mechanical layout" in capsys.readouterr().err


def test_probe_option_errors_name_the_key(capsys):
    rc = main(["disk", "probe", "--model", str(SHARED / "hp_c2247a.parv"), "--confirms", "0"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "probe.confirms: expected a whole number from 1 to 1000, got 0" in err


def test_probe_spec_is_runnable_and_probes_back_the_same(tmp_path, capsys):
    # The second phase on hp_c2247a writes a spec; probing that spec (a catalogue TOML file)
    # gives back the same rotation, surfaces, zones and skews (crates/engine/tests/probe.rs
    # holds the extracted values to the model's own).
    spec = tmp_path / "hp.toml"
    rc = main(
        ["disk", "probe", "--model", str(SHARED / "hp_c2247a.parv"), "--spec", str(spec), "--json"]
    )
    assert rc == 0
    first = json.loads(capsys.readouterr().out)["mechanics"]
    assert first["surfaces_found"] and first["surfaces"] == 13
    assert abs(60e9 / first["rotation_ns"] - 5400.0) < 0.01
    rc = main(
        ["disk", "probe", "--model", str(spec), "--spec", str(tmp_path / "again.toml"), "--json"]
    )
    assert rc == 0
    again = json.loads(capsys.readouterr().out)["mechanics"]
    key = lambda m: [
        (z["spt"], z["sectors_per_rev"], z["head_skew"], z["cyl_skew"]) for z in m["zones"]
    ]
    assert key(again) == key(first)
    assert again["surfaces"] == first["surfaces"]
    assert abs(again["rotation_ns"] - first["rotation_ns"]) < 2


def test_probe_takes_a_target_or_a_model_not_both(tmp_path, capsys):
    assert main(["disk", "probe"]) == 2
    assert "give a TARGET (live) or --model M" in capsys.readouterr().err
    img = tmp_path / "scratch.img"
    img.write_bytes(bytes(1 << 20))
    assert main(["disk", "probe", str(img), "--model", "hp-c2247a"]) == 2
    assert "not both" in capsys.readouterr().err


def test_live_probe_of_a_file_runs_and_is_bounded(tmp_path, capsys):
    # A live probe on the wall clock against a real file (its fsyncs, not a disk's
    # platters: no geometry to find): the same function, through the live executor; it
    # writes what it times and stops at max_probes, saying so.
    img = tmp_path / "scratch.img"
    img.write_bytes(b"\xff" * (1 << 20))
    rc = main(["disk", "probe", str(img), "--max-probes", "20", "--retries", "3", "--json"])
    assert rc == 1
    r = json.loads(capsys.readouterr().out)
    assert r["live"] and r["wall_s"] > 0
    assert r["probes"] == 20 and not r["done"]
    assert r["stopped"] == "max_probes (20) reached"
    data = img.read_bytes()
    # Every probe wrote two zero sectors from LBA 0 on (no jump in a file's fsync time is
    # confirmed 10 times, so it never skipped): at least the first sectors are zeros now.
    assert data[:512] == bytes(512) and data[-512:] == b"\xff" * 512


def test_live_probe_of_an_absent_export_is_a_user_error(capsys):
    rc = main(["disk", "probe", "nbd+unix:///x?socket=/nonexistent/wattio.sock", "--timeout", "5"])
    assert rc == 2
    assert "/nonexistent/wattio.sock" in capsys.readouterr().err
