"""`wattio nvm` and wattio.nvm: scheme names, a run on a committed stand-in, and the
relations between schemes that hold on any trace."""

import json

import pytest
from conftest import ROOT
from wattio import nvm

TRACE = ROOT / "workloads" / "nvm-apps" / "sqlite.parquet"


def test_scheme_names():
    assert nvm.encoding("dw") == ({"kind": "dw"}, False)
    assert nvm.encoding("HC") == ({"kind": "dw"}, True)
    assert nvm.encoding("hc+di4") == ({"kind": "di", "unit": 4}, True)
    assert nvm.encoding("di16") == ({"kind": "di", "unit": 16}, False)
    assert nvm.encoding("rbw+di8") == ({"kind": "di", "unit": 8}, False)
    assert nvm.reads_first("RBW+di8") and not nvm.reads_first("di8") and not nvm.reads_first("rbw")
    with pytest.raises(ValueError, match="scheme 'rbw\\+hc'"):
        nvm.encoding("rbw+hc")
    with pytest.raises(ValueError, match="scheme 'di'"):
        nvm.encoding("di")


def test_schemes_on_a_stand_in():
    dw = nvm.summary(nvm.simulate(TRACE, nvm.Cache("dw")))
    rbw = nvm.summary(nvm.simulate(TRACE, nvm.Cache("rbw")))
    bl = nvm.summary(nvm.simulate(TRACE, nvm.Cache("bl")))
    hc = nvm.simulate(TRACE, nvm.Cache("hc", n_th=2))
    t = hc["traffic"]
    # The trace's 100,000 rows are the LLC's reads and writes, whatever the scheme.
    assert (dw["llc_reads"] + dw["llc_writes"], t["reads"] + t["writes"]) == (100_000, 100_000)
    # RBW programs the same cells as DW; BL programs all 512 of every PRAM write.
    assert rbw["pram_bits"] == dw["pram_bits"]
    # DI on top of RBW: DI's cells, and RBW's read of 512 cells (2 pJ each) before each PRAM write.
    di = nvm.simulate(TRACE, nvm.Cache("di8"))
    rbw_di = nvm.simulate(TRACE, nvm.Cache("rbw+di8"))
    assert rbw_di["traffic"] == di["traffic"] and rbw_di["max_pram_cell_writes"] == di["max_pram_cell_writes"]
    reads = rbw_di["costs"]["pram_read_j"] - di["costs"]["pram_read_j"]
    assert reads == pytest.approx(di["traffic"]["pram_writes"] * 512 * 2e-12, rel=1e-9)
    assert bl["pram_bits"] == 512 * bl["llc_reads"] - 512 * bl["llc_read_hits"] + 512 * bl["llc_writes"]
    # HC never writes more PRAM bits on L1 write-backs than DW, and its fills are the same lines.
    assert t["n_upper"] + t["n_swap"] < dw["n_upper"]
    assert t["buffer_writes"] > 0 and t["swaps"] > 0
    assert hc["through_l1"] is False and hc["costs"]["area_mm2"] > dw["area_mm2"]


def test_cli_run_json_and_errors(wattio_cli, tmp_path):
    p = wattio_cli("nvm", "run", TRACE, "--scheme", "hc+di8", "--llc-size", "128K", "--json")
    doc = json.loads(p.stdout)
    assert doc["report"]["config"]["llc"]["bytes"] == 128 * 1024
    assert doc["summary"]["n_wb"] > 0 and "heat_map" not in doc["report"]
    bad = wattio_cli("nvm", "run", TRACE, "--llc-size", "100K", check=False)
    assert bad.returncode == 2 and "power-of-two number of 64-byte-line sets" in bad.stderr
    missing = wattio_cli("nvm", "run", tmp_path / "none.parquet", check=False)
    assert missing.returncode == 2 and "none.parquet" in missing.stderr


