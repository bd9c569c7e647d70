#!/usr/bin/env python3
"""Writes the seed corpus of the NBD server fuzz target (crates/live/fuzz/corpus/nbd_server)."""

import os
import struct

d = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "../../crates/live/fuzz/corpus/nbd_server"
)
IHAVEOPT = 0x49484156454F5054


def opt(o, data=b""):
    return struct.pack(">QII", IHAVEOPT, o, len(data)) + data


def go(name, items=(3,)):
    n = name.encode()
    return (
        struct.pack(">I", len(n))
        + n
        + struct.pack(">H", len(items))
        + b"".join(struct.pack(">H", i) for i in items)
    )


def req(flags, cmd, cookie, off, ln):
    return struct.pack(">IHHQQI", 0x25609513, flags, cmd, cookie, off, ln)


flags = struct.pack(">I", 3)
seeds = {
    "go_structured_rw": flags
    + opt(8)
    + opt(7, go("disk"))
    + req(0, 0, 1, 0, 4096)
    + req(1, 1, 2, 512, 16)
    + b"A" * 16
    + req(0, 3, 3, 0, 0)
    + req(0, 4, 4, 0, 4096)
    + req(2, 6, 5, 0, 4096)
    + req(0, 2, 6, 0, 0),
    "export_name_simple": struct.pack(">I", 1)
    + opt(1, b"disk")
    + req(0, 0, 1, 100, 3)
    + req(0, 1, 2, 0, 1)
    + b"z",
    "list_info_abort": flags + opt(3) + opt(6, go("aligned", (0, 1, 2, 3))) + opt(2),
    "aligned_export_errors": flags
    + opt(7, go("aligned"))
    + req(0, 0, 1, 1, 512)
    + req(0, 1, 2, 0, 512)
    + b"x" * 512
    + req(0, 0, 3, 1 << 20, 512),
    "bad_options": flags
    + opt(99, b"abc")
    + opt(5)
    + opt(7, b"\x00\x00\xff\xff")
    + opt(3, b"junk")
    + opt(7, go("nope")),
    "oversized_option": flags + struct.pack(">QII", IHAVEOPT, 42, 20000) + b"\x00" * 20000 + opt(2),
    "bad_request_magic": flags + opt(7, go("disk")) + b"\x00" * 28,
    "refused_write_payload": flags
    + opt(7, go("disk"))
    + req(0, 1, 1, (1 << 20) - 10, 100)
    + b"q" * 100
    + req(0, 0, 2, 0, 8),
    "bad_client_flags": struct.pack(">I", 0xFF),
    "nonfixed_other_option": struct.pack(">I", 0) + opt(3),
    # Hard disconnects at once: a 4 GiB option header, a 4 GiB WRITE header (no data follows).
    "huge_option_header": flags + struct.pack(">QII", IHAVEOPT, 7, 0xFFFFFFFF),
    "huge_write_header": flags + opt(7, go("disk")) + req(0, 1, 1, 0, 0xFFFFFFFF),
    # STARTTLS (the fuzz entry point's TLS-requiring connection takes TLS as transparent),
    # then structured replies, GO and a read; a second STARTTLS is refused.
    "starttls_then_go": flags + opt(5) + opt(8) + opt(5) + opt(7, go("disk")) + req(0, 0, 1, 0, 512),
}
os.makedirs(d, exist_ok=True)
for k, v in seeds.items():
    with open(os.path.join(d, k), "wb") as f:
        f.write(v)
print(len(seeds))
