"""Python functions: a spin-down policy gives exactly the built-in results; a cache issues its own I/O."""

import json

import pytest
import wattio
from conftest import EXAMPLES


def shorten(text: str) -> str:
    # Six hours of the diurnal day keep the test fast while crossing many idle gaps.
    return text.replace("duration_s = 86400", "duration_s = 21600")


def test_python_fixed_timeout_equals_builtin(tmp_path):
    builtin = wattio.run(shorten((EXAMPLES / "laptop-fixed.toml").read_text()), progress=False)
    python = wattio.run(
        shorten((EXAMPLES / "laptop-python.toml").read_text()),
        base_dir=EXAMPLES,
        progress=False,
    )
    a, b = builtin.summary, python.summary
    assert a["requests"] > 500
    assert a["devices"]["disk"]["spin_ups"] > 10
    for key in ["duration_s", "requests", "errors", "mean_latency_ms", "p50_latency_ms", "p99_latency_ms",
                "max_latency_ms", "mean_power_wait_ms", "energy_j", "devices"]:
        assert a[key] == b[key], key
    assert a["functions"][0]["counters"]["spin_down_commands"] == b["functions"][0]["counters"]["spin_down_commands"]


def test_python_function_exception_surfaces(tmp_path):
    class Broken(wattio.Function):
        def on_request(self, now, io, out):
            raise ZeroDivisionError("boom in on_request")

    cfg = shorten((EXAMPLES / "laptop-python.toml").read_text())
    try:
        wattio.run(cfg, functions={0: Broken()}, progress=False)
    except ZeroDivisionError as e:
        assert "boom" in str(e)
    else:
        raise AssertionError("the function's exception was swallowed")


def test_passthrough_base_class_is_transparent():
    cfg = shorten((EXAMPLES / "laptop-fixed.toml").read_text())
    plain = wattio.run(cfg, progress=False).summary
    # A Python pass-through layer above the built-in policy changes nothing measurable.
    layered = cfg.replace("[[function]]", '[[function]]\nkind = "python"\nclass = "x:y"\n\n[[function]]', 1)
    s = wattio.run(layered, functions={0: wattio.Function()}, progress=False).summary
    assert s["energy_j"] == plain["energy_j"]
    assert s["mean_latency_ms"] == plain["mean_latency_ms"]
    assert json.dumps(s["devices"], sort_keys=True) == json.dumps(plain["devices"], sort_keys=True)


def test_a_python_layer_hears_each_transition_start_and_its_end():
    """`on_transition(now, dev, to)` at the start of every power transition, then
    `on_power(now + latency, dev, to)` when the device is there: a spin-down takes the
    disk's spin-down time, a spin-up its spin-up time (DeviceInfo.transition_ns)."""

    class Ears(wattio.Function):
        def __init__(self):
            self.heard = []

        def attach(self, devices):
            d = devices[0]
            self.idle, self.sleep = d.idle_state, d.deepest_sleep
            self.down = d.transition_ns(self.idle, self.sleep)
            self.up = d.transition_ns(self.sleep, self.idle)

        def on_transition(self, now, device, to):
            self.heard.append(("to", now, device, to))

        def on_power(self, now, device, state):
            self.heard.append(("at", now, device, state))

    cfg = shorten((EXAMPLES / "laptop-fixed.toml").read_text())
    layered = cfg.replace("[[function]]", '[[function]]\nkind = "python"\nclass = "x:y"\n\n[[function]]', 1)
    ears = Ears()
    s = wattio.run(layered, functions={0: ears}, progress=False).summary
    spin_ups = s["devices"]["disk"]["spin_ups"]
    assert spin_ups > 10 and ears.down > 0 and ears.up > 0
    h = ears.heard
    assert len(h) % 2 == 0 and len(h) > 4 * spin_ups - 4
    for start, end in zip(h[::2], h[1::2]):
        assert start[0] == "to" and end[0] == "at" and start[2:] == end[2:], (start, end)
        latency = ears.down if start[3] == ears.sleep else ears.up
        assert end[1] - start[1] == latency, (start, end)
    assert sum(1 for x in h[::2] if x[3] == ears.idle) == spin_ups


