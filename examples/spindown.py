"""A fixed-timeout spin-down policy written in Python.

It does what the built-in `policy = "fixed"` does: when a disk has no outstanding I/O, arm a
timer; if no request arrives before it fires, put the disk in its deepest sleep state. The
next request wakes the disk (the device model makes it wait for the spin-up).

Use it from a config:

    [[function]]
    kind = "python"
    class = "spindown.py:FixedTimeout"
    params = { timeout_s = 5 }

and `wattio run CONFIG`. `tests/test_python_functions.py` checks that it gives exactly the
same summary as the built-in policy.
"""

from wattio import Function


class FixedTimeout(Function):
    name = "python-fixed"

    def __init__(self, timeout_s: float):
        self.timeout = round(timeout_s * 1e9)
        self.sleep = {}  # device id -> sleep state id
        self.outstanding = {}
        self.asleep = {}
        self.spin_downs = 0

    def attach(self, devices):
        for d in devices:
            if d.deepest_sleep is not None:
                self.sleep[d.id] = d.deepest_sleep
                self.outstanding[d.id] = 0
                self.asleep[d.id] = False

    def on_start(self, now, out):
        for dev in self.sleep:
            out.set_timer(dev, now + self.timeout)

    def on_request(self, now, io, out):
        if io.dev in self.sleep:
            if self.outstanding[io.dev] == 0 and not self.asleep[io.dev]:
                out.cancel_timer(io.dev)
            self.asleep[io.dev] = False
            self.outstanding[io.dev] += 1
        out.submit(io)

    def on_completion(self, now, done, out):
        dev = done.io.dev
        if dev in self.sleep:
            self.outstanding[dev] -= 1
            if self.outstanding[dev] == 0:
                out.set_timer(dev, now + self.timeout)
        out.reply(done)

    def on_timer(self, now, timer, out):
        if self.outstanding[timer] == 0 and not self.asleep[timer]:
            self.asleep[timer] = True
            self.spin_downs += 1
            out.set_power(timer, self.sleep[timer])

    def counters(self):
        return {"spin_down_commands": float(self.spin_downs)}
