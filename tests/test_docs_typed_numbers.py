"""No typed results in the docs: docs/*.md prose outside the generated blocks
(`<!-- generated:NAME begin ... -->` … `end`, written by `cqb publish`) holds
no number shaped like a published result.

* an interval "[a, b]" with a decimal end (a statistic's interval, as the
  tables print them), whether or not today's tables hold it: a number typed
  from an earlier run equals nothing published today, and that is the case
  worth catching;
* a count "k/n" or "k of n" over a sample the published tables report (n a
  number of seeds or runs there: their n_seeds, cap, n_runs, replication
  columns, an "n=…" of a comparison's text; at least the figures' N = 10),
  0 ≤ k ≤ n; a chain
  such as 247/92/30 is a list, not a count.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from conftest import REPO

GENERATED = re.compile(r"<!-- generated:(\S+) begin.*?<!-- generated:\1 end -->", re.S)
INTERVAL = re.compile(r"\[\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\]")
COUNT = re.compile(r"(?<![\d/.])(\d+)\s*/\s*(\d+)(?![\d/.])|(?<![\d.])(\d+) of (\d+)(?![\d.])")
SIZE_COLUMNS = ("n_seeds", "cap", "n_runs", "n_values", "replications", "original_n", "replication_n")


def published_sizes(results: Path) -> set[int]:
    """Every sample size (seeds or runs) the published tables report."""
    sizes = set()
    for path in results.glob("*.tsv"):
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
        for column in table.columns:
            if column in SIZE_COLUMNS:
                sizes.update(int(float(v)) for v in table[column] if re.fullmatch(r"\d+(?:\.0+)?", v))
        text = path.read_text()
        sizes.update(int(n) for n in re.findall(r"\bn=(\d+)", text))
    return {n for n in sizes if n >= 10}  # the smallest sample the pipeline draws: the figures' N = 10


def typed_results(text: str, sizes: set[int]) -> list[str]:
    """The result-shaped numbers of a page's prose outside its generated blocks."""
    prose = GENERATED.sub("", text)
    found = [m.group(0) for m in INTERVAL.finditer(prose) if "." in m.group(1) + m.group(2)]
    for m in COUNT.finditer(prose):
        k, n = (int(g) for g in (m.groups()[:2] if m.group(1) else m.groups()[2:]))
        if n in sizes and k <= n:
            found.append(m.group(0))
    return found


def test_the_scan_finds_typed_results_and_leaves_the_rest():
    sizes = {140, 160, 400}
    text = ("at the cap: 62 of 140 seeds slower, 0.443 [0.338, 0.552]; 3/400 stalled\n"
            "<!-- generated:x begin (cqb publish; do not edit) -->\n65/141 [0.36, 0.57], 20 of 160\n"
            "<!-- generated:x end -->\nabove 1/2; seeds 247/92/30/57/60; [0, 1]; 19 of 1075 s; 5 of 160 runs")
    assert typed_results(text, sizes) == ["[0.338, 0.552]", "62 of 140", "3/400", "5 of 160"]


def test_docs_prose_holds_no_typed_results():
    sizes = published_sizes(REPO / "docs" / "results")
    assert {140, 160, 400} <= sizes  # what the powered reading's tables report
    found = {page.name: typed_results(page.read_text(), sizes) for page in sorted((REPO / "docs").glob("*.md"))}
    assert not {name: hits for name, hits in found.items() if hits}, (
        "typed result-shaped numbers in the docs' prose: move them into a generated block or remove them")
