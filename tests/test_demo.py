"""The embedded default (`wattio demo`)."""

import json

import pytest


@pytest.mark.slow
def test_demo_table_and_outputs(tmp_path, wattio_cli):
    out = tmp_path / "demo"
    p = wattio_cli("demo", "--out", out)
    assert "oracle" in p.stdout and "always-on" in p.stdout
    rows = json.loads((out / "demo.json").read_text())
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
        s = json.loads((out / f"{machine}-oracle" / "summary.json").read_text())
        assert s["requests"] == r["oracle"]["requests"]
        assert (out / f"{machine}-oracle" / "report.html").exists()
