"""What an experiment declares, and what running it gives.

An :class:`Experiment` is declared before it runs: its name (the system's prefix first,
``spindown-…``, ``paraid-…``), the paper and the table or figure it reproduces, the paper's
numbers, the verdict rule, how wattio's setup differs from the paper's, the function kinds
of the registry it exercises, and a ``run(quick)`` returning an :class:`Outcome`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from wattio.reproduce.rules import Check, Rule


class NotRunnable(Exception):
    """An experiment cannot run here (e.g. its workload's trace is absent): verdict not-run."""


@dataclass
class Outcome:
    """wattio's side of an experiment.

    ``values`` has the keys of the paper's numbers (what the rule compares); ``table`` is the
    full table (a pandas DataFrame, written as CSV and Parquet); ``figure(ax)`` draws the
    figure on a matplotlib Axes; ``notes`` say what the run used (workloads, derived
    parameters)."""

    values: dict
    table: object
    figure: Callable | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    #: The paper, as a citation.
    paper: str
    #: The table, figure, equation or section reproduced.
    reproduces: str
    #: The paper's numbers (or bounds, or ranks: see the rule), keyed by row.
    paper_values: dict
    rule: Rule
    #: How wattio's setup differs from the paper's.
    differs: str
    run: Callable[[bool], Outcome]
    #: What the numbers are (unit or quantity), shown as the column header.
    quantity: str = ""
    #: Function kinds of the registry (`wattio functions`) the experiment runs.
    functions: tuple[str, ...] = ()
    #: Where each paper number comes from, when not obvious from ``reproduces``.
    sources: tuple[str, ...] = ()

    @property
    def system(self) -> str:
        return self.name.split("-", 1)[0]


@dataclass
class Result:
    experiment: Experiment
    outcome: Outcome | None
    check: Check
    seconds: float
    #: Why it did not run, or the error it raised.
    reason: str = ""

    @property
    def verdict(self) -> str:
        return self.check.verdict

    def to_json(self) -> dict:
        """The record `wattio reproduce --json` prints: exactly these five keys."""
        e = self.experiment
        return {
            "name": e.name,
            "paper": e.paper_values,
            "wattio": None if self.outcome is None else self.outcome.values,
            "rule": e.rule.describe(),
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class System:
    """A seed system's experiments and its one-line headline for `wattio demo`."""

    prefix: str
    title: str
    experiments: tuple[Experiment, ...]
    #: One line, from a quick computation (the demo must stay fast).
    headline: Callable[[], str]
