"""A Python function with metadata of its own (used by test_python_functions.py and
test_live_serve.py): it counts the host's writes in a 4 KiB record it reserves at the end of
the first device, loads the count at start, and writes it back (FUA) at every 4th write and at
the unload — then reads the record back and checks it holds what it wrote."""

import struct

import wattio

MAGIC = b"WATTIOLEDGER"
LOAD, SAVE, VERIFY = 1, 2, 3  # own I/O numbers, and scratch buffers of the same number


class Ledger(wattio.Function):
    name = "ledger"

    def __init__(self, every: int = 4):
        self.every = every
        self.count = self.loaded = self.saves = self.verified = 0
        self.saved = None  # the record being written, to check the read-back against
        self.ready = False

    def attach(self, devices):
        d = devices[0]
        self.dev, self.at = d.id, (d.capacity // 4096 - 1) * 4096

    def regions(self):
        return [(self.dev, self.at, 4096)]

    def _own(self, n, op):
        return wattio.Io(n, op, self.at, 4096, dev=self.dev, own=True, scratch=n, fua=op == "write")

    def on_start(self, now, out):
        out.submit(self._own(LOAD, "read"))

    def on_request(self, now, io, out):
        if io.offset + io.length > self.at:
            raise ValueError(f"host I/O at {io.offset} reaches the ledger's record at {self.at}")
        out.submit(io)

    def _save(self, out):
        if self.saved is not None:  # one save at a time; the next write saves again
            return
        self.saved = MAGIC + struct.pack("<Q", self.count)
        out.fill(SAVE, self.saved + bytes(4096 - len(self.saved)))
        out.submit(self._own(SAVE, "write"))

    def on_completion(self, now, done, out):
        own = done.io.id & (2**62 - 1) if done.io.id >= 2**63 else None
        if own == LOAD:
            out.take(LOAD, 4096, tag=LOAD)
        elif own == SAVE:
            self.saves += 1
            out.submit(self._own(VERIFY, "read"))
        elif own == VERIFY:
            out.take(VERIFY, 4096, tag=VERIFY)
        else:
            if done.io.op == "write" and done.ok:
                self.count += 1
                if self.count % self.every == 0:
                    self._save(out)
            out.reply(done)

    def on_bytes(self, now, tag, data, out):
        if tag == LOAD:
            if data.startswith(MAGIC):
                (self.loaded,) = struct.unpack_from("<Q", data, len(MAGIC))
                self.count += self.loaded
            elif any(data):
                out.fail("the ledger's record holds something else")
            self.ready = True
        elif tag == VERIFY:
            if data[: len(self.saved)] != self.saved:
                out.fail(f"the ledger read back {data[:20]!r}, wrote {self.saved[:20]!r}")
            else:
                self.verified += 1
            self.saved = None

    def on_stop(self, now, out):
        self._save(out)

    def counters(self):
        return {"count": float(self.count), "loaded": float(self.loaded), "saves": float(self.saves),
                "verified": float(self.verified)}
