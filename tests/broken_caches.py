"""Broken variants of examples/read_cache.py, for the data checker's tests (simulated in
test_python_functions.py, served in test_live_serve.py): each returns wrong data in a way
timing alone does not show."""

import importlib.util
from pathlib import Path

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
