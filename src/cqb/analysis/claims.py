"""The claims tables: every claim's primary reading (:func:`evaluate_claims`),
every registered reading with its mark (:func:`claims_readings`), the
powered reading's columns beside them, and their Markdown.

The claims machinery is split in three modules, whose public names this
module re-exports so that ``from cqb.analysis.claims import …`` keeps working:

* :mod:`cqb.analysis.claims_registry`: the types of the registry (ClaimSpec,
  Reading, ClaimResult, Comparison);
* :mod:`cqb.analysis.claim_statistics`: the statistic and interval of each
  claim kind (claim_comparisons, check_claim, the intervals);
* :mod:`cqb.analysis.verdict_rules`: the verdict rules, one implementation
  each, shared with the powered reading and the calibration study.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from .claim_statistics import (COMPARISONS, bootstrap_mean_interval, check_best, check_claim,  # noqa: F401
                               check_converges, check_drops, check_grows, check_ordered, check_stall_rate,
                               claim_comparisons, drop_from_peak, mean_interval, skew_corrected_bounds, summarise)
from .claims_registry import (CLAIM_COLUMNS, KINDS, METRICS, READING_FIELDS, TESTABLE, ClaimResult,  # noqa: F401
                              ClaimSpec, Comparison, Reading)
from .summaries import binomial_interval  # noqa: F401
from .verdict_rules import (DECIDED, FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, TIE, VERDICTS,  # noqa: F401
                            combine, decisive, fail_level, interval_verdict, two_level_verdict)

ROBUST, READING_DEPENDENT, BY_CONSTRUCTION = "robust", "reading-dependent", "by construction"


def _margin(margins, kind):
    return float((margins or {}).get(kind, 0.0))


def evaluate_claims(specs: Sequence[ClaimSpec], runs_tables: Mapping[str, pd.DataFrame],
                    margins: Mapping[str, float] | None = None) -> pd.DataFrame:
    """The claims table: one row per claim, in the order given (``margins``:
    δ per claim kind, 0 when not given)."""
    rows = []
    for spec in specs:
        if spec.experiment not in runs_tables:
            raise ValueError(f"claim {spec.name!r}: no run table for experiment {spec.experiment!r}")
        result = check_claim(runs_tables[spec.experiment], spec, margin=_margin(margins, spec.kind))
        rows.append({"claim": spec.name, "figure": spec.figure, "experiment": spec.experiment,
                     "statement": spec.statement, "statistic": result.statistic, "value": result.value,
                     "ci_low": result.ci_low, "ci_high": result.ci_high, "verdict": result.verdict,
                     "n_seeds": result.n_seeds, "detail": result.detail})
    return pd.DataFrame(rows, columns=list(CLAIM_COLUMNS))


READING_COLUMNS = ("claim", "figure", "source", "reading", "primary", "kind", "metric", "statistic", "value",
                   "ci_low", "ci_high", "confidence", "n", "verdict", "why", "seeds")


def reading_rows(spec: ClaimSpec, runs: pd.DataFrame, margins, confidence=0.95, seeds="") -> list[dict]:
    """One row per registered reading of a claim (the primary first) on one run table."""
    rows = []
    for primary, reading in [(True, spec)] + [(False, spec.alternative(r)) for r in spec.readings]:
        result = check_claim(runs, reading, confidence, _margin(margins, reading.kind))
        rows.append({"claim": spec.name, "figure": spec.figure, "source": spec.source,
                     "reading": reading.reading or ("primary" if primary else ""), "primary": primary,
                     "kind": reading.kind, "metric": reading.metric, "statistic": result.statistic,
                     "value": result.value, "ci_low": result.ci_low, "ci_high": result.ci_high,
                     "confidence": confidence, "n": result.n_seeds, "verdict": result.verdict,
                     "why": reading.why, "seeds": seeds})
    return rows


def reading_mark(spec: ClaimSpec | None, verdicts: Sequence[str]) -> str:
    """robust when every registered reading gives the primary's verdict,
    reading-dependent otherwise; by construction for a check that cannot fail."""
    if spec is not None and spec.by_construction:
        return BY_CONSTRUCTION
    return ROBUST if len(set(verdicts)) == 1 else READING_DEPENDENT


def readings_table(rows: Sequence[Mapping], specs: Mapping[str, ClaimSpec]) -> pd.DataFrame:
    """The readings table with each claim's mark (column ``mark``)."""
    table = pd.DataFrame(list(rows), columns=list(READING_COLUMNS))
    marks = {claim: reading_mark(specs.get(claim), list(group["verdict"]))
             for claim, group in table.groupby("claim", sort=False)}
    table["mark"] = table["claim"].map(marks)
    return table


