"""An LRU read cache of 4 KiB blocks on a flash device in front of a disk, written in Python:
a function with devices of its own and I/O of its own (laptop-cache-python.toml runs it; compare
with laptop-exces.toml, EXCES on the same devices).

A read whose blocks are all cached is served from the flash: one flash read per block into a
scratch buffer of the function's (`wattio.Io(..., own=True, scratch=k)`), copied into the host's
buffer at the block's place (`out.copy`), the host answered when the last is back. Any other
read goes to the disk, and when it returns its blocks are copied out of the host's buffer into
scratch buffers and written to the flash by the function's own writes, evicting the least
recently used. Writes and discards go to the disk and drop the cached copies of their blocks
(write-around). The four ways a cache like this returns stale data are closed: a block is
cached only once its copy has landed; a read that a write to its block overlapped at the disk
(issued while the read was out, or out when it was issued: the disk may serve them in either
order) fills nothing of that block; a fill that a write overtakes is thrown away when it
lands; and a slot is never reused while a hit is still reading it. `[run] check_data = true`
checks every read it answers against the writes before it (it found the second).

A flash slot that fails is retired, never used again (`slots_retired`): a fill that fails
leaves its block uncached, and a hit whose flash read fails is served again from the disk,
which holds every block's latest data in a write-around cache (`hit_fallbacks`).

The bytes really move: served live (`wattio serve`), the card holds the cached blocks and hits
return them.

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
        self.parts = {}  # own id (= its scratch buffer) -> [host I/O, flash slot, byte in the I/O, disk block]
        self.left = {}  # host I/O id -> [flash reads of it still out, whether one failed]
        self.reading = {}  # flash slot -> hits reading it
        self.orphans = set()  # slots given up while a hit was reading them
        self.retired = set()  # slots the flash failed an I/O of: never used again
        self.seq = 0  # host writes and discards issued so far
        self.written = {}  # disk block -> `seq` of the last write or discard issued to it
        self.writes_out = {}  # disk block -> host writes and discards of it at the disk
        self.misses_out = {}  # host read id -> (`seq` at its issue, blocks with a write out then)
        self.next_id = 0
        self.hits = self.misses = self.fills = self.fills_dropped = self.hit_fallbacks = 0

    def attach(self, devices):
        by_name = {d.name: d for d in devices}
        for key, name in (("disk", self.disk_name), ("flash", self.flash_name)):
            if name not in by_name:
                raise ValueError(f"{key}: no device {name!r} (have {', '.join(by_name)})")
        self.disk, self.flash = by_name[self.disk_name].id, by_name[self.flash_name].id
        if self.blocks * BLOCK > by_name[self.flash_name].capacity:
            raise ValueError(f"blocks: {self.blocks} blocks of 4 KiB do not fit on {self.flash_name}")

    def _own(self, op, slot):
        # Numbered from 1 up, each I/O with its own scratch buffer of the same number.
        self.next_id += 1
        return Io(self.next_id, op, slot * BLOCK, BLOCK, dev=self.flash, own=True, scratch=self.next_id)

    @staticmethod
    def _blocks(io):
        return range(io.offset // BLOCK, (io.offset + io.length + BLOCK - 1) // BLOCK)

    def on_request(self, now, io, out):
        whole = io.offset % BLOCK == 0 and io.length % BLOCK == 0 and io.length > 0
        blocks = self._blocks(io)
        if io.op == "read" and whole and all(b in self.cached for b in blocks):
            self.hits += 1
            self.left[io.id] = [len(blocks), False]
            for b in blocks:
                self.cached.move_to_end(b)
                slot = self.cached[b]
                self.reading[slot] = self.reading.get(slot, 0) + 1
                part = self._own("read", slot)
                self.parts[part.id] = [io, slot, b * BLOCK - io.offset, b]
                out.submit(part)
            return
        if io.op == "read":
            self.misses += 1
            self._to_disk(io, out)
            return
        elif io.op in ("write", "discard"):
            self.seq += 1
            for b in blocks:
                if b in self.cached:
                    self._release(self.cached.pop(b))
                if b in self.fill_of:  # a copy of the old contents is landing: drop it then
                    self.filling[self.fill_of.pop(b)][2] = False
                self.written[b] = self.seq
                self.writes_out[b] = self.writes_out.get(b, 0) + 1
        out.submit(io.replace(dev=self.disk))

    def _to_disk(self, read, out):
        # The blocks with a write out at the disk now: the read's bytes of them may be old.
        self.misses_out[read.id] = (self.seq, {b for b in self._blocks(read) if b in self.writes_out})
        out.submit(read.replace(dev=self.disk))

    def on_completion(self, now, done, out):
        own = done.io.id
        if own in self.parts:  # a hit's flash read, in scratch buffer `own`
            io, slot, at, block = self.parts.pop(own)
            left = self.left[io.id]
            if done.ok:
                out.copy(io, done.io.scratch, length=BLOCK, dst_offset=at)
            else:
                left[1] = True
                self.retired.add(slot)
                if self.cached.get(block) == slot:
                    del self.cached[block]
            out.release(done.io.scratch)  # read, copied: done with it
            self.reading[slot] -= 1
            if self.reading[slot] == 0:
                del self.reading[slot]
                if slot in self.orphans:  # evicted or invalidated while read: free now
                    self.orphans.remove(slot)
                    self._free(slot)
            left[0] -= 1
            if left[0] == 0:
                del self.left[io.id]
                if left[1]:  # the disk has every block's latest data: read them there
                    self.hit_fallbacks += 1
                    self._to_disk(io, out)
                else:
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
                if not done.ok:
                    self.retired.add(slot)
                self._free(slot)
            return
        io = done.io  # a host I/O the disk served
        if io.op in ("write", "discard"):
            for b in self._blocks(io):
                self.writes_out[b] -= 1
                if self.writes_out[b] == 0:
                    del self.writes_out[b]
        issued, busy = self.misses_out.pop(io.id, (0, set()))
        whole = io.offset % BLOCK == 0 and io.length % BLOCK == 0
        if io.op == "read" and done.ok and whole:
            # Blocks a write overlapped at the disk: the read's bytes of them may be old.
            stale = busy | {b for b in self._blocks(io) if self.written.get(b, 0) > issued}
            for b in self._blocks(io):
                if b in self.cached or b in self.fill_of or b in stale:
                    continue
                slot = self._slot()
                if slot is None:
                    break
                fill = self._own("write", slot)
                self.filling[fill.id] = [b, slot, True]
                self.fill_of[b] = fill.id
                # The block's bytes from the host's buffer (gone once replied) into the
                # fill's scratch buffer, which its write drains and frees.
                out.copy(fill.scratch, io, length=BLOCK, src_offset=b * BLOCK - io.offset)
                out.submit(fill)
        if not self.misses_out:  # no read is out that a write since could have overlapped
            self.written.clear()
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
            self._free(slot)

    def _free(self, slot):
        if slot not in self.retired:
            self.free.append(slot)

    def counters(self):
        return {
            "hits": float(self.hits),
            "misses": float(self.misses),
            "fills": float(self.fills),
            "fills_dropped": float(self.fills_dropped),
            "hit_fallbacks": float(self.hit_fallbacks),
            "slots_retired": float(len(self.retired)),
            "cached_blocks": float(len(self.cached)),
        }