def _read_cache():
    """The shipped example's class (examples/read_cache.py), loaded as `wattio run` loads it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("read_cache", EXAMPLES / "read_cache.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ReadCache


CACHE_CFG = """
[run]
unload = true

[[device]]
name = "disk"
model = "wd800-fs2"

[[device]]
name = "flash"
model = "sandisk-ultra-cf-2gb"

[[function]]
kind = "python"
class = "x:y"
"""

S = 1_000_000_000
K = 4096


def _run_cache(rows, tmp_path, blocks=8):
    import pandas as pd

    trace = pd.DataFrame(rows, columns=["arrival_ns", "op", "offset", "len"])
    cache = _read_cache()(blocks=blocks)
    r = wattio.run(
        CACHE_CFG, trace=trace, functions={0: cache}, out=tmp_path / f"run{len(rows)}", progress=False,
        report=False,
    )
    assert r.summary["requests"] == len(rows) and r.summary["errors"] == 0
    assert r.summary["unload"]["left"] == []
    return cache, r


def test_the_python_read_cache_fills_hits_and_invalidates(tmp_path):
    """Two blocks read (a miss: both copied to the flash by the function's own writes), read
    again (a hit: two flash reads, one reply), the second written (its copy dropped), read
    again (a miss: only the dropped block is copied again)."""
    cache, r = _run_cache(
        [(0, "read", 0, 2 * K), (S, "read", 0, 2 * K), (2 * S, "write", K, K), (3 * S, "read", 0, 2 * K)],
        tmp_path,
    )
    c = cache.counters()
    assert (c["hits"], c["misses"], c["fills"], c["fills_dropped"]) == (1, 2, 3, 0)
    assert dict(cache.cached) == {0: 0, 1: 1}  # the write freed slot 1; the refill took it back
    assert cache.parts == {} and cache.left == {} and cache.reading == {} and cache.orphans == set()
    # The disk served the two misses and the write; the card the three fills and the hit's
    # two block reads.
    disk, flash = r.summary["devices"]["disk"], r.summary["devices"]["flash"]
    assert (disk["ios"], disk["bytes_read"], disk["bytes_written"]) == (3, 4 * K, K)
    assert (flash["ios"], flash["bytes_read"], flash["bytes_written"]) == (5, 2 * K, 3 * K)


def test_a_fill_overtaken_by_a_write_is_dropped(tmp_path):
    """The write lands 1 ns after the read it follows returned — while that read's copy is
    being written to the flash: the copy holds the old contents, so it is thrown away and the
    next read of the block is a miss, not a hit on stale data."""
    _, r = _run_cache([(0, "read", 0, K)], tmp_path)
    done = int(r.requests()["finish_ns"].iloc[0])
    cache, _ = _run_cache(
        [(0, "read", 0, K), (done + 1, "write", 0, K), (S, "read", 0, K), (2 * S, "read", 0, K)], tmp_path
    )
    c = cache.counters()
    assert (c["hits"], c["misses"], c["fills"], c["fills_dropped"]) == (1, 2, 1, 1)
    assert dict(cache.cached) == {0: 0}  # the dropped fill's slot, free again, taken again


def test_the_least_recently_used_block_is_evicted(tmp_path):
    """Two slots: A, B, A (a hit: A is now the most recent), C evicts B (first-in-first-out
    would evict A), A hits, B misses and evicts C."""
    a, b, c = 0, 10 * K, 20 * K
    rows = [(0, "read", a, K), (S, "read", b, K), (2 * S, "read", a, K), (3 * S, "read", c, K),
            (4 * S, "read", a, K), (5 * S, "read", b, K)]
    cache, _ = _run_cache(rows, tmp_path, blocks=2)
    counts = cache.counters()
    assert (counts["hits"], counts["misses"], counts["fills"]) == (2, 4, 4)
    assert list(cache.cached.items()) == [(0, 0), (10, 1)]  # A in slot 0; B back in slot 1


def test_an_own_io_number_must_leave_the_id_flags_free():
    assert wattio.Io(2**62 - 1, "read", 0, 4096, own=True).id == (2**62 - 1) | 2**63
    with pytest.raises(ValueError, match=r"id: expected a number below 2\*\*62"):
        wattio.Io(2**62, "read", 0, 4096, own=True)
    with pytest.raises(ValueError, match="op: expected read, write, flush or discard"):
        wattio.Io(1, "erase", 0, 4096)


def test_the_shipped_cache_example_runs_beside_exces(tmp_path):
    """examples/laptop-cache-python.toml: the same devices, spin-down and workload as
    laptop-exces.toml (the configs differ only in the cache function), over six hours."""
    text = shorten((EXAMPLES / "laptop-cache-python.toml").read_text())
    exces = shorten((EXAMPLES / "laptop-exces.toml").read_text())
    assert text[text.index("[workload]"):] == exces[exces.index("[workload]"):]
    r = wattio.run(text, base_dir=EXAMPLES, out=tmp_path / "run", progress=False, report=False)
    counters = r.summary["functions"][0]["counters"]
    assert r.summary["errors"] == 0 and counters["hits"] > 0
    # Every host read is a hit or a miss; every fill that landed wrote one block to the card.
    reads = int((r.requests()["op"] == "read").sum())
    assert counters["hits"] + counters["misses"] == reads
    assert r.summary["devices"]["ecd"]["bytes_written"] >= 4096 * counters["fills"]


class Recorder:
    """An `out` that records the actions a function takes (a unit test's stand-in)."""

    def __init__(self):
        self.sent, self.replied = [], []

    def submit(self, io):
        self.sent.append(io)

    def reply(self, done):
        self.replied.append(done.io.id)


def test_a_slot_a_hit_still_reads_is_not_reused():
    """Driven by hand, one slot: A cached; a hit on A is reading the slot when a write drops A
    and a miss on B wants a slot — B gets none until the hit's read is back, then B's next
    miss is copied into the freed slot (reused at once, the copy would overwrite what the hit
    is reading)."""
    from types import SimpleNamespace

    cache = _read_cache()(blocks=1)
    cache.attach([SimpleNamespace(name="disk", id=0, capacity=10**9),
                  SimpleNamespace(name="flash", id=1, capacity=10**9)])
    out = Recorder()
    a, b = wattio.Io(1, "read", 0, K), wattio.Io(4, "read", 8 * K, K)
    cache.on_request(0, a, out)
    cache.on_completion(10, wattio.Completion(out.sent[-1], finished=10), out)
    fill = out.sent[-1]
    assert (fill.dev, fill.op, fill.offset, out.replied) == (1, "write", 0, [1])
    cache.on_completion(20, wattio.Completion(fill), out)  # A is in slot 0 now
    cache.on_request(30, wattio.Io(2, "read", 0, K), out)  # a hit: reads slot 0
    part = out.sent[-1]
    assert (part.dev, part.op, part.offset) == (1, "read", 0)
    cache.on_request(40, wattio.Io(3, "write", 0, K), out)  # A dropped while read
    cache.on_request(50, b, out)
    sent = len(out.sent)
    cache.on_completion(60, wattio.Completion(out.sent[-1]), out)  # B back from the disk
    assert len(out.sent) == sent and out.replied == [1, 4]  # no copy of B: no free slot
    cache.on_completion(70, wattio.Completion(part), out)  # the hit's read is back
    assert out.replied == [1, 4, 2] and cache.free == [0]
    cache.on_request(80, wattio.Io(5, "read", 8 * K, K), out)
    cache.on_completion(90, wattio.Completion(out.sent[-1]), out)
    assert (out.sent[-1].dev, out.sent[-1].op, out.sent[-1].offset) == (1, "write", 0)
    with pytest.raises(ValueError, match="status: expected ok, io-error"):
        wattio.Completion(part, status="fine")