def test_miss_counter_readings():
    """`miss_count` reaches the simulator: both readings see the same LLC traffic, and on this
    stand-in the per-set reading (every buffer miss counts) moves ownership more often; a bad
    value is refused."""
    block = nvm.simulate(TRACE, nvm.Cache("hc", n_th=4))
    per_set = nvm.simulate(TRACE, nvm.Cache("hc", n_th=4, miss_count="set"))
    assert block["config"]["llc"]["hybrid"] == {"n_th": 4, "miss_count": "block"}
    assert per_set["config"]["llc"]["hybrid"]["miss_count"] == "set"
    tb, ts = block["traffic"], per_set["traffic"]
    assert (tb["reads"], tb["writes"]) == (ts["reads"], ts["writes"])
    assert ts["swaps"] > tb["swaps"] > 0
    with pytest.raises(ValueError, match="expected `block` or `set`"):
        nvm.simulate(TRACE, nvm.Cache("hc", miss_count="bogus"))


def test_passes_loop_the_trace(wattio_cli):
    """`--passes N` replays the trace N times over the caches the last pass left: the LLC
    sees N times the rows and N times the time; with set rotation on, the looped run's
    hottest line is nearer the mean than one pass's (the rotation has gone further round)."""
    one = nvm.simulate(TRACE, nvm.Cache("di8", 256 * 1024, 16, set_rotation=4096))
    p = wattio_cli("nvm", "run", TRACE, "--scheme", "di8", "--llc-ways", "16", "--set-rotation", "4096",
                   "--passes", "8", "--json")
    eight = json.loads(p.stdout)["report"]
    t1, t8 = one["traffic"], eight["traffic"]
    assert eight["config"]["passes"] == 8
    assert t8["reads"] + t8["writes"] == 8 * (t1["reads"] + t1["writes"]) == 800_000
    assert eight["instructions"] == 8 * one["instructions"]
    assert eight["fills_unknown"] == one["fills_unknown"]

    def spread(rep):
        heat = nvm.simulate(TRACE, nvm.Cache("di8", 256 * 1024, 16, set_rotation=4096,
                                             passes=rep["config"]["passes"]))["heat_map"]
        return max(heat) / (sum(heat) / len(heat))

    assert spread(eight) < spread(one)
    bad = wattio_cli("nvm", "run", TRACE, "--passes", "10001", check=False)
    assert bad.returncode == 2 and "passes = 10001: expected a whole number from 1 to 10000" in bad.stderr
    # Counts below 1 or past the simulator's field are refused by the flag, not as a JSON
    # decoding error about the config the front door generated.
    for flag, value, said in [("--passes", "0", "≥ 1"), ("--n-th", "-1", "≥ 1"),
                              ("--set-rotation", str(2**64), f"at most {2**64 - 1}")]:
        bad = wattio_cli("nvm", "run", TRACE, "--scheme", "hc", flag, value, check=False)
        assert bad.returncode == 2 and f"argument {flag}: '{value}': expected" in bad.stderr, bad.stderr
        assert said in bad.stderr and "column" not in bad.stderr
    # The hybrid cache's options on another scheme are refused, not silently ignored.
    bad = wattio_cli("nvm", "run", TRACE, "--scheme", "dw", "--n-th", "2", "--miss-count", "set", check=False)
    assert bad.returncode == 2 and ("--n-th and --miss-count: hybrid cache options, but --scheme dw is not "
                                    "a hybrid cache (hc or hc+diN)") in bad.stderr, bad.stderr
    assert "--n-th" in wattio_cli("nvm", "run", TRACE, "--n-th", "3", check=False).stderr
    hc = json.loads(wattio_cli("nvm", "run", TRACE, "--scheme", "hc", "--n-th", "2", "--json").stdout)
    assert hc["report"]["config"]["llc"]["hybrid"] == {"n_th": 2, "miss_count": "block"}
    # From Python, the simulator names the key.
    with pytest.raises(ValueError, match=r"^nvcache config: llc.hybrid.n_th: invalid value: integer `-1`, expected a whole number ≥ 0$"):
        nvm.simulate(TRACE, nvm.Cache("hc", n_th=-1))
