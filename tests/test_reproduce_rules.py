"""The verdict rules of `wattio reproduce`: each holds on right numbers and fails on wrong ones."""

import pytest
from wattio.reproduce.rules import (
    FAILS,
    HOLDS,
    NOT_RUN,
    Between,
    Bound,
    Exact,
    SameOrdering,
    SameTrend,
    WithinPercent,
)

EQ2 = {"G1=2, idle": 33, "G1=2, active": 42}


def test_exact_rounds_to_the_papers_precision():
    assert Exact(0).check(EQ2, {"G1=2, idle": 33.2308, "G1=2, active": 41.875}).verdict == HOLDS
    # 41.4 prints as 41, not the paper's 42.
    c = Exact(0).check(EQ2, {"G1=2, idle": 33.2308, "G1=2, active": 41.4})
    assert c.verdict == FAILS
    assert any(line.startswith("FAIL G1=2, active") for line in c.evidence)
    # Half rounds away from zero, as printed tables do (Python's round(32.5) would give 32).
    assert Exact(0).check({"a": 33}, {"a": 32.5}).verdict == HOLDS
    assert Exact(1).check({"a": 33.2}, {"a": 33.25}).verdict == FAILS  # 33.3
    assert Exact(1).check({"a": 33.2}, {"a": 33.2308}).verdict == HOLDS


def test_within_percent():
    r = WithinPercent(5)
    assert r.check({"x": 100.0}, {"x": 104.9}).verdict == HOLDS
    assert r.check({"x": 100.0}, {"x": 95.0}).verdict == HOLDS
    assert r.check({"x": 100.0}, {"x": 105.1}).verdict == FAILS
    assert r.check({"x": -10.0}, {"x": -10.6}).verdict == FAILS
    assert r.check({"x": 0.0}, {"x": 0.0}).verdict == HOLDS
    assert r.check({"x": 0.0}, {"x": 1e-9}).verdict == FAILS


def test_bound_upper_and_lower():
    assert Bound(upper=True).check({"ratio": 2.0}, {"ratio": 1.99}).verdict == HOLDS
    assert Bound(upper=True).check({"ratio": 2.0}, {"ratio": 2.0}).verdict == HOLDS
    assert Bound(upper=True).check({"ratio": 2.0}, {"ratio": 2.01}).verdict == FAILS
    assert Bound(upper=False).check({"ratio": 1.0}, {"ratio": 0.999}).verdict == FAILS
    assert Bound(upper=False).check({"ratio": 1.0}, {"ratio": 1.0}).verdict == HOLDS



def test_between_includes_its_limits_and_ignores_the_papers_value():
    rule = Between(10, 100)
    assert rule.check({"isr": 68.5}, {"isr": 10.0}).verdict == HOLDS
    assert rule.check({"isr": 68.5}, {"isr": 100.0}).verdict == HOLDS
    assert rule.check({"isr": 68.5}, {"isr": 9.99}).verdict == FAILS
    assert rule.check({"isr": 68.5, "all": 0.0}, {"isr": 50.0, "all": 100.01}).verdict == FAILS


def test_same_ordering_with_a_partial_order_and_ties():
    # EXCES Office: 10 s best, 5 s and 15 s not ordered against each other.
    ranks = {"5 s": 2, "10 s": 1, "15 s": 2, "30 s": 3}
    r = SameOrdering()
    assert r.check(ranks, {"5 s": 12.0, "10 s": 10.0, "15 s": 11.0, "30 s": 13.0}).verdict == HOLDS
    assert r.check(ranks, {"5 s": 11.0, "10 s": 10.0, "15 s": 12.0, "30 s": 13.0}).verdict == HOLDS
    c = r.check(ranks, {"5 s": 9.0, "10 s": 10.0, "15 s": 11.0, "30 s": 13.0})
    assert c.verdict == FAILS
    assert [x for x in c.evidence if x.startswith("FAIL")] == ["FAIL 10 s (10) <= 5 s (9)"]
    # A tolerance treats near-equal values as tied: 1 % apart passes at 2 %, fails at 0.5 %.
    close = {"5 s": 10.1, "10 s": 10.2, "15 s": 10.0, "30 s": 10.3}
    assert SameOrdering(2.0).check(ranks, close).verdict == HOLDS
    assert SameOrdering(0.5).check(ranks, close).verdict == FAILS
    # Ranks that order nothing cannot be a verdict.
    assert r.check({"a": 1, "b": 1}, {"a": 1.0, "b": 2.0}).verdict == FAILS