def readings_markdown(table: pd.DataFrame, header: str = "") -> str:
    """The readings table as Markdown: per claim, every reading's statistic,
    value [interval], n and verdict, the primary first, and the mark."""
    lines = [header, ""] if header else []
    lines += ["| claim | reading | metric | value [interval] | level | n | verdict | mark |",
              "| --- | --- | --- | --- | ---: | ---: | --- | --- |"]
    for row in table.itertuples():
        name = f"**{row.reading}** (primary)" if row.primary else row.reading
        lines.append(f"| `{row.claim}` | {name} | {row.metric} | {_interval(row.value, row.ci_low, row.ci_high)} | "
                     f"{100 * row.confidence:.4g}% | {row.n} | {row.verdict} | {row.mark} |")
    lines += ["", "Why each reading:", ""]
    lines += [f"- `{row.claim}`, {row.reading}: {row.why}" for row in table.itertuples() if row.why]
    return "\n".join(lines) + "\n"


def claims_readings(specs: Sequence[ClaimSpec], runs_tables: Mapping[str, pd.DataFrame], margins,
                    powered_readings: pd.DataFrame | None = None) -> pd.DataFrame:
    """The readings table: every registered reading of every claim, on the
    powered reading's runs where the claim has one (its last look), else on
    the figures' seeds; with each claim's mark."""
    powered = {} if powered_readings is None else {
        claim: group for claim, group in powered_readings.groupby("claim", sort=False)}
    rows = []
    for spec in specs:
        if spec.name in powered:
            rows += powered[spec.name].to_dict("records")
        else:
            rows += reading_rows(spec, runs_tables[spec.experiment], margins, seeds="figures")
    table = readings_table(rows, {spec.name: spec for spec in specs})
    table["primary"] = table["primary"].astype(str).str.lower().isin(("true", "1"))
    return table


def with_marks(table: pd.DataFrame, readings: pd.DataFrame, by_construction: Mapping[str, str]) -> pd.DataFrame:
    """The claims table with each claim's mark (robust, reading-dependent, by
    construction) and the reason of a check that holds by construction."""
    marks = dict(zip(readings["claim"], readings["mark"]))
    table = table.copy()
    table["mark"] = [BY_CONSTRUCTION if by_construction.get(c) else marks.get(c, ROBUST) for c in table["claim"]]
    table["by_construction"] = [by_construction.get(c, "") for c in table["claim"]]
    return table


POWERED_MERGE = {"value": "powered_value", "ci_low": "powered_ci_low", "ci_high": "powered_ci_high",
                 "confidence": "powered_confidence", "verdict": "powered_verdict", "n_seeds": "powered_n_seeds",
                 "cap": "powered_cap", "n_runs": "powered_n_runs", "looks": "powered_looks",
                 "excluded": "powered_excluded", "detail": "powered_detail"}


