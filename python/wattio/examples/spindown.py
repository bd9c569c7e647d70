"""A fixed-timeout spin-down policy written in Python: what the built-in `policy = "fixed"`
does, to the joule (tests/test_python_functions.py and tests/test_new_user.py compare them).

When a disk has no I/O outstanding, arm a timer; if no request comes before it fires, put the
disk in its deepest sleep state. The next request wakes it: the device model makes that
request wait for the spin-up. Use it from a config:

    [[function]]
    kind = "python"
    class = "spindown.py:FixedTimeout"
    params = { timeout_s = 5 }
"""

from wattio import Function


class FixedTimeout(Function):
    name = "python-fixed"

    def __init__(self, timeout_s: float):
        self.timeout = round(timeout_s * 1e9)  # events carry integer nanoseconds
        self.spin_downs = 0

    def attach(self, devices):
        # Disks that can sleep; I/O to any other device passes through untouched.
        self.sleep = {d.id: d.deepest_sleep for d in devices if d.deepest_sleep is not None}
        self.outstanding = dict.fromkeys(self.sleep, 0)

    def on_start(self, now, out):
        for dev in self.sleep:  # every disk starts idle: its first timeout runs from t = 0
            out.set_timer(dev, now + self.timeout)

    def on_request(self, now, io, out):
        if io.dev in self.sleep:
            out.cancel_timer(io.dev)
            self.outstanding[io.dev] += 1
        out.submit(io)

    def on_completion(self, now, done, out):
        dev = done.io.dev
        if dev in self.sleep:
            self.outstanding[dev] -= 1
            if self.outstanding[dev] == 0:  # the disk fell idle: arm its timer
                out.set_timer(dev, now + self.timeout)
        out.reply(done)

    def on_timer(self, now, dev, out):
        # Only an idle disk's timer is armed (any request cancels it): spin it down.
        self.spin_downs += 1
        out.set_power(dev, self.sleep[dev])

    def counters(self):
        return {"spin_down_commands": float(self.spin_downs)}
