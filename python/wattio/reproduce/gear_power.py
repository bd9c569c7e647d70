"""The power a gear-shifting RAID saves in its lowest gear: PARAID's Eq. 2, as a model.

Weddle, Oldham, Qian, Wang, Reiher, Kuenning, *PARAID: A Gear-Shifting Power-Aware RAID*,
ACM TOS 3(3), 2007, Sec. 4.1, Eq. (2) (``shared/seeds/004_a23cb758d8ba7563.txt``). With D
disks of which the lowest gear keeps G1 spinning and the other D − G1 in standby, the saving
against a conventional RAID with all D disks spinning is

    savings = 1 − [ (D − G1)·P_standby + G1·P_spinning ] / ( D·P_spinning )

where P_spinning is either the idle or the active power of a disk: the paper gives the range
between the two ("33 to 42 %" for D = 5, G1 = 2, Sec. 6.4; "22 to 28 %" for G1 = 3, Sec. 7.2).
It is an upper bound for a run: it ignores time spent in higher gears, spin-ups, update
propagation and extra parity (the paper attributes 4–10 % to those on Cello99).

The inputs are the paper's Table II (its Fujitsu MAP3367 disks, measured standby). The same
numbers are the catalogue entry ``catalogue/fujitsu-map3367.toml`` (a test keeps the two
equal), so a simulation of the same disks uses the same watts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DiskPower:
    """Power states of a disk in watts, with where the numbers come from."""

    active_w: float
    idle_w: float
    standby_w: float
    source: str


#: PARAID Table II: "Power consumption: 9.6 W (active) 6.5 W idle (spinning) 2.9 W standby
#: (spun-down, empirically measured)".
FUJITSU_MAP3367 = DiskPower(
    active_w=9.6,
    idle_w=6.5,
    standby_w=2.9,
    source="PARAID (Weddle et al., ACM TOS 2007) Table II: Fujitsu MAP3367, "
    "9.6 W active, 6.5 W idle, 2.9 W standby (measured)",
)

#: The paper's prototype: five disks in the RAID (Sec. 6.1, Table II).
PROTOTYPE_DISKS = 5


def lowest_gear_savings(disks: int, gear1: int, standby_w: float, spinning_w: float) -> float:
    """PARAID Eq. 2: the fraction of power saved with ``gear1`` of ``disks`` disks spinning at
    ``spinning_w`` and the rest in standby at ``standby_w``, against all spinning."""
    if not 0 < gear1 <= disks:
        raise ValueError(f"gear 1 must keep 1..{disks} disks spinning, got {gear1}")
    if not 0 <= standby_w < spinning_w:
        raise ValueError(f"standby power {standby_w} W must be below spinning power {spinning_w} W")
    powered = (disks - gear1) * standby_w + gear1 * spinning_w
    return 1 - powered / (disks * spinning_w)


def savings_range(disks: int, gear1: int, disk: DiskPower) -> dict[str, float]:
    """Eq. 2 on the idle basis and the active basis (the paper's range), in percent."""
    return {
        "idle basis": 100 * lowest_gear_savings(disks, gear1, disk.standby_w, disk.idle_w),
        "active basis": 100 * lowest_gear_savings(disks, gear1, disk.standby_w, disk.active_w),
    }
