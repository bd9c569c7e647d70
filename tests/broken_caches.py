"""Broken variants of examples/read_cache.py, for the data checker's tests (simulated in
test_python_functions.py, served in test_live_serve.py): each returns wrong data in a way
timing alone does not show; and a function that leaks scratch buffers."""

import importlib.util
from pathlib import Path

import wattio

_path = Path(__file__).resolve().parent.parent / "examples" / "read_cache.py"
_spec = importlib.util.spec_from_file_location("read_cache", _path)
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
ReadCache = _mod.ReadCache


class Stale(ReadCache):
    """Keeps a block cached when the host writes it."""

    def on_request(self, now, io, out):
        if io.op == "write":  # the bookkeeping, without invalidating the cached copies
            self.seq += 1
            for b in self._blocks(io):
                self.written[b] = self.seq
                self.writes_out[b] = self.writes_out.get(b, 0) + 1
            out.submit(io.replace(dev=self.disk))
            return
        super().on_request(now, io, out)


class Overlapped(ReadCache):
    """Fills blocks from a read that a write overlapped at the disk (the example before the
    data checker found it)."""

    def on_request(self, now, io, out):
        super().on_request(now, io, out)
        if io.id in self.misses_out:  # fills whatever the read returned
            self.misses_out[io.id] = (float("inf"), set())


class Misplaced(ReadCache):
    """Copies every block of a hit to the start of the read."""

    def on_completion(self, now, done, out):
        class AtStart:
            def __getattr__(self, name):
                return getattr(out, name)

            def copy(self, dst, src, length=None, dst_offset=0, src_offset=0):
                out.copy(dst, src, length, 0, src_offset)

        super().on_completion(now, done, AtStart())


class Hoarder(wattio.Function):
    """Passes every request to device 0 and reads the block after each host read into a scratch
    buffer of its own, which it keeps (a read-ahead that never uses, writes or releases what it
    read). `claim` is what its `scratch_buffers()` says it keeps: None, no such method; "all",
    every one; "fewer", one less; "negative", -1."""

    def __init__(self, claim=None):
        self.kept = 0
        said = {"all": lambda: self.kept, "fewer": lambda: self.kept - 1, "negative": lambda: -1}
        if claim is not None:
            self.scratch_buffers = said[claim]

    def on_request(self, now, io, out):
        out.submit(io)
        if io.op == "read":
            self.kept += 1
            out.submit(wattio.Io(self.kept, "read", io.offset + io.length, 4096, own=True, scratch=self.kept))

    def on_completion(self, now, done, out):
        if done.io.scratch is None:  # a read-ahead back stays in its scratch buffer
            out.reply(done)
