"""What `wattio reproduce` writes: the side-by-side text, per-experiment files (tables as CSV
and Parquet, the figure as PNG and SVG), one `reproduce.html`, and `docs/reproduce.md`."""

from __future__ import annotations

import html
import json
from pathlib import Path

from wattio.reproduce.experiment import Experiment, Result
from wattio.reproduce.rules import FAILS, HOLDS


def _num(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


def comparison(r: Result):
    """The paper-vs-wattio table: one row per key of the paper's numbers."""
    import pandas as pd

    w = r.outcome.values if r.outcome else {}
    return pd.DataFrame(
        [{"key": k, "paper": float(p), "wattio": (float(w[k]) if w.get(k) is not None else None)}
         for k, p in r.experiment.paper_values.items()]
    )


# --- text ----------------------------------------------------------------------------------------


def text(r: Result) -> str:
    e = r.experiment
    out = [f"{e.name}  [{r.verdict}]  {r.seconds:.1f} s", f"  {e.title}",
           f"  paper:      {e.paper}", f"  reproduces: {e.reproduces}", f"  rule:       {e.rule.describe()}"]
    if r.reason:
        out.append(f"  reason:     {r.reason}")
    w = r.outcome.values if r.outcome else {}
    width = max(len(k) for k in e.paper_values)
    out.append(f"  {'':<{width}}  {'paper':>10}  {'wattio':>10}   ({e.quantity})")
    for k, p in e.paper_values.items():
        out.append(f"  {k:<{width}}  {_num(p):>10}  {_num(w.get(k)):>10}")
    if r.verdict == FAILS:
        out += [f"  {line}" for line in r.check.evidence if not line.startswith("ok")]
    out.append(f"  differs:    {e.differs}")
    if r.outcome:
        out += [f"  note:       {n}" for n in r.outcome.notes]
    return "\n".join(out)


# --- files ---------------------------------------------------------------------------------------


def write_files(r: Result, out: Path) -> dict[str, Path]:
    """``out/NAME/``: comparison.csv/.parquet (paper vs wattio), table.csv/.parquet (the full
    data), figure.png/.svg. Returns what was written by role."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = out / r.experiment.name
    d.mkdir(parents=True, exist_ok=True)
    written = {}
    cmp = comparison(r)
    cmp.to_csv(d / "comparison.csv", index=False)
    cmp.to_parquet(d / "comparison.parquet", index=False)
    written["comparison"] = d / "comparison.csv"
    if r.outcome is not None:
        r.outcome.table.to_csv(d / "table.csv", index=False)
        r.outcome.table.to_parquet(d / "table.parquet", index=False)
        written["table"] = d / "table.csv"
        if r.outcome.figure is not None:
            fig, ax = plt.subplots(figsize=(9, 4))
            r.outcome.figure(ax)
            fig.tight_layout()
            fig.savefig(d / "figure.png", dpi=100)
            fig.savefig(d / "figure.svg")
            plt.close(fig)
            written["figure"] = d / "figure.svg"
    (d / "result.json").write_text(json.dumps(r.to_json(), indent=2) + "\n")
    return written


def _verdict_html(v: str) -> str:
    color = {"holds": "#2ca02c", "fails": "#d62728"}.get(v, "#7f7f7f")
    return f'<b style="color:{color}">{html.escape(v)}</b>'


def write_html(results: list[Result], out: Path, quick: bool) -> Path:
    """One page for all experiments: the summary, then each side by side with its figure."""
    rows = "".join(
        f'<tr><td><a href="#{r.experiment.name}">{html.escape(r.experiment.name)}</a></td>'
        f"<td>{html.escape(r.experiment.reproduces)}</td><td>{html.escape(r.experiment.rule.describe())}</td>"
        f"<td>{_verdict_html(r.verdict)}</td></tr>"
        for r in results
    )
    sections = []
    for r in results:
        e = r.experiment
        w = r.outcome.values if r.outcome else {}
        table = "".join(
            f"<tr><td>{html.escape(k)}</td><td>{_num(p)}</td><td>{_num(w.get(k))}</td></tr>"
            for k, p in e.paper_values.items()
        )
        svg = out / e.name / "figure.svg"
        fig = svg.read_text() if svg.exists() else ""
        fig = fig[fig.find("<svg") :]  # inline: drop the XML prolog
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in (r.outcome.notes if r.outcome else []))
        reason = f"<p><b>reason:</b> {html.escape(r.reason)}</p>" if r.reason else ""
        failing = "".join(f"<li>{html.escape(x)}</li>" for x in r.check.evidence if not x.startswith("ok"))
        sections.append(
            f'<h2 id="{e.name}">{html.escape(e.name)}: {_verdict_html(r.verdict)}</h2>'
            f"<p>{html.escape(e.title)}</p><p><b>paper:</b> {html.escape(e.paper)}<br>"
            f"<b>reproduces:</b> {html.escape(e.reproduces)}<br><b>rule:</b> {html.escape(e.rule.describe())}<br>"
            f"<b>differs:</b> {html.escape(e.differs)}</p>{reason}"
            f"<table><tr><th>row</th><th>paper</th><th>wattio</th></tr>{table}</table>"
            f"{'<ul>' + failing + '</ul>' if failing else ''}<ul>{notes}</ul><figure>{fig}</figure>"
            f'<p>files: <a href="{e.name}/comparison.csv">comparison.csv</a>, '
            f'<a href="{e.name}/table.csv">table.csv</a> (and .parquet)</p>'
        )
    mode = "quick (reduced length)" if quick else "full length"
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>wattio reproduce</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}figure{{margin:1em 0}}</style></head>
<body><h1>wattio reproduce ({mode})</h1>
<table><tr><th>experiment</th><th>reproduces</th><th>rule</th><th>verdict</th></tr>{rows}</table>
{''.join(sections)}
</body></html>
"""
    path = out / "reproduce.html"
    path.write_text(page)
    return path


# --- docs/reproduce.md ---------------------------------------------------------------------------

MD_HEAD = """# Reproductions: the seed papers' numbers beside wattio's

Generated by `wattio reproduce --markdown docs/reproduce.md` (full length); do not edit by
hand. `tests/test_reproduce.py` checks that this file holds every experiment of the registry
as declared now.

```sh
wattio reproduce                      # every experiment, paper vs wattio, verdicts
wattio reproduce spindown --quick     # a system's experiments (name prefix), reduced length
wattio reproduce --out DIR --json     # tables (CSV, Parquet), figures (PNG, SVG), reproduce.html
wattio reproduce paraid --scheduler tcp://HOST:PORT   # the experiments' runs on a Dask cluster
```

Each experiment declares, before it runs, the paper and the table or figure it reproduces,
the paper's numbers, the verdict rule and how wattio's setup differs. Rules are code
(`python/wattio/reproduce/rules.py`): *exact* at the paper's printed precision, *within N %*,
*same ordering* of ranks the paper's text gives (a partial order: equal ranks are not
compared; near-equal values are ties), *same trend* step by step, and *bounds* for theorems.
A verdict is `holds`, `fails` (exit status 1) or `not-run` (the experiment needs a function
kind not yet registered, or a library workload absent here). CI runs `wattio reproduce
--quick` (captured traces cut to their first 15 minutes) and fails on a verdict that fails.

Workloads: the library's captured traces (`workloads/NAME/`, each README says which paper
workload it stands in for and how it differs), plus, where a result is a theorem that holds
for any input, one *generated* workload labelled as such.

An experiment hands its grid of independent runs (PARAID's replay speeds, the spin-down and
EXCES configurations) to `wattio.reproduce.workers.map_runs`: local processes (`--jobs N`),
or the workers of a Dask scheduler (`--scheduler`, as `wattio sweep`), which need the same
files (a shared file system, or one machine). The runs are pure, so the numbers are the same.

Adding an experiment: append an `Experiment` to `EXPERIMENTS` in the system's module under
`python/wattio/reproduce/` (`spindown.py`, `exces.py`, `paraid.py`; a new system adds a
module and its `System` to `SYSTEMS`), then regenerate this file.
"""


def declaration_md(e: Experiment) -> str:
    """The part of an experiment's section fixed before it runs (a test checks the committed
    docs/reproduce.md holds it for every experiment of the registry)."""
    src = "".join(f"\n  - {s}" for s in e.sources)
    return (
        f"## `{e.name}`\n\n{e.title}.\n\n"
        f"- paper: {e.paper}\n- reproduces: {e.reproduces}{src}\n- rule: {e.rule.describe()}\n"
        f"- differs: {e.differs}\n"
    )


def row_md(key: str, paper, wattio) -> str:
    return f"| {key} | {_num(paper)} | {_num(wattio)} |"


def markdown(results: list[Result]) -> str:
    summary = "\n".join(
        f"| [`{r.experiment.name}`](#{r.experiment.name}) | {r.experiment.reproduces} | "
        f"{r.experiment.rule.describe()} | **{r.verdict}** |"
        for r in results
    )
    parts = [MD_HEAD, "| experiment | reproduces | rule | verdict |\n|---|---|---|---|\n" + summary + "\n"]
    for r in results:
        e = r.experiment
        w = r.outcome.values if r.outcome else {}
        rows = "\n".join(row_md(k, p, w.get(k)) for k, p in e.paper_values.items())
        body = declaration_md(e) + f"- verdict: **{r.verdict}**" + (f" ({r.reason})" if r.reason else "") + "\n"
        body += f"\n| row | paper | wattio |\n|---|---|---|\n{rows}\n"
        if r.outcome and r.outcome.notes:
            body += "\n" + "".join(f"- {n}\n" for n in r.outcome.notes)
        parts.append(body)
    return "\n".join(parts)


def verdict_counts(results: list[Result]) -> str:
    n = {v: sum(r.verdict == v for r in results) for v in (HOLDS, FAILS, "not-run")}
    return ", ".join(f"{k} {v}" for k, v in n.items())
