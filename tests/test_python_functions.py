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


class ReadCache(wattio.Function):
    """Whole 4 KiB reads of the disk cached on the SSD, filled by the function's own writes."""

    name = "read-cache"

    def __init__(self):
        self.map = {}  # disk block -> SSD block
        self.fills = {}  # own I/O id -> disk block
        self.next_id = 0
        self.hits = self.misses = 0

    def attach(self, devices):
        by_name = {d.name: d.id for d in devices}
        self.disk, self.ssd = by_name["disk"], by_name["ssd"]

    def on_request(self, now, io, out):
        b = io.offset // 4096
        if io.op == "read" and b in self.map:
            self.hits += 1
            return out.submit(io.replace(dev=self.ssd, offset=self.map[b] * 4096))
        if io.op == "read":
            self.misses += 1
        else:
            self.map.pop(b, None)  # a write makes the cached copy stale
        out.submit(io.replace(dev=self.disk))

    def on_completion(self, now, done, out):
        if done.io.id in self.fills:
            b = self.fills.pop(done.io.id)
            self.map[b] = len(self.map)
            return  # own I/O: nothing to answer upward
        io = done.io
        if io.dev == self.disk and io.op == "read" and io.offset // 4096 not in self.map:
            self.next_id += 1
            fill = wattio.Io(self.next_id, "write", len(self.map) * 4096, 4096, dev=self.ssd, own=True)
            self.fills[fill.id] = io.offset // 4096
            out.submit(fill)
        out.reply(done)

    def counters(self):
        return {"hits": self.hits, "misses": self.misses}


def test_a_python_cache_fills_its_ssd_with_its_own_writes(tmp_path):
    """Read, read again (an SSD hit, once the fill — the function's own write — is done),
    write (the copy goes stale), read (a miss again). Only the host's four requests are
    answered; the fills reach the SSD and come back to the function."""
    import pandas as pd

    cfg = """
[[device]]
name = "disk"
model = "wd800-fs2"

[[device]]
name = "ssd"
model = "samsung-870-evo-1tb"

[[function]]
kind = "python"
class = "x:y"
"""
    s = 1_000_000_000
    trace = pd.DataFrame(
        {
            "arrival_ns": [0, s, 2 * s, 3 * s],
            "op": ["read", "read", "write", "read"],
            "offset": [8192, 8192, 8192, 8192],
            "len": [4096] * 4,
        }
    )
    cache = ReadCache()
    r = wattio.run(cfg, trace=trace, functions={0: cache}, out=tmp_path / "run", progress=False, report=False)
    assert r.summary["requests"] == 4 and r.summary["errors"] == 0
    assert (cache.hits, cache.misses) == (1, 2)
    # The run ends with the host's last reply: the fill the last miss started is still out.
    assert list(cache.fills.values()) == [2] and cache.map == {}
    # With a clean unload the run waits for it.
    unloading = ReadCache()
    u = wattio.run(
        "[run]\nunload = true\n" + cfg, trace=trace, functions={0: unloading}, progress=False, report=False
    )
    assert (unloading.hits, unloading.misses) == (1, 2)
    assert unloading.fills == {} and unloading.map == {2: 0}
    assert u.summary["unload"]["left"] == []
    lat = r.requests()["latency_ns"].tolist()
    # The hit is served by the SSD: far below the disk's misses (seek and rotation).
    assert lat[1] < 1_000_000 < min(lat[0], lat[3])
    ssd = r.summary["devices"]["ssd"]
    assert ssd["residency_s"].get("active", 0) > 0


def test_an_own_io_number_must_leave_the_id_flags_free():
    assert wattio.Io(2**62 - 1, "read", 0, 4096, own=True).id == (2**62 - 1) | 2**63
    with pytest.raises(ValueError, match=r"id: expected a number below 2\*\*62"):
        wattio.Io(2**62, "read", 0, 4096, own=True)
    with pytest.raises(ValueError, match="op: expected read, write, flush or discard"):
        wattio.Io(1, "erase", 0, 4096)