def test_same_trend():
    paper = {"32x": 13.0, "64x": 8.2, "128x": 3.5}  # PARAID Table V: savings fall with load
    r = SameTrend(tolerance_percent=1.0)
    assert r.check(paper, {"32x": 20.0, "64x": 10.0, "128x": 1.0}).verdict == HOLDS
    c = r.check(paper, {"32x": 20.0, "64x": 25.0, "128x": 1.0})
    assert c.verdict == FAILS
    assert "FAIL 32x -> 64x: paper down, wattio up" in c.evidence
    # Flat where the paper moves is a failure too.
    assert r.check(paper, {"32x": 20.0, "64x": 20.1, "128x": 1.0}).verdict == FAILS
    assert r.check({"a": 1.0}, {"a": 1.0}).verdict == FAILS


def test_same_trend_within_groups():
    # PARAID Table IV: time in low gear rises with slower replay while switches fall; the step
    # from one series' last row to the next series' first is not a step.
    paper = {"low %/256x": 52.0, "low %/64x": 98.0, "switches/256x": 15.2, "switches/64x": 2.0}
    g = SameTrend(tolerance_percent=1.0, group_separator="/")
    good = {"low %/256x": 40.0, "low %/64x": 90.0, "switches/256x": 9.0, "switches/64x": 3.0}
    c = g.check(paper, good)
    assert c.verdict == HOLDS and len(c.evidence) == 2, c.evidence
    # Ungrouped, the cross-series step (98 -> 15.2 down; 90 -> 9 down) is compared too.
    assert len(SameTrend(1.0).check(paper, good).evidence) == 3
    bad = dict(good, **{"switches/64x": 12.0})
    assert "FAIL switches/256x -> switches/64x: paper down, wattio up" in g.check(paper, bad).evidence
    assert g.check({"a/x": 1.0, "b/x": 2.0}, {"a/x": 1.0, "b/x": 2.0}).verdict == FAILS


def test_same_trend_same_sign():
    paper = {"128x": 3.5, "64x": 8.2, "32x": 13.0}  # PARAID Table V
    rising_losses = {"128x": -1.7, "64x": -1.2, "32x": -0.9}
    assert SameTrend(2.0).check(paper, rising_losses).verdict == HOLDS
    c = SameTrend(2.0, same_sign=True).check(paper, rising_losses)
    assert c.verdict == FAILS and sum(e.startswith("FAIL") for e in c.evidence) == 3, c.evidence
    assert SameTrend(2.0, same_sign=True).check(paper, {"128x": 1, "64x": 2, "32x": 3}).verdict == HOLDS


@pytest.mark.parametrize("rule", [Exact(0), WithinPercent(1), Bound(), Between(0, 1), SameOrdering(), SameTrend()])
def test_missing_values_fail_and_no_run_is_not_run(rule):
    paper = {"a": 1, "b": 2}
    assert rule.check(paper, None).verdict == NOT_RUN
    c = rule.check(paper, {"a": 1.0})
    assert c.verdict == FAILS and c.evidence == ("b: no wattio value",)
    assert rule.check(paper, {"a": 1.0, "b": float("nan")}).verdict == FAILS


def test_same_ordering_within_groups():
    ranks = {"office: 5 s": 1, "office: none": 2, "postmark: 5 s": 1, "postmark: none": 2}
    values = {"office: 5 s": 700.0, "office: none": 800.0, "postmark: 5 s": 1900.0, "postmark: none": 2000.0}
    # Without groups the rows of different workloads are compared (postmark 5 s > office none).
    assert SameOrdering().check(ranks, values).verdict == FAILS
    assert SameOrdering(group_separator=": ").check(ranks, values).verdict == HOLDS
    values["postmark: 5 s"] = 2100.0
    c = SameOrdering(group_separator=": ").check(ranks, values)
    assert c.verdict == FAILS
    assert [x for x in c.evidence if x.startswith("FAIL")] == ["FAIL postmark: 5 s (2100) <= postmark: none (2000)"]
