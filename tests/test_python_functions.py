"""A spin-down policy written in Python gives exactly the built-in policy's results."""

import json

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
