"""The non-volatile cache simulator (crates/nvcache, docs/nvcache.md) from Python.

A *scheme* names how the PRAM last-level cache writes: ``bl`` (every cell), ``dw``
(differential write), ``rbw`` (read-before-write), ``diN`` (data inverting per N-bit unit),
``rbw+diN`` (data inverting on top of read-before-write: DI's bits, RBW's reads priced),
``hc`` (the hybrid PRAM + STT-RAM cache, DW in PRAM) and ``hc+diN``. Wear levelling is
separate: ``set_rotation`` and ``line_rotation`` intervals in PRAM line writes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

SCHEME_HELP = "bl, dw, rbw, diN (N = 2..64, a power of two), rbw+diN, hc, hc+diN"


def encoding(scheme: str) -> tuple[dict, bool]:
    """The LLC encoding of a scheme and whether it has the hybrid cache's write buffers."""
    s = scheme.strip().lower()
    if s.startswith("rbw+di"):
        s = s[4:]
    hybrid = s == "hc" or s.startswith("hc+")
    rest = "dw" if s == "hc" else s[3:] if hybrid else s
    if rest in ("bl", "dw", "rbw"):
        return {"kind": rest}, hybrid
    m = re.fullmatch(r"di(\d+)", rest)
    if m:
        return {"kind": "di", "unit": int(m.group(1))}, hybrid
    raise ValueError(f"scheme {scheme!r}: expected one of {SCHEME_HELP}")


def reads_first(scheme: str) -> bool:
    """Whether a scheme prices a line read before each PRAM write besides ``rbw`` itself
    (``rbw+diN``)."""
    return scheme.strip().lower().startswith("rbw+")


@dataclass(frozen=True)
class Cache:
    """An L1 + PRAM LLC configuration."""

    scheme: str = "dw"
    llc_bytes: int = 256 * 1024
    llc_ways: int = 8
    n_th: int = 4
    #: The hybrid cache's miss counter: "block" (CB_last's own run of misses) or "set"
    #: (the set's run, CB_last taking the buffer); docs/nvcache/hc.md.
    miss_count: str = "block"
    set_rotation: int | None = None
    line_rotation: int | None = None
    l1_bytes: int = 32 * 1024
    l1_ways: int = 8
    #: The trace replayed this many times back to back (caches and memory carried over):
    #: wear levelling's steady state needs its rotations to go round (docs/nvcache/wear-levelling.md).
    passes: int = 1

    def config(self) -> dict:
        enc, hybrid = encoding(self.scheme)
        return {
            "l1_bytes": self.l1_bytes,
            "l1_ways": self.l1_ways,
            "passes": self.passes,
            "llc": {
                "bytes": self.llc_bytes,
                "ways": self.llc_ways,
                "encoding": enc,
                "hybrid": {"n_th": self.n_th, "miss_count": self.miss_count} if hybrid else None,
                "wear_levelling": {"set_rotation": self.set_rotation, "line_rotation": self.line_rotation},
                "read_before_write": reads_first(self.scheme),
            },
        }


def simulate(trace: str | Path, cache: Cache) -> dict:
    """Runs a memory trace through ``cache``; the report (docs/nvcache.md) as a dict."""
    from wattio import _core

    return json.loads(_core.nvcache_run(str(trace), json.dumps(cache.config())))


def summary(report: dict) -> dict:
    """The headline numbers of a report: bit changes by cause, energy, lifetime, area."""
    t, c = report["traffic"], report["costs"]
    return {
        "n_lower": t["n_lower"], "n_upper": t["n_upper"], "n_swap": t["n_swap"], "n_wb": t["n_wb"],
        "n_wl": t["n_wl"], "pram_bits": t["n_lower"] + t["n_upper"] + t["n_swap"] + t["n_wl"],
        "llc_reads": t["reads"], "llc_read_hits": t["read_hits"], "llc_writes": t["writes"],
        "swaps": t["swaps"], "pram_writes": t["pram_writes"], "passes": report["config"]["passes"],
        "max_pram_cell_writes": report["max_pram_cell_writes"],
        "seconds": report["seconds"], "energy_j": c["total_j"], "lifetime_s": c["lifetime_s"],
        "area_mm2": c["area_mm2"], "fills_unknown": report["fills_unknown"],
    }
