"""Verdict rules: how a reproduction decides whether wattio's numbers agree with a paper's.

A rule is data, fixed in the experiment's declaration before anything runs, and code: its
``check(paper, wattio)`` compares the two dicts key by key (the keys are the table's rows,
e.g. ``"G1=2, idle basis"`` or ``"office, fixed 5 s"``) and returns a :class:`Check` with one
line of evidence per key. Every key of ``paper`` must be present in ``wattio``: a missing key
fails rather than passing by omission.

The kinds the issue names, plus bounds (theorems give bounds, not values):

* :class:`Exact` — equal at the paper's printed precision (the paper prints "33 to 42 %":
  wattio's value rounded to whole percent must be 33 and 42);
* :class:`WithinPercent` — within N % of the paper's value;
* :class:`SameOrdering` — the paper ranks the rows (a partial order: equal ranks are not
  ordered by the paper); every pair the paper orders is ordered the same way in wattio;
* :class:`SameTrend` — along the rows in order, the series moves the way the paper's does
  (up, down or flat at each step, within a tolerance for "flat");
* :class:`Bound` — wattio's value is at most (or at least) the paper's number, which is a
  bound (e.g. a competitive ratio of 2).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

HOLDS = "holds"
FAILS = "fails"
NOT_RUN = "not-run"
VERDICTS = (HOLDS, FAILS, NOT_RUN)


@dataclass(frozen=True)
class Check:
    """A rule's outcome: the verdict and, per key, why."""

    verdict: str
    evidence: tuple[str, ...]


def _missing(paper: dict, wattio: dict) -> list[str]:
    return [k for k in paper if k not in wattio or wattio[k] is None or _nan(wattio[k])]


def _nan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _fmt(v) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


class Rule:
    """Base class: ``describe()`` is the rule as printed beside the numbers."""

    def describe(self) -> str:
        raise NotImplementedError

    def check(self, paper: dict, wattio: dict | None) -> Check:
        if wattio is None:
            return Check(NOT_RUN, ("not run",))
        missing = _missing(paper, wattio)
        if missing:
            return Check(FAILS, tuple(f"{k}: no wattio value" for k in missing))
        return self._check(paper, wattio)

    def _check(self, paper: dict, wattio: dict) -> Check:
        raise NotImplementedError

    def to_dict(self) -> dict:
        return {"kind": type(self).__name__, "text": self.describe()}


def _verdict(lines: list[tuple[bool, str]]) -> Check:
    ok = all(good for good, _ in lines)
    return Check(HOLDS if ok else FAILS, tuple(("ok   " if g else "FAIL ") + s for g, s in lines))


@dataclass(frozen=True)
class Exact(Rule):
    """wattio's value rounded to ``decimals`` equals the paper's printed value."""

    decimals: int = 0

    def describe(self) -> str:
        unit = "whole units" if self.decimals == 0 else f"{self.decimals} decimal(s)"
        return f"exact at the paper's precision (rounded to {unit})"

    def _check(self, paper, wattio):
        lines = []
        for k, p in paper.items():
            # Round half away from zero, as a printed table does (Python's round() is banker's).
            scale = 10**self.decimals
            w = math.copysign(math.floor(abs(wattio[k]) * scale + 0.5), wattio[k]) / scale
            lines.append((w == p, f"{k}: wattio {_fmt(wattio[k])} -> {_fmt(w)}, paper {_fmt(p)}"))
        return _verdict(lines)


@dataclass(frozen=True)
class WithinPercent(Rule):
    """|wattio − paper| ≤ ``percent`` % of |paper|."""

    percent: float

    def describe(self) -> str:
        return f"within {self.percent:g} % of the paper's value"

    def _check(self, paper, wattio):
        lines = []
        for k, p in paper.items():
            w = wattio[k]
            off = abs(w - p) / abs(p) * 100 if p else (0.0 if w == 0 else math.inf)
            lines.append((off <= self.percent, f"{k}: wattio {_fmt(w)}, paper {_fmt(p)}, off {off:.2f} %"))
        return _verdict(lines)


@dataclass(frozen=True)
class Bound(Rule):
    """wattio ≤ paper (``upper``) or wattio ≥ paper (lower): the paper's number is a bound."""

    upper: bool = True

    def describe(self) -> str:
        return "at most the paper's bound" if self.upper else "at least the paper's bound"

    def _check(self, paper, wattio):
        lines = []
        for k, p in paper.items():
            w = wattio[k]
            good = w <= p if self.upper else w >= p
            rel = "<=" if self.upper else ">="
            lines.append((good, f"{k}: wattio {_fmt(w)} {rel} {_fmt(p)}"))
        return _verdict(lines)


