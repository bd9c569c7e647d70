"""`wattio sweep` / `wattio.sweep`: every point equals its own run, whatever the scheduling."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import wattio
from conftest import EXAMPLES

SMALL = (EXAMPLES / "laptop-fixed.toml").read_text().replace("duration_s = 86400", "duration_s = 3600")


def test_each_point_is_the_run_of_its_config(tmp_path):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    df = wattio.sweep(cfg, {"function.0.timeout_s": [2, 30], "run.seed": [1, 2]}, jobs=2)
    assert list(df["function.0.timeout_s"]) == [2, 2, 30, 30]
    assert list(df["run.seed"]) == [1, 2, 1, 2]
    for row in df.to_dict(orient="records"):
        text = SMALL.replace("timeout_s = 5", f"timeout_s = {row['function.0.timeout_s']}")
        text = text.replace("seed = 7", f"seed = {row['run.seed']}")
        s = wattio.run(text, progress=False).summary
        assert row["energy_j"] == s["energy_j"]
        assert row["requests"] == s["requests"]
        assert row["mean_latency_ms"] == s["mean_latency_ms"]
        assert row["spin_ups"] == s["devices"]["disk"]["spin_ups"]
        assert row["energy_j.disk"] == s["devices"]["disk"]["energy_j"]
    # Different seeds are different traces.
    assert df.requests[0] != df.requests[1]


def test_result_does_not_depend_on_the_executor(tmp_path):
    grid = {"function.0.timeout_s": [1, 5, 60]}
    serial = wattio.sweep(SMALL, grid, jobs=1)
    with ThreadPoolExecutor(max_workers=3) as ex:
        threaded = wattio.sweep(SMALL, grid, executor=ex)
    assert serial.equals(threaded)
    # A longer timeout never spins the disk down more often on the same trace.
    assert list(serial.spin_ups) == sorted(serial.spin_ups, reverse=True)


def test_bad_keys_and_values_are_named():
    with pytest.raises(ValueError, match=r"'function.3.timeout_s'.*not an index of a list of 1"):
        wattio.sweep(SMALL, {"function.3.timeout_s": [1]})
    with pytest.raises(ValueError, match=r"no 'workloads' in the config"):
        wattio.sweep(SMALL, {"workloads.rate": [1]})
    with pytest.raises(ValueError, match=r"sweep point 1 \(function.0.timeout_s=-1\).*timeout_s"):
        wattio.sweep(SMALL, {"function.0.timeout_s": [1, -1]})
    # What only the run finds names its point too.
    with pytest.raises(RuntimeError, match=r"^sweep point 1 \(workload.footprint_bytes=200000000000\): config: workload.footprint_bytes: expected at most"):
        wattio.sweep(SMALL, {"workload.footprint_bytes": [10**9, 2 * 10**11]}, jobs=1)
    with pytest.raises(ValueError, match=r"'run.seed' is a value, not a table"):
        wattio.sweep(SMALL, {"run.seed.x": [1]})
    with pytest.raises(ValueError, match="non-empty list"):
        wattio.sweep(SMALL, {"function.0.timeout_s": []})


def test_cli(tmp_path, wattio_cli):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    out = tmp_path / "out"
    p = wattio_cli("sweep", cfg, "--set", "function.0.timeout_s=1,60", "--out", out, "--json", "--jobs", "2")
    rows = json.loads(p.stdout)
    assert [r["function.0.timeout_s"] for r in rows] == [1, 60]
    for i, r in enumerate(rows):
        s = json.loads((out / f"{i:04d}" / "summary.json").read_text())
        assert r["energy_j"] == s["energy_j"]
    assert json.loads((out / "points.json").read_text())[1] == {"dir": "0001", "function.0.timeout_s": 60}
    page = (out / "comparison.html").read_text()
    assert page.count("<svg") == 2  # energy vs mean and vs p99 latency (no start/stop rating)
    assert "function.0.timeout_s=60" in page
    bad = wattio_cli("sweep", cfg, "--set", "function.0.timeout", check=False)
    assert bad.returncode == 2
    assert "expected KEY=VALUE" in bad.stderr


@pytest.mark.slow
def test_dask_cluster_gives_the_local_result(tmp_path, wattio_cli):
    """A real Dask cluster on loopback (worker processes): through a Client in Python and
    through `wattio sweep --scheduler`, the same table as a sweep in this process, and every
    point ran as a task on the cluster."""
    from distributed import Client, LocalCluster, get_task_stream

    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    grid = {"function.0.timeout_s": [2, 30], "run.seed": [1, 2]}
    local = wattio.sweep(cfg, grid, jobs=1)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                     dashboard_address=None) as cluster,
        Client(cluster) as client,
        get_task_stream(client) as tasks,
    ):
        on_client = wattio.sweep(cfg, grid, executor=client)
        p = wattio_cli("sweep", cfg, "--set", "function.0.timeout_s=2,30", "--set", "run.seed=1,2",
                       "--scheduler", cluster.scheduler_address, "--json", "--out", tmp_path / "out")
    assert on_client.equals(local)
    assert p.stdout and json.loads(p.stdout) == local.to_dict(orient="records")
    ran = [t for t in tasks.data if "_run_point" in t["key"]]
    assert len(ran) == 8, [t["key"] for t in tasks.data]
    assert len({t["worker"] for t in ran}) >= 1
    page = (tmp_path / "out" / "comparison.html").read_text()
    assert "function.0.timeout_s=2,run.seed=1" in page


def test_unreachable_scheduler_is_a_user_error(monkeypatch):
    import sys

    # The module, not the function `wattio.sweep` that shadows it on the package.
    monkeypatch.setattr(sys.modules["wattio.sweep"], "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(ValueError, match=r"--scheduler tcp://127.0.0.1:9: cannot connect to the Dask scheduler"):
        wattio.sweep(SMALL, {"run.seed": [1]}, scheduler="tcp://127.0.0.1:9")


def test_cli_reads_traces_as_run_does(tmp_path, wattio_cli):
    # The same trace-reading vocabulary as `wattio run`: a CSV export, one device of it.
    t = tmp_path / "export.csv"
    t.write_text(
        "timestamp_s,dev,rwbs,sector,nr_sectors\n"
        "0.0,8:16,RS,2048,8\n1.0,8:16,W,4096,16\n2.0,8:32,WS,8192,8\n20.0,8:16,R,2048,128\n"
    )
    spec = "time=timestamp_s:s,device=dev,op=rwbs:read=R/RS;write=W/WS,offset=sector:sectors,size=nr_sectors:sectors"
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    p = wattio_cli(
        "sweep", cfg, "--set", "function.0.timeout_s=1,60", "--trace", t,
        "--columns", spec, "--device", "8:16", "--json", "--jobs", "1",
    )
    rows = json.loads(p.stdout)
    assert [r["requests"] for r in rows] == [3, 3]
    # A 19 s gap: the 1 s timeout spins the disk down once, the 60 s one never.
    assert [r["spin_ups"] for r in rows] == [1, 0]
