"""The claims tables: every claim's primary reading (:func:`evaluate_claims`),
every registered reading with its mark (:func:`claims_readings`), the
powered reading's columns beside them, and their Markdown.

The kinds, their statistics and the registry's types are the other modules
of :mod:`cqb.analysis.claims`; the verdict rules are
:mod:`cqb.analysis.verdict_rules`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from ..verdict_rules import AGREES, DEPENDS, NO_ALTERNATIVE, UNDECIDED, VERDICTS, agreement, combine
from .kinds import check_claim, claim_comparisons, claim_kind
from .registry import CLAIM_COLUMNS, ClaimSpec
from .statistics import Comparison, summarise

ROBUST, READING_DEPENDENT, BY_CONSTRUCTION = "robust", "reading-dependent", "by construction"
UNDECIDED_BY_READINGS, NO_ALTERNATIVE_READING = "undecided by the readings", "no alternative reading"
READING_MARKS = {AGREES: ROBUST, DEPENDS: READING_DEPENDENT, UNDECIDED: UNDECIDED_BY_READINGS,
                 NO_ALTERNATIVE: NO_ALTERNATIVE_READING}


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


def reading_agreement(spec: ClaimSpec | None, verdicts: Sequence[str]) -> tuple[str, int, int, list]:
    """(mark, deciding, alternatives, the alternatives deciding otherwise) of a
    claim from its readings' verdicts, the primary first, by
    :func:`cqb.analysis.verdict_rules.agreement`: robust when the primary
    decides and every alternative that decides agrees, reading-dependent when
    one decides otherwise, undecided by the readings when the primary or most
    alternatives decide nothing; by construction for a check that cannot fail."""
    verdicts = list(verdicts)
    category, deciding, affected, otherwise = agreement(verdicts[0], dict(enumerate(verdicts[1:], 1)))
    if spec is not None and spec.by_construction:
        return BY_CONSTRUCTION, deciding, affected, otherwise
    return READING_MARKS[category], deciding, affected, otherwise


def reading_mark(spec: ClaimSpec | None, verdicts: Sequence[str]) -> str:
    """The mark of :func:`reading_agreement`."""
    return reading_agreement(spec, verdicts)[0]


def reading_mark_text(mark: str, deciding, alternatives) -> str:
    """A readings mark with its share: "robust (2/2 alternative readings decide)"."""
    if mark in (ROBUST, UNDECIDED_BY_READINGS) and _count(alternatives):
        return f"{mark} ({_count(deciding)}/{_count(alternatives)} alternative readings decide)"
    return mark


def _count(value) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


def readings_table(rows: Sequence[Mapping], specs: Mapping[str, ClaimSpec]) -> pd.DataFrame:
    """The readings table with each claim's mark (columns ``mark``, and
    ``mark_deciding`` of ``mark_alternatives``: how many alternative readings decide)."""
    table = pd.DataFrame(list(rows), columns=list(READING_COLUMNS))
    primary = table["primary"].astype(str).str.lower().isin(("true", "1"))
    marks = {}
    for claim, group in table.assign(_primary=primary).groupby("claim", sort=False):
        ordered = pd.concat([group[group["_primary"]], group[~group["_primary"]]])
        marks[claim] = reading_agreement(specs.get(claim), list(ordered["verdict"]))
    table["mark"] = table["claim"].map(lambda c: marks[c][0])
    table["mark_deciding"] = table["claim"].map(lambda c: marks[c][1])
    table["mark_alternatives"] = table["claim"].map(lambda c: marks[c][2])
    return table


READINGS_HEADER = ("Every registered reading of every claim (docs/verdicts.md, \"The claims registry\"): on the "
                   "powered reading's runs where the claim has one, else on the figures' seeds.")


def readings_markdown(table: pd.DataFrame, header: str = "") -> str:
    """The readings table as Markdown: per claim, every reading's statistic,
    value [interval], n and verdict, the primary first, and the mark."""
    lines = [header, ""] if header else []
    lines += ["| claim | reading | metric | value [interval] | level | n | verdict | mark |",
              "| --- | --- | --- | --- | ---: | ---: | --- | --- |"]
    for row in table.itertuples():
        name = f"**{row.reading}** (primary)" if row.primary else row.reading
        lines.append(f"| `{row.claim}` | {name} | {row.metric} | {_interval(row.value, row.ci_low, row.ci_high)} | "
                     f"{100 * row.confidence:.4g}% | {row.n} | {row.verdict} | "
                     f"{reading_mark_text(row.mark, row.mark_deciding, row.mark_alternatives)} |")
    lines += ["", "Each interval is at its row's level; a \"does not hold\" is decided on the Bonferroni level's "
              "interval over the claim's comparisons (docs/verdicts.md, \"Combining comparisons\"), wider than the "
              "one shown.", "", "Why each reading:", ""]
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
    """The claims table with each claim's readings mark (robust,
    reading-dependent, undecided by the readings, by construction), how many
    alternative readings decide (``mark_deciding`` of ``mark_alternatives``)
    and the reason of a check that holds by construction."""
    first = readings.drop_duplicates("claim").set_index("claim")
    table = table.copy()
    table["mark"] = [BY_CONSTRUCTION if by_construction.get(c) else
                     first["mark"].get(c, NO_ALTERNATIVE_READING) for c in table["claim"]]
    for column in ("mark_deciding", "mark_alternatives"):
        table[column] = [int(first[column].get(c, 0)) if column in first else 0 for c in table["claim"]]
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


def _used(verdict, value, low, high, confidence, detail, comparisons) -> str:
    from .lines import interval_text, verdict_interval

    low, high, level, exact = verdict_interval(verdict, value, low, high, confidence, detail, comparisons)
    return interval_text(value, low, high, level, exact), low, high


def claims_markdown(table: pd.DataFrame, header: str = "", design: Mapping | None = None) -> str:
    """The claims table as Markdown: claim, figure, value [interval] (level:
    the interval the verdict used), verdict, n; with the powered reading's
    columns beside them when the table has them, and its size against δ
    (``design``: claim → kind, threshold, margin, side; lines.claims_design)."""
    from .lines import comparisons_in, size_text

    design = design or {}
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
        lines += ["| claim | figure | statistic | value [interval] (level) | verdict | n seeds | "
                  "powered: value [interval] (level) | powered verdict | size against δ | powered n (cap) |"
                  + mark_head, "| --- | --- | --- | --- | --- | ---: | --- | --- | --- | ---: |" + mark_rule]
    else:
        lines += ["| claim | figure | statistic | value [interval] (level) | verdict | n seeds |" + mark_head,
                  "| --- | --- | --- | --- | --- | ---: |" + mark_rule]
    for row in table.itertuples():
        detail = row.detail if isinstance(row.detail, str) else ""
        figures, _, _ = _used(row.verdict, row.value, row.ci_low, row.ci_high, 0.95, detail,
                              max(1, len(detail.split("; "))))
        line = (f"| {row.statement} | {row.figure} | {row.statistic} | {figures} | **{row.verdict}** | "
                f"{row.n_seeds} |")
        if powered:
            if isinstance(row.powered_verdict, str) and row.powered_verdict and row.powered_verdict != "nan":
                used, low, high = _used(row.powered_verdict, row.powered_value, row.powered_ci_low,
                                        row.powered_ci_high, row.powered_confidence, row.powered_detail,
                                        comparisons_in(row.powered_detail))
                line += (f" {used} | **{row.powered_verdict}** | "
                         f"{size_text(row.powered_verdict, low, high, design.get(row.claim))} | "
                         f"{int(row.powered_n_seeds)} ({int(row.powered_cap)}) |")
            else:
                line += " | | | |"
        if marked:
            line += f" {reading_mark_text(row.mark, getattr(row, 'mark_deciding', 0), getattr(row, 'mark_alternatives', 0))} |"
        lines.append(line)
    if marked:
        lines += ["", "Mark (docs/results/claims_readings.md): **robust** when the primary reading decides and every "
                  "alternative reading that decides agrees (how many decide in brackets), **reading-dependent** "
                  "when one decides otherwise, **undecided by the readings** when the primary or most "
                  "alternatives decide nothing; **by construction**: a check that cannot fail, shown and not "
                  "counted as evidence:", ""]
        lines += [f"- `{row.claim}`: {row.by_construction}" for row in table.itertuples() if row.by_construction]
    lines += ["", "Every comparison behind each verdict:", ""]
    lines += [f"- `{row.claim}`: {row.detail}" for row in table.itertuples()]
    if powered:
        rows = [row for row in table.itertuples()
                if isinstance(row.powered_verdict, str) and row.powered_verdict and row.powered_verdict != "nan"]
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
            headline = summarise(own, powered, powered_state["statistic"], claim_kind(own.kind).upward)
            source, n_seeds = "powered", powered_state["n"]
            row["powered_verdict"] = headline.verdict
        confirmatory = (confirmatory_states or {}).get(f"{spec.name}__{policy}")
        if confirmatory:
            again = _state_comparisons(confirmatory, policy)
            keys = {c.key for c in again}
            merged = again + [c for c in powered if c.key not in keys]
            headline = summarise(own, merged, confirmatory["statistic"], claim_kind(own.kind).upward)
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


COMPARISON_COLUMNS = ("claim", "source", "comparison", "policies", "value", "ci_low", "ci_high", "n", "verdict",
                      "decided_at_n")


def _state_rows(claim: str, source: str, state: Mapping) -> list[dict]:
    looks = state.get("looks") or []
    return [{"claim": claim, "source": source, "comparison": r["key"],
             "policies": " ".join(dict.fromkeys(u[0] for u in r["units"])), "value": r["value"],
             "ci_low": math.nan if r["ci_low"] is None else r["ci_low"],
             "ci_high": math.nan if r["ci_high"] is None else r["ci_high"], "n": r["n"], "verdict": r["verdict"],
             "decided_at_n": looks[r["decided_at"]] if r.get("decided_at") is not None else None}
            for r in state["comparisons"]]


def comparisons_table(specs: Sequence[ClaimSpec], runs_tables: Mapping[str, pd.DataFrame], margins,
                      powered_states: Mapping[str, Mapping] | None = None,
                      confirmatory_states: Mapping[str, Mapping] | None = None) -> pd.DataFrame:
    """Every comparison behind the claims' verdicts, one row each (a claim's
    verdict combines them, so one can change while the claim's stays): at the
    figures' seeds (source ``figures``), in the powered reading's last look
    (``powered``; ``decided_at_n``: the look that decided it) and in the
    confirmatory study (``confirmatory``, claim named as its table names it)."""
    rows = []
    for spec in specs:
        comparisons, _, _ = claim_comparisons(runs_tables[spec.experiment], spec, margin=_margin(margins, spec.kind))
        rows += [{"claim": spec.name, "source": "figures", "comparison": c.key,
                  "policies": " ".join(dict.fromkeys(u[0] for u in c.units)), "value": c.value,
                  "ci_low": c.ci_low, "ci_high": c.ci_high, "n": c.n, "verdict": c.verdict, "decided_at_n": None}
                 for c in comparisons]
        if spec.name in (powered_states or {}):
            rows += _state_rows(spec.name, "powered", powered_states[spec.name])
    for name, state in (confirmatory_states or {}).items():
        rows += _state_rows(name, "confirmatory", state)
    return pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))