def with_powered(table: pd.DataFrame, powered: pd.DataFrame) -> pd.DataFrame:
    """The claims table with the powered reading's columns beside the first
    reading's (empty for a claim without a powered reading)."""
    extra = powered[["claim", *POWERED_MERGE]].rename(columns=POWERED_MERGE)
    unknown = set(extra["claim"]) - set(table["claim"])
    if unknown:
        raise ValueError(f"powered claims {sorted(unknown)} are not in the claims table")
    return table.merge(extra, on="claim", how="left")


def _interval(value, low, high):
    if not (isinstance(value, (int, float)) and math.isfinite(value)):
        return ""
    return f"{value:.3g} [{low:.3g}, {high:.3g}]" if math.isfinite(low) else f"{value:.3g}"


def claims_markdown(table: pd.DataFrame, header: str = "") -> str:
    """The claims table as Markdown: claim, figure, value [interval], verdict,
    n; with the powered reading's columns beside them when the table has them."""
    powered = "powered_verdict" in table.columns
    lines = [header] if header else []
    if powered:
        has = table["powered_verdict"].map(lambda v: isinstance(v, str) and bool(v))

        def counts(verdicts):
            return ", ".join(f"{int((verdicts == v).sum())} {v}" for v in VERDICTS)

        lines += [f"Verdicts of the {int(has.sum())} claims with both readings — at the figures' seeds: "
                  f"{counts(table.loc[has, 'verdict'])}; powered: {counts(table.loc[has, 'powered_verdict'])}.",
                  ""]
    marked = "mark" in table.columns
    mark_head = " mark |" if marked else ""
    mark_rule = " --- |" if marked else ""
    if powered:
        lines += ["| claim | figure | statistic | value [95% interval] | verdict | n seeds | "
                  "powered: value [interval] | powered verdict | powered n (cap) |" + mark_head,
                  "| --- | --- | --- | --- | --- | ---: | --- | --- | ---: |" + mark_rule]
    else:
        lines += ["| claim | figure | statistic | value [95% interval] | verdict | n seeds |" + mark_head,
                  "| --- | --- | --- | --- | --- | ---: |" + mark_rule]
    for row in table.itertuples():
        line = (f"| {row.statement} | {row.figure} | {row.statistic} | "
                f"{_interval(row.value, row.ci_low, row.ci_high)} | **{row.verdict}** | {row.n_seeds} |")
        if powered:
            if isinstance(row.powered_verdict, str) and row.powered_verdict:
                line += (f" {_interval(row.powered_value, row.powered_ci_low, row.powered_ci_high)} "
                         f"({100 * row.powered_confidence:.4g}%) | **{row.powered_verdict}** | "
                         f"{int(row.powered_n_seeds)} ({int(row.powered_cap)}) |")
            else:
                line += " | | |"
        if marked:
            line += f" {row.mark} |"
        lines.append(line)
    if marked:
        lines += ["", "Mark: **robust** when every registered reading of the claim gives the same verdict "
                  "(docs/results/claims_readings.md), **reading-dependent** otherwise; **by construction**: "
                  "a check that cannot fail, shown and not counted as evidence:", ""]
        lines += [f"- `{row.claim}`: {row.by_construction}" for row in table.itertuples() if row.by_construction]
    lines += ["", "Every comparison behind each verdict:", ""]
    lines += [f"- `{row.claim}`: {row.detail}" for row in table.itertuples()]
    if powered:
        rows = [row for row in table.itertuples()
                if isinstance(row.powered_verdict, str) and row.powered_verdict]
        lines += ["", "The powered reading (fresh seeds, looks with Bonferroni-split levels; "
                  "docs/verdicts.md): per claim the looks, the runs simulated, and every comparison "
                  "with the look that decided it:", ""]
        for row in rows:
            excluded = f"; {row.powered_excluded}" if isinstance(row.powered_excluded, str) and row.powered_excluded else ""
            lines.append(f"- `{row.claim}` (**{row.powered_verdict}**, looks {row.powered_looks}; "
                         f"{int(row.powered_n_runs)} runs{excluded}): {row.powered_detail}")
    return "\n".join(lines) + "\n"


