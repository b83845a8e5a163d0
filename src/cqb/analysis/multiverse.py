"""Figure 8, the multiverse: every paper claim under every registered
alternative of the reconstruction's open choices, one at a time.

The design is config ``multiverse`` (docs/figures.md, "Figure 8"): the
claims (their primary readings), the *alternatives* (each one value of one
open choice of docs/reconstruction.md), a fixed number
of fresh seeds and a level, all registered before any of its runs. A *cell*
is (claim, alternative): the claim's experiment at the multiverse's seeds,
every run set the claim reads (:func:`cqb.analysis.powered_reading.claim_units`)
played with the defaults except where the alternative changes it. Only the
run sets an alternative changes are run again; the others are the default
column's runs, at the same seeds and on the same traces (common random
numbers). An alternative that changes no run set of a claim gives the
default's verdict, marked unaffected.

Each cell's verdict is the claim's own rule (:func:`cqb.analysis.claims.kinds.check_claim`)
at level 1 − α, with the claim kind's margin: no second copy of a verdict
rule lives here.

The mark per claim (:func:`claim_mark`, the rule
:func:`cqb.analysis.verdict_rules.agreement`), over the cells an alternative
affects: *robust* when the default column decides and every affected cell
that decides agrees, with how many decide; *choice-dependent* when an
affected cell decides otherwise, naming it; *undecided by the grid* when the
default decides nothing or most affected cells decide nothing.

No numpy or pandas at import time (the workflow imports it while parsing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..sim.streams import family_of
from .curves import Curve, format_value

DEFAULT = "default"
ROBUST, CHOICE_DEPENDENT, UNDECIDED, NO_CELL = ("robust", "choice-dependent", "undecided by the grid",
                                               "no cell affected")
# verdict_rules.agreement's categories (not imported here: it needs numpy)
MARKS = {"robust": ROBUST, "dependent": CHOICE_DEPENDENT, "undecided": UNDECIDED, "no alternative": NO_CELL}
DIRECTIONAL = ("holds", "does not hold")
CELL_COLUMNS = ("claim", "statement", "alternative", "choice", "label", "affected", "rerun", "kind", "metric",
                "statistic", "value", "ci_low", "ci_high", "confidence", "n", "verdict", "default_verdict",
                "opposite", "detail")
MARK_COLUMNS = ("claim", "statement", "default_verdict", "mark", "opposite", "differs", "cells", "affected",
                "deciding", "by_construction")


@dataclass(frozen=True)
class Alternative:
    """One registered alternative of one open choice (config ``multiverse.alternatives``).

    ``params`` change the policies named in ``policies`` (policy names, not
    labels); ``experiment_params`` add per-experiment values on top (e.g. the
    norm bound √d of each pool); ``instance`` changes the synthetic
    instances' keys (a pool instance is left as it is); ``experiments``, when
    given, restricts the alternative to those experiments."""

    name: str
    choice: str
    label: str
    policies: tuple[str, ...] = ()
    params: Mapping = field(default_factory=dict)
    experiment_params: Mapping = field(default_factory=dict)
    instance: Mapping = field(default_factory=dict)
    experiments: tuple[str, ...] = ()
    note: str = ""

    def changes(self, curve: Curve) -> tuple[dict, dict]:
        """(policy parameters, instance) of ``curve`` under this alternative."""
        params, instance = dict(curve.params), dict(curve.instance)
        if self.experiments and curve.experiment not in self.experiments:
            return params, instance
        if curve.policy in self.policies:
            params.update(self.params)
            params.update(self.experiment_params.get(curve.experiment, {}))
        if family_of(instance) == "synthetic":
            instance.update(self.instance)
        return params, instance

    def affects(self, curve: Curve) -> bool:
        return self.changes(curve) != (dict(curve.params), dict(curve.instance))


NO_CHANGE = Alternative(DEFAULT, "none", "default")


@dataclass(frozen=True)
class Multiverse:
    """The registered design and what it runs."""

    first_seed: int
    n_seeds: int
    alpha: float
    specs: tuple  # the claims' ClaimSpecs (primary readings), in config order
    alternatives: tuple[Alternative, ...]  # the default first
    margins: Mapping
    units: Mapping  # claim → ((run label, sweep value), …)
    curves: Mapping  # experiment → [Curve] (the plan's)
    instance_key: Callable[[Mapping], str] = str  # an instance spec's id (the pipeline's instance_id)
    excluded: Mapping = field(default_factory=dict)  # seed → why it is left out of every cell

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(s for s in range(self.first_seed, self.first_seed + self.n_seeds) if s not in self.excluded)

    @property
    def confidence(self) -> float:
        return 1 - self.alpha

    def alternative(self, name: str) -> Alternative:
        return next(a for a in self.alternatives if a.name == name)

    def unit_curves(self, spec) -> list[Curve]:
        by_unit = {(c.label, c.sweep_text): c for c in self.curves[spec.experiment]}
        return [by_unit[unit] for unit in self.units[spec.name]]

    def affected(self, spec, alternative: Alternative) -> bool:
        return any(alternative.affects(curve) for curve in self.unit_curves(spec))

    def cell_curves(self, spec, alternative: Alternative, run_file: str) -> list[Curve]:
        """The curves a cell's runs table reads: each of the claim's run sets
        under its default label (what the claim's rule selects on), at the
        multiverse's seeds, with the run files of the alternative's runs
        where it changes the run set, else the default's."""
        return [replace(curve, seeds=self.seeds, files=tuple(run.run_file(run_file, s) for s in self.seeds))
                for curve, run in ((c, run_curve(c, alternative, self.instance_key)) for c in self.unit_curves(spec))]

    def run_curves(self) -> list[Curve]:
        """Every run set the multiverse plays (default and alternatives), each once."""
        runs = {}
        for alternative in self.alternatives:
            for spec in self.specs:
                for curve in self.unit_curves(spec):
                    run = run_curve(curve, alternative, self.instance_key)
                    runs.setdefault(run.run_key, replace(run, seeds=self.seeds))
        return list(runs.values())


def run_curve(curve: Curve, alternative: Alternative, instance_id: Callable[[Mapping], str]) -> Curve:
    """The run set of ``curve`` under ``alternative``: its own label, keyed
    apart from the default's (``<label>.mv_<name>``) when the policy's
    parameters change; an instance change gives another instance id (by
    ``instance_id``)."""
    params, instance = alternative.changes(curve)
    label = curve.label if params == dict(curve.params) else f"{curve.label}.mv_{alternative.name}"
    key = curve.instance_id if instance == dict(curve.instance) else instance_id(instance)
    return replace(curve, label=label, params=params, instance=instance, instance_id=key)


def alternative_curves(multiverse: Multiverse, alternative: Alternative, run_file: str) -> dict:
    """experiment → the curves one column's runs table reads: for every
    claim the column affects (every claim for the default), each run set the
    claims of its experiment read, once, under its default label."""
    out: dict = {}
    for spec in multiverse.specs:
        if not (alternative.name == DEFAULT or multiverse.affected(spec, alternative)):
            continue
        curves = out.setdefault(spec.experiment, {})
        for curve in multiverse.cell_curves(spec, alternative, run_file):
            curves.setdefault((curve.label, curve.sweep_text), curve)
    return {experiment: list(curves.values()) for experiment, curves in out.items()}


def alternative_runs(multiverse: Multiverse, alternative: Alternative, run_file: str, settings) -> "pd.DataFrame":  # noqa: F821
    """One column's per-run table (:func:`alternative_curves`,
    :func:`cqb.analysis.summaries.summarise_curves`), with an ``experiment`` column."""
    import pandas as pd

    from .summaries import summarise_curves

    parts = []
    for experiment, curves in alternative_curves(multiverse, alternative, run_file).items():
        table = summarise_curves(curves, settings)
        table.insert(0, "experiment", experiment)
        parts.append(table)
    if not parts:  # the alternative changes no run of any listed claim
        from .summaries import RUN_COLUMNS

        return pd.DataFrame(columns=["experiment", *RUN_COLUMNS])
    return pd.concat(parts, ignore_index=True)


# ---------------------------------------------------------------- verdicts and marks


def evaluate_cells(multiverse: Multiverse, runs_tables: Mapping) -> "pd.DataFrame":  # noqa: F821
    """One row per (claim, alternative): ``runs_tables[alternative name]`` is
    that column's per-run table (column ``experiment`` names each row's
    experiment; a claim the alternative leaves unaffected need not be in it:
    its cell is the default's)."""
    import pandas as pd

    from .claims.kinds import check_claim

    rows = []
    for spec in multiverse.specs:
        margin = float(multiverse.margins.get(spec.kind, 0.0))
        default_row = None
        for alternative in multiverse.alternatives:
            affected = alternative.name == DEFAULT or multiverse.affected(spec, alternative)
            if not affected:
                row = dict(default_row, alternative=alternative.name, choice=alternative.choice,
                           label=alternative.label, affected=False, rerun="")
                rows.append(row)
                continue
            table = runs_tables[alternative.name]
            runs = table[table["experiment"] == spec.experiment]
            result = check_claim(runs, spec, multiverse.confidence, margin)
            rerun = sorted({c.label for c in multiverse.unit_curves(spec) if alternative.affects(c)})
            row = {"claim": spec.name, "statement": spec.statement, "alternative": alternative.name,
                   "choice": alternative.choice, "label": alternative.label, "affected": True,
                   "rerun": " ".join(rerun), "kind": spec.kind, "metric": spec.metric,
                   "statistic": result.statistic, "value": result.value, "ci_low": result.ci_low,
                   "ci_high": result.ci_high, "confidence": multiverse.confidence, "n": result.n_seeds,
                   "verdict": result.verdict, "detail": result.detail}
            if alternative.name == DEFAULT:
                default_row = row
            rows.append(row)
    table = pd.DataFrame(rows)
    default_of = dict(zip(table.loc[table["alternative"] == DEFAULT, "claim"],
                          table.loc[table["alternative"] == DEFAULT, "verdict"]))
    table["default_verdict"] = table["claim"].map(default_of)
    table["opposite"] = [opposite(d, v) for d, v in zip(table["default_verdict"], table["verdict"])]
    return table[list(CELL_COLUMNS)]


def opposite(first: str, second: str) -> bool:
    """Two verdicts in opposite directions (holds against does not hold)."""
    return {first, second} == set(DIRECTIONAL)


def claim_mark(default_verdict: str, verdicts: Mapping[str, str]) -> tuple[str, list[str], int, int]:
    """(mark, the alternatives that decide otherwise, deciding, affected) from
    the default column's verdict and each affected alternative's (name →
    verdict; an unaffected cell repeats the default and is no evidence), by
    :func:`cqb.analysis.verdict_rules.agreement`."""
    from .verdict_rules import agreement

    category, deciding, affected, otherwise = agreement(default_verdict, verdicts)
    return MARKS[category], otherwise, deciding, affected


def mark_text(mark: str, named: str = "", deciding=None, affected=None) -> str:
    """A mark with what stands behind it: "robust (5/9 affected cells decide)",
    "choice-dependent (κ = 40; …)"."""
    if mark == CHOICE_DEPENDENT and named:
        return f"{mark} ({named})"
    if mark in (ROBUST, UNDECIDED) and deciding is not None and affected:
        return f"{mark} ({int(deciding)}/{int(affected)} affected cells decide)"
    return mark


def _flag(value) -> bool:
    return value is True or str(value).lower() in ("true", "1")


def claim_marks(cells: "pd.DataFrame", specs) -> "pd.DataFrame":  # noqa: F821
    """One row per claim: the default column's verdict, the mark, the
    alternatives whose decided verdict differs from the default's (naming
    them), those whose verdict differs in any way, and how many affected
    cells decide. ``specs``: the claims (or claim → by construction)."""
    import pandas as pd

    by_construction = (dict(specs) if isinstance(specs, Mapping)
                       else {spec.name: spec.by_construction for spec in specs})
    rows = []
    for claim, group in cells.groupby("claim", sort=False):
        default = group.loc[group["alternative"] == DEFAULT, "verdict"].iloc[0]
        others = group[group["alternative"] != DEFAULT]
        affected = others[[_flag(a) for a in others["affected"]]]
        mark, named, deciding, n_affected = claim_mark(default, dict(zip(affected["label"], affected["verdict"])))
        differs = [f"{r.label} ({r.verdict})" for r in others.itertuples() if r.verdict != default]
        rows.append({"claim": claim, "statement": group["statement"].iloc[0], "default_verdict": default,
                     "mark": mark, "opposite": "; ".join(named), "differs": "; ".join(differs),
                     "cells": len(group), "affected": n_affected, "deciding": deciding,
                     "by_construction": _flag(by_construction.get(claim))})
    return pd.DataFrame(rows, columns=list(MARK_COLUMNS))


def _interval(row) -> str:
    value, low, high = row.value, row.ci_low, row.ci_high
    if not (isinstance(value, (int, float)) and math.isfinite(value)):
        return "–"
    if isinstance(low, (int, float)) and math.isfinite(low) and math.isfinite(high):
        return f"{value:.3g} [{low:.3g}, {high:.3g}]"
    return f"{value:.3g}"


def excluded_text(excluded: Mapping) -> str:
    """The seeds left out of every cell, grouped by their reason."""
    by_reason: dict = {}
    for seed, why in sorted(excluded.items()):
        by_reason.setdefault(why, []).append(seed)
    return "".join(f" Seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} "
                   f"{'are' if len(seeds) > 1 else 'is'} left out of every cell: {why}."
                   for why, seeds in by_reason.items())


def render_markdown(multiverse: Multiverse, cells, marks, header: str = "") -> str:
    """Figure 8's summary: each claim's mark, then every cell with its
    statistic, value [interval], n and verdict."""
    level = f"{100 * multiverse.confidence:.4g}%"
    seeds = multiverse.seeds
    lines = [header, ""] if header else []
    lines += [f"Each of {len(marks)} claims under {len(multiverse.alternatives) - 1} alternatives of the "
              f"reconstruction's open choices, one at a time against the defaults, on seeds "
              f"{seeds[0]}–{seeds[-1]} (n = {len(seeds)}), {level} intervals (the claim's own rule, "
              "\"does not hold\" Bonferroni over its comparisons). Over the cells an alternative affects: "
              "**robust** when the default decides and every affected cell that decides agrees (how many "
              "decide in brackets); **choice-dependent** when one decides otherwise, naming it; **undecided by "
              "the grid** when the default, or most affected cells, decide nothing. Tuned constants stay tuned; c_β = 1 is the formula as written, not retuned."
              + excluded_text(multiverse.excluded), "",
              "| claim | default | mark | opposite under | differs under |", "| --- | --- | --- | --- | --- |"]
    for row in marks.itertuples():
        construction = " (by construction)" if row.by_construction else ""
        lines.append(f"| {row.statement}{construction} | {row.default_verdict} | "
                     f"**{mark_text(row.mark, '', row.deciding, row.affected)}** | "
                     f"{row.opposite or '–'} | {row.differs or '–'} |")
    lines += ["", "| claim | alternative | choice | runs redone | value [interval] | n | verdict |",
              "| --- | --- | --- | --- | --- | ---: | --- |"]
    for row in cells.itertuples():
        rerun = row.rerun if row.affected else "none (the default's runs)"
        lines.append(f"| `{row.claim}` | {row.label} | {row.choice} | {rerun or '–'} | {_interval(row)} | "
                     f"{row.n} | {row.verdict} |")
    return "\n".join(lines) + "\n"


def cost_estimate(multiverse: Multiverse, seconds_per_run: Mapping) -> dict:
    """Runs and CPU seconds per alternative: the run sets it adds × seeds ×
    the measured CPU per run (``seconds_per_run``: (alternative, policy,
    experiment) → s, falling back to (alternative, policy), then
    (default, policy)). For the registration's budget."""
    seen, out = set(), {}
    for alternative in multiverse.alternatives:
        runs = cpu = 0
        for spec in multiverse.specs:
            for curve in multiverse.unit_curves(spec):
                run = run_curve(curve, alternative, multiverse.instance_key)
                if run.run_key in seen:
                    continue
                seen.add(run.run_key)
                cost = seconds_per_run.get((alternative.name, curve.policy, curve.experiment),
                                           seconds_per_run.get((alternative.name, curve.policy),
                                                               seconds_per_run.get((DEFAULT, curve.policy), 0.0)))
                runs += multiverse.n_seeds
                cpu += multiverse.n_seeds * cost
        out[alternative.name] = {"runs": runs, "cpu_seconds": cpu}
    return out


def format_seeds(seeds: Sequence[int]) -> str:
    return f"{seeds[0]}–{seeds[-1]}" if seeds else "none"


__all__ = ["Alternative", "Multiverse", "evaluate_cells",
           "claim_mark", "claim_marks", "render_markdown", "cost_estimate", "run_curve", "format_value"]
