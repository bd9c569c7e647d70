"""An LRU read cache of 4 KiB blocks on a flash device in front of a disk, written in Python:
a function with devices of its own and I/O of its own (laptop-cache-python.toml runs it; compare
with laptop-exces.toml, EXCES on the same devices).

A read whose blocks are all cached is served from the flash (one flash read per block, the
host answered when the last is back); any other read goes to the disk, and when it returns
its blocks are copied to the flash by the function's own writes (`wattio.Io(..., own=True)`),
evicting the least recently used. Writes and discards go to the disk and drop the cached copies
of their blocks (write-around). The three ways a cache like this returns stale data are
closed: a block is cached only once its copy has landed; a fill that a write overtakes is
thrown away when it lands; and a slot is never reused while a hit is still reading it.

For the simulator: its own I/O carries no bytes, which the live server refuses (a refused
fill is dropped, so live it serves every read from the disk; docs/functions/python.md).

    [[function]]
    kind = "python"
    class = "read_cache.py:ReadCache"
    params = { blocks = 65536, disk = "disk", flash = "flash" }
"""

from collections import OrderedDict

from wattio import Function, Io

BLOCK = 4096


class ReadCache(Function):
    name = "python-read-cache"

    def __init__(self, blocks: int = 65536, disk: str = "disk", flash: str = "flash"):
        if blocks < 1:
            raise ValueError(f"blocks: expected at least 1, got {blocks}")
        self.blocks, self.disk_name, self.flash_name = blocks, disk, flash
        self.cached = OrderedDict()  # disk block -> flash slot, least recently used first
        self.free = list(range(blocks - 1, -1, -1))
        self.filling = {}  # own id -> [disk block, flash slot, still wanted]
        self.fill_of = {}  # disk block -> own id of its fill in flight
        self.parts = {}  # own id -> [host I/O, flash slot]
        self.left = {}  # host I/O id -> flash reads of it still out
        self.reading = {}  # flash slot -> hits reading it
        self.orphans = set()  # slots given up while a hit was reading them
        self.next_id = 0
        self.hits = self.misses = self.fills = self.fills_dropped = 0

    def attach(self, devices):
        by_name = {d.name: d for d in devices}
        for key, name in (("disk", self.disk_name), ("flash", self.flash_name)):
            if name not in by_name:
                raise ValueError(f"{key}: no device {name!r} (have {', '.join(by_name)})")
        self.disk, self.flash = by_name[self.disk_name].id, by_name[self.flash_name].id
        if self.blocks * BLOCK > by_name[self.flash_name].capacity:
            raise ValueError(f"blocks: {self.blocks} blocks of 4 KiB do not fit on {self.flash_name}")

    def _own(self, op, slot):
        self.next_id += 1
        return Io(self.next_id, op, slot * BLOCK, BLOCK, dev=self.flash, own=True)

    @staticmethod
    def _blocks(io):
        return range(io.offset // BLOCK, (io.offset + io.length + BLOCK - 1) // BLOCK)

    def on_request(self, now, io, out):
        whole = io.offset % BLOCK == 0 and io.length % BLOCK == 0 and io.length > 0
        blocks = self._blocks(io)
        if io.op == "read" and whole and all(b in self.cached for b in blocks):
            self.hits += 1
            self.left[io.id] = len(blocks)
            for b in blocks:
                self.cached.move_to_end(b)
                slot = self.cached[b]
                self.reading[slot] = self.reading.get(slot, 0) + 1
                part = self._own("read", slot)
                self.parts[part.id] = [io, slot]
                out.submit(part)
            return
        if io.op == "read":
            self.misses += 1
        elif io.op in ("write", "discard"):
            for b in blocks:
                if b in self.cached:
                    self._release(self.cached.pop(b))
                if b in self.fill_of:  # a copy of the old contents is landing: drop it then
                    self.filling[self.fill_of.pop(b)][2] = False
        out.submit(io.replace(dev=self.disk))

    def on_completion(self, now, done, out):
        own = done.io.id
        if own in self.parts:  # a hit's flash read
            io, slot = self.parts.pop(own)
            self.reading[slot] -= 1
            if self.reading[slot] == 0:
                del self.reading[slot]
                if slot in self.orphans:  # evicted or invalidated while read: free now
                    self.orphans.remove(slot)
                    self.free.append(slot)
            self.left[io.id] -= 1
            if self.left[io.id] == 0:
                del self.left[io.id]
                out.reply(done.for_io(io))
            return
        if own in self.filling:  # a fill landed
            block, slot, wanted = self.filling.pop(own)
            if self.fill_of.get(block) == own:
                del self.fill_of[block]
            if wanted and done.ok:
                self.cached[block] = slot
                self.fills += 1
            else:
                self.fills_dropped += 1
                self.free.append(slot)
            return
        io = done.io  # a host I/O the disk served
        whole = io.offset % BLOCK == 0 and io.length % BLOCK == 0
        if io.op == "read" and done.ok and whole:
            for b in self._blocks(io):
                if b in self.cached or b in self.fill_of:
                    continue
                slot = self._slot()
                if slot is None:
                    break
                fill = self._own("write", slot)
                self.filling[fill.id] = [b, slot, True]
                self.fill_of[b] = fill.id
                out.submit(fill)
        out.reply(done)

    def _slot(self):
        """A free flash slot, evicting the least recently used block if none is."""
        if not self.free and self.cached:
            _, slot = self.cached.popitem(last=False)
            self._release(slot)
        return self.free.pop() if self.free else None

    def _release(self, slot):
        # A slot a hit is still reading is freed when that read is back (on_completion).
        if slot in self.reading:
            self.orphans.add(slot)
        else:
            self.free.append(slot)

    def counters(self):
        return {
            "hits": float(self.hits),
            "misses": float(self.misses),
            "fills": float(self.fills),
            "fills_dropped": float(self.fills_dropped),
            "cached_blocks": float(len(self.cached)),
        }
