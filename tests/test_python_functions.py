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
        self.sent, self.replied, self.copied, self.released = [], [], [], []

    def submit(self, io):
        self.sent.append(io)

    def reply(self, done):
        self.replied.append(done.io.id)

    def copy(self, dst, src, length=None, dst_offset=0, src_offset=0):
        # An I/O end by its id, a scratch buffer by its number.
        end = lambda e: e if isinstance(e, int) else ("io", e.id)
        self.copied.append((end(dst), end(src), length, dst_offset, src_offset))

    def release(self, k):
        self.released.append(k)


def test_a_read_a_write_overlapped_at_the_disk_fills_nothing_of_that_block():
    """Driven by hand: a miss on blocks 0–1 is at the disk when a write of block 1 is issued;
    the disk may serve them in either order, so the read's block 1 may be the old bytes: only
    block 0 is copied to the flash. A read issued while a write of its block is out is the
    same case (found by the data checker: the example cached such blocks before)."""
    from types import SimpleNamespace

    cache = _read_cache()(blocks=8)
    cache.attach([SimpleNamespace(name="disk", id=0, capacity=10**9),
                  SimpleNamespace(name="flash", id=1, capacity=10**9)])
    out = Recorder()
    r1 = wattio.Io(1, "read", 0, 2 * K)
    cache.on_request(0, r1, out)
    w = wattio.Io(2, "write", K, K)
    cache.on_request(5, w, out)
    cache.on_completion(10, wattio.Completion(r1), out)  # the read is back first
    fills = [io for io in out.sent if io.op == "write" and io.dev == 1]
    assert [(f.offset, f.scratch) for f in fills] == [(0, 1)] and out.copied == [(1, ("io", 1), K, 0, 0)]
    assert cache.fill_of == {0: fills[0].id | 2**63} or list(cache.fill_of) == [0]
    # A read of block 1 issued while the write is still out: not filled either.
    r2 = wattio.Io(3, "read", K, K)
    cache.on_request(20, r2, out)
    cache.on_completion(30, wattio.Completion(r2), out)
    assert len([io for io in out.sent if io.op == "write" and io.dev == 1]) == 1
    # Once the write is back, a new read of block 1 is filled.
    cache.on_completion(40, wattio.Completion(w), out)
    r3 = wattio.Io(4, "read", K, K)
    cache.on_request(50, r3, out)
    cache.on_completion(60, wattio.Completion(r3), out)
    fills = [io for io in out.sent if io.op == "write" and io.dev == 1]
    assert [f.offset // K for f in fills] == [0, 1] and out.replied == [1, 3, 2, 4]
    assert cache.written == {} and cache.writes_out == {} and cache.misses_out == {}


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
    # A's bytes copied out of the host's buffer into the fill's scratch buffer first.
    assert fill.scratch == 1 and out.copied == [(1, ("io", 1), K, 0, 0)]
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
    # Its scratch buffer copied into the host's read, then released.
    assert out.copied[-1] == (("io", 2), part.scratch, K, 0, 0) and out.released == [part.scratch]
    cache.on_request(80, wattio.Io(5, "read", 8 * K, K), out)
    cache.on_completion(90, wattio.Completion(out.sent[-1]), out)
    assert (out.sent[-1].dev, out.sent[-1].op, out.sent[-1].offset) == (1, "write", 0)
    with pytest.raises(ValueError, match="status: expected ok, io-error"):
        wattio.Completion(part, status="fine")


def test_a_flash_slot_that_fails_is_retired_and_its_block_cached_elsewhere(tmp_path):
    """The card fails every I/O on its first 4 KiB (slot 0, the first a fill takes). Block 3 is
    read three times: the first fill fails and retires slot 0, the second read fills slot 1, the
    third hits — checked. (Before retirement the failed slot went back to the free list, every
    fill took it again and failed, and nothing was ever cached.)"""
    import pandas as pd

    cfg = CACHE_CFG.replace('model = "sandisk-ultra-cf-2gb"',
                            'model = "sandisk-ultra-cf-2gb"\n\n[device.fault]\neio = [[0, 4096]]')
    cfg = cfg.replace("unload = true", "unload = true\ncheck_data = true")
    rows = [(i * S, "read", 3 * K, K) for i in range(3)]
    cache = _read_cache()(blocks=4)
    r = wattio.run(cfg, trace=pd.DataFrame(rows, columns=["arrival_ns", "op", "offset", "len"]),
                   functions={0: cache}, out=tmp_path / "run", progress=False, report=False)
    assert r.summary["errors"] == 0 and r.summary["data_check"]["blocks_checked"] == 3
    c = cache.counters()
    assert {k: c[k] for k in ("misses", "hits", "fills", "fills_dropped", "slots_retired", "hit_fallbacks")} == {
        "misses": 2, "hits": 1, "fills": 1, "fills_dropped": 1, "slots_retired": 1, "hit_fallbacks": 0}
    assert cache.cached == {3: 1} and sorted(cache.free) == [2, 3]


class Out:
    """Records what a function asks of its actions, for driving one by hand."""

    def __init__(self):
        self.did = []

    def __getattr__(self, name):
        return lambda *a, **kw: self.did.append((name, a))


def test_a_hit_whose_flash_read_fails_is_served_from_the_disk_and_its_slot_retired():
    """A two-block hit (blocks 5 and 6 in slots 0 and 1); the card fails block 6's read. The
    host's read is not failed: once both flash reads are back it goes to the disk, block 6 is
    uncached and slot 1 retired, block 5 stays in slot 0; the disk's reply answers the host."""
    cache = _read_cache()(blocks=4)
    dev = type("Dev", (), {})
    disk, flash = dev(), dev()
    disk.name, disk.id, disk.capacity = "disk", 0, 1 << 30
    flash.name, flash.id, flash.capacity = "flash", 1, 1 << 30
    cache.attach([disk, flash])
    cache.cached.update({5: 0, 6: 1})
    cache.free = [3, 2]
    host = wattio.Io(77, "read", 5 * K, 2 * K)
    out = Out()
    cache.on_request(0, host, out)
    (s5, (io5,)), (s6, (io6,)) = out.did
    assert (s5, s6, io5.offset, io6.offset, io5.dev) == ("submit", "submit", 0, K, 1)
    out = Out()
    cache.on_completion(10, wattio.Completion(io6, status="io-error", finished=10), out)
    cache.on_completion(11, wattio.Completion(io5, finished=11), out)
    assert [name for name, _ in out.did] == ["release", "copy", "release", "submit"]
    (again,) = out.did[-1][1]
    assert (again.id, again.dev, again.offset, again.length) == (77, 0, 5 * K, 2 * K)
    assert cache.cached == {5: 0} and cache.retired == {1} and cache.reading == {}
    out = Out()
    cache.on_completion(20, wattio.Completion(again, finished=20), out)
    assert [name for name, _ in out.did][-1] == "reply"
    c = cache.counters()
    assert (c["hits"], c["hit_fallbacks"], c["slots_retired"], c["misses"]) == (1, 1, 1, 0)


def _mixed_trace(n=3000, blocks=48, seed=5, gap_ns=10e6):
    """Aligned reads and writes of 1–4 blocks over a small footprint, exponential gaps of 10 ms
    on average (the disk's service time: often several out at once): hits, misses, fills,
    invalidations, overlapped and overtaken fills all happen."""
    import random

    rng = random.Random(seed)
    rows, t = [], 0
    for _ in range(n):
        size = rng.choice([1, 1, 2, 4])
        start = rng.randrange(blocks - size + 1)
        op = "write" if rng.random() < 0.3 else "read"
        t += int(rng.expovariate(1 / gap_ns))
        rows.append((t, op, start * K, size * K))
    return rows


def _checked_run(cache, rows, tmp_path, check=True):
    import pandas as pd

    cfg = CACHE_CFG.replace("unload = true", f"unload = true\ncheck_data = {str(check).lower()}")
    trace = pd.DataFrame(rows, columns=["arrival_ns", "op", "offset", "len"])
    return wattio.run(cfg, trace=trace, functions={0: cache}, out=tmp_path / "run", progress=False, report=False)


def test_the_python_read_cache_returns_the_latest_write_under_the_data_checker(tmp_path):
    """[run] check_data: every read the cache answers — hits copied from the card block by block,
    misses from the disk — holds the latest acknowledged write of each block; every read and
    block is checked (all aligned, none failed), as counted from the trace."""
    rows = _mixed_trace()
    cache = _read_cache()(blocks=16)
    r = _checked_run(cache, rows, tmp_path)
    c = cache.counters()
    assert c["hits"] > 300 and c["fills"] > 1000 and c["fills_dropped"] > 0
    reads = [ln for _, op, _, ln in rows if op == "read"]
    assert r.summary["data_check"] == {
        "block_bytes": 4096,
        "reads_checked": len(reads),
        "blocks_checked": sum(reads) // K,
        "blocks_unverified": 0,
    }
    # Every scratch buffer the cache used was drained by its write or released.
    assert cache.parts == {} and cache.filling == {} and cache.left == {}


def test_the_data_checker_catches_a_cache_that_serves_stale_or_misplaced_blocks(tmp_path):
    """Three broken caches: one that keeps a block cached when the host writes it, one that fills
    blocks from a read a write overlapped at the disk (the example before the checker found it),
    one that copies every block of a hit to the start of the read. Timing alone cannot tell (the
    unchecked run finishes without an error); the checker stops each at its first wrong read."""
    from broken_caches import Misplaced, Overlapped, Stale

    rows = _mixed_trace()
    for broken in [Stale, Overlapped, Misplaced]:
        what = broken.__name__
        r = _checked_run(broken(blocks=16), rows, tmp_path / what, check=False)
        assert r.summary["errors"] == 0 and "data_check" not in r.summary
        with pytest.raises(Exception, match=r"integrity: host read \d+ \(volume 0, bytes \d+\.\.\d+\)"):
            _checked_run(broken(blocks=16), rows, tmp_path / f"{what}-checked")


def test_scratch_buffers_are_numbered_by_the_function_and_checked():
    io = wattio.Io(7, "read", 0, K, dev=1, own=True, scratch=9)
    assert io.scratch == 9 and repr(io).endswith("dev=1, scratch=9)")
    assert wattio.Io(7, "read", 0, K, own=True).scratch is None
    assert wattio.Io(7, "read", 0, K).scratch is None  # a host request's buffer is the host's
    with pytest.raises(ValueError, match=r"scratch: only an I/O the function originates \(own=True\)"):
        wattio.Io(7, "read", 0, K, scratch=1)
    with pytest.raises(ValueError, match="scratch: a flush moves no bytes"):
        wattio.Io(7, "flush", 0, 0, own=True, scratch=1)
    with pytest.raises(ValueError, match=r"scratch: expected a scratch buffer number below 2\*\*40"):
        wattio.Io(7, "write", 0, K, own=True, scratch=2**40)


@pytest.mark.parametrize(
    "call, message",
    [
        ("out.copy(io, 3, length=2 * 4096)", "length: 8192 bytes do not fit: an I/O end has 4096 bytes"),
        ("out.copy(io, 3, dst_offset=4096)", "dst_offset: 4096 is past the 4096 bytes of Io"),
        ("out.copy(3, 4)", "length: required when an end is a scratch buffer"),
        ("out.copy(io, 3)", "length: required when an end is a scratch buffer"),
        ("out.copy(Io(1, 'read', 0, 4096, own=True), 3)", "dst: Io.* names no buffer"),
        ("out.copy(io, 2**40)", "src: expected a scratch buffer number below 2\\*\\*40"),
        ("out.release(-1)", "OverflowError|can't convert negative"),
    ],
)
def test_a_bad_copy_or_release_stops_the_run_naming_the_argument(tmp_path, call, message):
    import pandas as pd

    class Bad(wattio.Function):
        def on_request(self, now, io, out):
            eval(call, {"out": out, "io": io, "Io": wattio.Io})

    cfg = "[[device]]\nname = 'disk'\nmodel = 'wd800-fs2'\n\n[[function]]\nkind = 'python'\nclass = 'x:y'\n"
    trace = pd.DataFrame([(0, "read", 0, K)], columns=["arrival_ns", "op", "offset", "len"])
    with pytest.raises(Exception, match=message):
        wattio.run(cfg, trace=trace, functions={0: Bad()}, out=tmp_path / "run", progress=False, report=False)


@pytest.mark.parametrize(
    "when, length, message",
    [
        ("submit", K, r"copy of 4096 bytes from Scratch \{ id: \d+, offset: 0 \}: the buffer holds 0 bytes"),
        ("back", 2 * K, r"copy of 8192 bytes from Scratch \{ id: \d+, offset: 0 \}: the buffer holds 4096 bytes"),
    ],
    ids=["read-not-back", "past-its-end"],
)
def test_a_copy_out_of_a_scratch_buffer_must_stay_within_what_it_holds(tmp_path, when, length, message):
    """A read into scratch buffer 1, and a copy out of it into the host's 8 KiB read: before the
    read is back (live its bytes do not exist yet), or longer than the 4 KiB it brought. The
    simulator stops the run as the live server would (the kernel checks it for both)."""
    import pandas as pd

    class Early(wattio.Function):
        def on_request(self, now, io, out):
            self.host = io
            out.submit(wattio.Io(1, "read", 0, K, own=True, scratch=1))
            if when == "submit":
                out.copy(io, 1, length=length)

        def on_completion(self, now, done, out):
            if when == "back":
                out.copy(self.host, 1, length=length)
            out.release(1)
            out.reply(wattio.Completion(self.host, finished=now))

    cfg = "[[device]]\nname = 'disk'\nmodel = 'wd800-fs2'\n\n[[function]]\nkind = 'python'\nclass = 'x:y'\n"
    trace = pd.DataFrame([(0, "read", 0, 2 * K)], columns=["arrival_ns", "op", "offset", "len"])
    with pytest.raises(Exception, match=message):
        wattio.run(cfg, trace=trace, functions={0: Early()}, out=tmp_path / "run", progress=False, report=False)


@pytest.mark.parametrize(
    "check, claim, message",
    [
        (False, None, None),
        (True, None, (r"data check: 5 scratch buffer\(s\) alive and idle at the end, the functions hold at most 0 "
                      r"\(python 0\): a leak")),
        (True, "fewer", r"the functions hold at most 4 \(python 4\): a leak"),
        (True, "all", None),
        (True, "negative", r"function\[0\] \(x:y\): scratch_buffers raised OverflowError"),
    ],
    ids=["unchecked", "no-claim", "claims-too-few", "claims-all", "bad-claim"],
)
def test_a_checked_run_fails_a_function_that_leaks_scratch_buffers(tmp_path, check, claim, message):
    """Five host reads, each followed by a read-ahead into a scratch buffer the function never
    writes or releases. Unchecked, the run passes; with check_data the five buffers alive at the
    end must be no more than the function's scratch_buffers() says it keeps (0 when it has none):
    a leak fails the run naming each layer's claim, an honest claim passes, a bad one is the
    function's error."""
    import pandas as pd
    from broken_caches import Hoarder

    cfg = ("[run]\nunload = true\ncheck_data = " + str(check).lower() + "\n\n[[device]]\nname = 'disk'\n"
           "model = 'wd800-fs2'\n\n[[function]]\nkind = 'python'\nclass = 'x:y'\n")
    trace = pd.DataFrame([(i * S, "read", i * 8 * K, K) for i in range(5)], columns=["arrival_ns", "op", "offset", "len"])
    hoarder = Hoarder(claim)
    if message is None:
        r = wattio.run(cfg, trace=trace, functions={0: hoarder}, out=tmp_path / "run", progress=False, report=False)
        assert r.summary["requests"] == 5 and r.summary["devices"]["disk"]["ios"] == 10
        assert ("data_check" in r.summary) == check
    else:
        with pytest.raises(Exception, match=message):
            wattio.run(cfg, trace=trace, functions={0: hoarder}, out=tmp_path / "run", progress=False, report=False)


@pytest.mark.parametrize(
    "value, message",
    [
        ({"hits": 3, "ratio": 0.5}, None),
        ([("hits", 3)], None),
        ({"hits": "many"}, r"counters raised TypeError: expected a dict of str to a number"),
        (7, r"counters raised TypeError: expected a dict of str to a number or a list of \(str, number\), got int"),
        (None, r"counters raised TypeError: .*got NoneType"),
    ],
    ids=["dict", "pairs", "bad-value", "int", "none"],
)
def test_a_python_function_s_counters_reach_the_summary_or_fail_the_run(tmp_path, value, message):
    """counters() as a dict or a list of pairs lands in summary.json; any other shape is the
    function's error, named (it used to leave the summary without counters, silently)."""
    import pandas as pd

    class Counting(wattio.Function):
        def counters(self):
            return value

    cfg = "[[device]]\nname = 'disk'\nmodel = 'wd800-fs2'\n\n[[function]]\nkind = 'python'\nclass = 'x:y'\n"
    trace = pd.DataFrame([(0, "read", 0, K)], columns=["arrival_ns", "op", "offset", "len"])
    run = lambda: wattio.run(cfg, trace=trace, functions={0: Counting()}, progress=False, report=False)
    if message is None:
        assert run().summary["functions"][0]["counters"] == {k: float(v) for k, v in dict(value).items()}
    else:
        with pytest.raises(TypeError, match=r"function\[0\] \(x:y\): " + message):
            run()


def _ledger():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent / "python_ledger.py"
    spec = importlib.util.spec_from_file_location("python_ledger", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_python_function_keeps_metadata_in_a_region_it_reserves(tmp_path):
    """tests/python_ledger.py: a record at the end of the disk, loaded at start (zeros: a fresh
    disk), written back with FUA at every 4th host write and at the unload, each time read back
    and compared (out.fill, an own write from the scratch buffer, an own read, out.take,
    on_bytes). Ten writes: saves at 4, 8 and the unload (10), all three verified; the disk
    served the load, three saves and three read-backs besides the host's I/O."""
    import pandas as pd

    mod = _ledger()
    ledger = mod.Ledger()
    rows = [(i * 50_000_000, "write" if i % 2 == 0 else "read", i * K, K) for i in range(20)]
    cfg = ("[run]\nunload = true\ncheck_data = true\n\n[[device]]\nname = 'disk'\nmodel = 'wd800-fs2'\n\n"
           "[[function]]\nkind = 'python'\nclass = 'x:y'\n")
    r = wattio.run(cfg, trace=pd.DataFrame(rows, columns=["arrival_ns", "op", "offset", "len"]),
                   functions={0: ledger}, out=tmp_path / "run", progress=False, report=False)
    assert ledger.counters() == {"count": 10.0, "loaded": 0.0, "saves": 3.0, "verified": 3.0}
    disk = r.summary["devices"]["disk"]
    assert (disk["ios"], disk["bytes_written"], disk["bytes_read"]) == (20 + 7, (10 + 3) * K, (10 + 4) * K)
    assert r.summary["data_check"]["reads_checked"] == 10


def test_regions_and_metadata_calls_are_checked():
    """A region that is not a list of int triples stops the run naming regions(); a region past
    the device's end is refused by the stack; fill, take and release name a bad buffer number."""
    import pandas as pd

    trace = pd.DataFrame([(0, "read", 0, K)], columns=["arrival_ns", "op", "offset", "len"])
    cfg = "[[device]]\nname = 'disk'\nmodel = 'wd800-fs2'\n\n[[function]]\nkind = 'python'\nclass = 'x:y'\n"

    class Regions(wattio.Function):
        def __init__(self, value):
            self.value = value

        def regions(self):
            return self.value

    with pytest.raises(ValueError, match=r"regions\(\): expected a list of \(device id, offset, length\)"):
        wattio.run(cfg, trace=trace, functions={0: Regions([("disk", 0, 4096)])}, progress=False, report=False)
    with pytest.raises(RuntimeError, match=r"metadata region bytes 1125899906842624\.\.1125899906846720 lies past the end of device `disk`"):
        wattio.run(cfg, trace=trace, functions={0: Regions([(0, 2**50, 4096)])}, progress=False, report=False)

    class Bad(wattio.Function):
        def on_request(self, now, io, out):
            out.fill(2**40, b"x")

    with pytest.raises(ValueError, match=r"fill: expected a scratch buffer number below 2\*\*40"):
        wattio.run(cfg, trace=trace, functions={0: Bad()}, progress=False, report=False)


def test_the_read_cache_returns_the_latest_write_on_random_traces(tmp_path):
    """Property: on any trace — reads, writes and discards, aligned or not, in bursts that
    overlap at the disk — and any cache size, with the card failing some of its blocks (EIO),
    every read the example answers holds the latest acknowledged write (the data checker),
    and the cache ends with nothing in flight. Shown to fail with each of broken_caches.py's
    variants put in the example's place (host reads 42, 33 and 31 caught)."""
    import pandas as pd
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    request = st.tuples(
        # Gap to the previous arrival, ns: bursts that overlap at the disk (~10 ms a request)
        # and pauses in which fills land, so later reads hit.
        st.sampled_from([0, 500_000, 5_000_000, 20_000_000, 100_000_000]),
        st.sampled_from(["read", "read", "write", "discard"]),
        st.integers(0, 15),  # first block
        st.integers(1, 4),  # blocks
        st.sampled_from([0, 0, 0, 512]),  # a shift that makes the request unaligned
    )

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(request, min_size=20, max_size=120), st.integers(1, 8), st.booleans())
    def check(reqs, blocks, faulty):
        rows, t = [], 0
        for gap, op, first, n, shift in reqs:
            t += gap
            rows.append((t, op, first * K + shift, n * K - shift))
        cfg = CACHE_CFG.replace("unload = true", "unload = true\ncheck_data = true")
        if faulty:  # the card fails its slots 1 and 2
            cfg = cfg.replace('model = "sandisk-ultra-cf-2gb"', 'model = "sandisk-ultra-cf-2gb"\nfault = { eio = [[4096, 12288]] }')
        cache = _read_cache()(blocks=blocks)
        trace = pd.DataFrame(rows, columns=["arrival_ns", "op", "offset", "len"])
        r = wattio.run(cfg, trace=trace, functions={0: cache}, progress=False, report=False)
        assert r.summary["requests"] == len(rows)
        assert cache.parts == {} and cache.left == {} and cache.filling == {} and cache.misses_out == {}

    check()
