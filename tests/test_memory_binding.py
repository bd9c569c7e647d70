"""`_core.memory_run`: the memory simulator behind `wattio reproduce memory`, from Python."""

import json

import pytest
from wattio import _core

CONFIG = """
[memory]
part = "ddr-400-thesis"
ranks = 1
line_bytes = 128
seed = 1
[memory.policy]
kind = "nopm"
[[process]]
kind = "stream"
accesses = 10
gap_ns = 30
"""


def test_hand_computed_run():
    s = json.loads(_core.memory_run(CONFIG, "."))
    # Ten reads of 70 ns (tRCD 15 + CL 15 + 40 ns burst), each after 30 ns of computation:
    # 300 ns in standby at 2.2 W and 700 ns reading at 4.2 W.
    assert (s["runtime_ns"], s["reads"], s["writes"], s["policy"]) == (1000, 10, 0, "nopm")
    assert s["energy_j"] == pytest.approx(2.2 * 300e-9 + 4.2 * 700e-9, rel=1e-12)
    assert s["ranks"][0]["residency_ns"] == [300, 700, 0, 0, 0]
    assert (s["pages_migrated"], s["migration_accesses"]) == (0, 0)


def test_bad_config_names_the_key():
    with pytest.raises(ValueError, match=r"memory\.ranks: expected 1\.\.=4096, got 0"):
        _core.memory_run(CONFIG.replace("ranks = 1", "ranks = 0"), ".")
    with pytest.raises(ValueError, match="memory.policy.kind: unknown policy `sleepy`"):
        _core.memory_run(CONFIG.replace('"nopm"', '"sleepy"'), ".")