@dataclass(frozen=True)
class Between(Rule):
    """lo <= wattio <= hi for every key: the paper states a range or an approximate figure
    ("tens of percent", "a few percent"), written here as limits before any run."""

    lo: float
    hi: float

    def describe(self) -> str:
        return f"between {self.lo:g} and {self.hi:g} (the paper's value for reference)"

    def _check(self, paper, wattio):
        return _verdict(
            [(self.lo <= wattio[k] <= self.hi, f"{k}: wattio {_fmt(wattio[k])}, paper {_fmt(p)}")
             for k, p in paper.items()]
        )


@dataclass(frozen=True)
class SameOrdering(Rule):
    """The paper's values are ranks (1 = smallest); for every pair the paper orders (different
    ranks), wattio's values are ordered the same way. Values within ``tolerance_percent`` of each
    other count as tied, and a tie contradicts no order (a measurement cannot separate them).
    With ``group_separator``, keys are ``GROUP<sep>ROW`` and only rows of one group are
    compared (e.g. timeouts within each workload)."""

    tolerance_percent: float = 0.0
    group_separator: str = ""

    def describe(self) -> str:
        tol = f", ties within {self.tolerance_percent:g} %" if self.tolerance_percent else ""
        grp = ", within each group" if self.group_separator else ""
        return f"same ordering as the paper's ranks (1 = lowest){grp}{tol}"

    def _group(self, key: str) -> str:
        return key.split(self.group_separator, 1)[0] if self.group_separator else ""

    def _check(self, paper, wattio):
        keys = list(paper)
        lines = []
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                if paper[a] == paper[b] or self._group(a) != self._group(b):
                    continue
                lo, hi = (a, b) if paper[a] < paper[b] else (b, a)
                slack = abs(wattio[hi]) * self.tolerance_percent / 100
                good = wattio[lo] <= wattio[hi] + slack
                lines.append((good, f"{lo} ({_fmt(wattio[lo])}) <= {hi} ({_fmt(wattio[hi])})"))
        if not lines:
            return Check(FAILS, ("the paper's ranks order no pair: nothing to check",))
        return _verdict(lines)


@dataclass(frozen=True)
class SameTrend(Rule):
    """Along the keys in order, each step of wattio's series goes the same way (up, down,
    flat) as the paper's. A step whose change is within ``tolerance_percent`` of the larger
    value is flat. With ``group_separator``, keys are ``GROUP<sep>ROW`` and steps are taken
    only between consecutive rows of one group (several series in one table). With
    ``same_sign``, every value must also have the paper's sign (savings that "grow" from -2 %
    to -1 % are not the paper's growing savings)."""

    tolerance_percent: float = 1.0
    group_separator: str = ""
    same_sign: bool = False

    def describe(self) -> str:
        grp = ", within each group" if self.group_separator else ""
        sign = ", every value of the paper's sign" if self.same_sign else ""
        return (f"same trend as the paper, step by step{grp} "
                f"(flat within {self.tolerance_percent:g} %){sign}")

    def _group(self, key: str) -> str:
        return key.split(self.group_separator, 1)[0] if self.group_separator else ""

    def _direction(self, a: float, b: float) -> int:
        if abs(b - a) <= max(abs(a), abs(b)) * self.tolerance_percent / 100:
            return 0
        return 1 if b > a else -1

    def _check(self, paper, wattio):
        keys = list(paper)
        if len(keys) < 2:
            return Check(FAILS, ("a trend needs at least two points",))
        names = {1: "up", 0: "flat", -1: "down"}
        lines = []
        for a, b in itertools.pairwise(keys):
            if self._group(a) != self._group(b):
                continue
            dp = self._direction(paper[a], paper[b])
            dw = self._direction(wattio[a], wattio[b])
            lines.append((dp == dw, f"{a} -> {b}: paper {names[dp]}, wattio {names[dw]}"))
        if not lines:
            return Check(FAILS, ("no group has two points: nothing to check",))
        if self.same_sign:
            for k in keys:
                good = math.copysign(1, paper[k]) == math.copysign(1, wattio[k])
                lines.append((good, f"{k}: sign of wattio {_fmt(wattio[k])} and paper {_fmt(paper[k])}"))
        return _verdict(lines)