PER_POLICY_COLUMNS = ("claim", "policy", "figure", "statement", "verdict", "source", "value", "ci_low", "ci_high",
                      "n_seeds", "by_construction", "figures_verdict", "figures_value", "figures_ci_low",
                      "figures_ci_high", "figures_n_seeds", "powered_verdict", "confirmatory_verdict", "detail")


def _state_comparisons(state: Mapping | None, policy: str) -> list:
    """The comparisons of a look's state that read only ``policy``'s runs."""
    if not state:
        return []
    return [Comparison(r["key"], tuple(tuple(u) for u in r["units"]), r["value"],
                       math.nan if r["ci_low"] is None else r["ci_low"],
                       math.nan if r["ci_high"] is None else r["ci_high"], r["verdict"], r["n"], r["text"])
            for r in state["comparisons"] if all(u[0] == policy for u in r["units"])]


def per_policy_rows(spec: ClaimSpec, runs: pd.DataFrame, margin: float, powered_state: Mapping | None = None,
                    confirmatory_states: Mapping[str, Mapping] | None = None) -> list[dict]:
    """One row per policy of a ``per_policy`` claim: that policy's comparisons
    combined, at the figures' seeds, in the powered reading's last look and,
    where the policy has a confirmatory study, with the study's comparisons in
    place of the powered ones they repeat. The headline (``verdict``,
    ``source``) is the confirmatory one where there is one, else the powered
    one, else the figures'."""
    rows = []
    for policy in spec.policies:
        own = spec.for_policy(policy)
        figures = check_claim(runs, own, margin=margin)
        row = {"claim": spec.name, "policy": policy, "figure": spec.figure, "statement": spec.statement,
               "by_construction": own.by_construction, "figures_verdict": figures.verdict,
               "figures_value": figures.value, "figures_ci_low": figures.ci_low, "figures_ci_high": figures.ci_high,
               "figures_n_seeds": figures.n_seeds, "powered_verdict": "", "confirmatory_verdict": ""}
        headline, source, n_seeds = figures, "figures", figures.n_seeds
        powered = _state_comparisons(powered_state, policy)
        if powered:
            headline = summarise(own, powered, powered_state["statistic"], own.kind not in ("converges", "stall_rate"))
            source, n_seeds = "powered", powered_state["n"]
            row["powered_verdict"] = headline.verdict
        confirmatory = (confirmatory_states or {}).get(f"{spec.name}__{policy}")
        if confirmatory:
            again = _state_comparisons(confirmatory, policy)
            keys = {c.key for c in again}
            merged = again + [c for c in powered if c.key not in keys]
            headline = summarise(own, merged, confirmatory["statistic"], own.kind not in ("converges", "stall_rate"))
            source, n_seeds = "confirmatory", confirmatory["n"]
            row["confirmatory_verdict"] = combine(c.verdict for c in again)
        row.update({"verdict": headline.verdict, "source": source, "value": headline.value,
                    "ci_low": headline.ci_low, "ci_high": headline.ci_high, "n_seeds": n_seeds,
                    "detail": headline.detail})
        rows.append(row)
    return rows


def per_policy_table(specs: Sequence[ClaimSpec], runs_tables: Mapping[str, pd.DataFrame], margins,
                     powered_states: Mapping[str, Mapping] | None = None,
                     confirmatory_states: Mapping[str, Mapping] | None = None) -> pd.DataFrame:
    """The per-policy readings of every ``per_policy`` claim (:func:`per_policy_rows`)."""
    rows = []
    for spec in specs:
        if spec.per_policy:
            rows += per_policy_rows(spec, runs_tables[spec.experiment], _margin(margins, spec.kind),
                                    (powered_states or {}).get(spec.name), confirmatory_states)
    return pd.DataFrame(rows, columns=list(PER_POLICY_COLUMNS))
