"""The powered reading of the claims: a group-sequential design on fresh seeds.

The claims table's first reading uses the figures' runs (the paper's N = 10
instances). The powered reading asks whether a claim holds with as many seeds
as its effect needs (docs/verdicts.md, "Two readings of every claim"):

* fresh seeds ``first_seed, first_seed + 1, …`` that no figure, tuning or
  other check uses (:func:`cqb.verdicts.check_seed_uses` refuses overlaps);
* *looks* at the cumulative sample sizes ``looks`` (the last is the cap);
* each look at level ``alpha / len(looks)``, "does not hold" at that level
  divided by the claim's number of comparisons (Bonferroni over the looks: by
  the union bound the chance that any look's interval misses is at most
  ``alpha``, whatever the dependence between looks; Jennison & Turnbull 2000,
  §2.3);
* a claim is a set of comparisons (:class:`cqb.claims.Comparison`); each stops
  at the first look that decides it (holds, does not hold, tie within δ) and
  keeps that verdict; the next look simulates only the runs the undecided
  comparisons read; the claim stops when all are decided or at the cap;
* at the last look every alternative reading of the registry is evaluated
  on the runs that look read, at its level (shown, not steering the looks).

The statistics are those of the first reading (:func:`cqb.claims.claim_comparisons`),
at the look's level. A look's outcome is a JSON-able *state* (:func:`evaluate_look`);
the workflow keeps one per (claim, look) as a Snakemake checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from .claims.kinds import claim_comparisons, claim_kind
from .claims.statistics import summarise
from .claims.tables import reading_rows
from .claims.registry import ClaimSpec
from .claims.statistics import Comparison
from .verdict_rules import INCONCLUSIVE, is_decided, look_level
from ..errors import config_error

POWERED_COLUMNS = ("claim", "figure", "statement", "value", "ci_low", "ci_high", "confidence", "verdict",
                   "n_seeds", "cap", "n_runs", "looks", "excluded", "detail")


@dataclass(frozen=True)
class PoweredClaim:
    spec: ClaimSpec
    looks: tuple[int, ...]  # cumulative seeds at each look; the last is the cap
    first_seed: int
    alpha: float
    margin: float
    units: tuple[tuple[str, str], ...]  # (run label, sweep value) of every run set the claim reads
    reading_margins: Mapping = None  # δ per claim kind, for the alternative readings

    def __post_init__(self):
        if self.reading_margins is None:
            object.__setattr__(self, "reading_margins", {})

    @property
    def confidence(self) -> float:
        """The level of every look's intervals: 1 − α/K (Bonferroni over K looks)."""
        return look_level(self.alpha, len(self.looks))

    @property
    def cap(self) -> int:
        return self.looks[-1]

    def seeds(self, look: int) -> tuple[int, ...]:
        return tuple(range(self.first_seed, self.first_seed + self.looks[look]))


def claim_units(spec: ClaimSpec, curves) -> tuple[tuple[str, str], ...]:
    """The (run label, sweep value) run sets a claim reads, in config order:
    its policies (every non-oracle label for ``best``) at its sweep values."""
    units = []
    for curve in curves:
        if spec.sweep_values and curve.sweep_text not in spec.sweep_values:
            continue
        against_others = claim_kind(spec.kind).against_other_policies
        wanted = curve.policy != "oracle" if against_others else curve.label in spec.policies
        if wanted:
            units.append((curve.label, curve.sweep_text))
    return tuple(dict.fromkeys(units))


def powered_claims(config: Mapping, plan, specs) -> dict[str, PoweredClaim]:
    """The claims of ``powered.claims`` with their design, in config order."""
    powered = config.get("powered") or {}
    by_name = {spec.name: spec for spec in specs}
    margins = config.get("claim_margins") or {}
    claims = {}
    for index, entry in enumerate(powered.get("claims", [])):
        key = f"powered.claims[{index}]"
        name = entry["name"]
        if name not in by_name:
            config_error(f"{key}.name", name, f"not a claim ({', '.join(by_name)})")
        if name in claims:
            config_error(f"{key}.name", name, "listed twice")
        looks = tuple(int(n) for n in entry.get("looks", powered.get("looks", (20, 40, 80, 160))))
        if any(b <= a for a, b in zip(looks, looks[1:])):
            config_error(f"{key}.looks" if "looks" in entry else "powered.looks", list(looks),
                         "must increase strictly")
        spec = by_name[name]
        units = claim_units(spec, plan.curves[spec.experiment])
        claims[name] = PoweredClaim(spec, looks, int(powered.get("first_seed", 60000)),
                                    float(powered.get("alpha", 0.05)), float(margins.get(spec.kind, 0.0)),
                                    units, {kind: float(v) for kind, v in margins.items()})
    return claims


def powered_seeds(claims: Mapping[str, PoweredClaim]) -> set[int]:
    return {seed for claim in claims.values() for seed in claim.seeds(len(claim.looks) - 1)}


def unit_key(unit) -> str:
    label, value = unit
    return f"{label}@{value}"


def run_files(claim: PoweredClaim, curves, run_file: str, counts: Mapping[str, int]) -> dict[str, list[str]]:
    """{unit key: run files} for ``counts`` = {unit key: seeds}: the first
    ``counts[unit]`` powered seeds of each unit (run files keyed as every run)."""
    by_unit = {(curve.label, curve.sweep_text): curve for curve in curves}
    files = {}
    for unit in claim.units:
        n = counts.get(unit_key(unit), 0)
        curve = by_unit[unit]
        files[unit_key(unit)] = [run_file.format(instance_id=curve.instance_id, horizon=curve.horizon,
                                                 policy=curve.label, seed=seed)
                                 for seed in range(claim.first_seed, claim.first_seed + n)]
    return files


def look_counts(claim: PoweredClaim, look: int, previous: Mapping | None) -> dict[str, int]:
    """Seeds per unit that look ``look`` reads: what earlier looks read, and
    the look's sample size for the units its undecided comparisons need (all
    units at the first look)."""
    n = claim.looks[look]
    if previous is None:
        return {unit_key(unit): n for unit in claim.units}
    counts = dict(previous["counts"])
    for key in previous["pending"]:
        counts[key] = n
    return counts


def _as_comparison(record: Mapping) -> Comparison:
    return Comparison(record["key"], tuple(tuple(u) for u in record["units"]), record["value"],
                      record["ci_low"], record["ci_high"], record["verdict"], record["n"], record["text"])


def _nan_none(value):
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def evaluate_look(claim: PoweredClaim, look: int, runs: pd.DataFrame, previous: Mapping | None) -> dict:
    """The state after look ``look`` (0-based): every comparison with its
    value, interval, verdict and the look that decided it (comparisons
    decided at an earlier look keep that look's result), the claim's combined
    verdict, whether to continue and the units the next look needs."""
    if (previous is None) != (look == 0):
        raise ValueError(f"claim {claim.spec.name!r}: look {look} needs the state of look {look - 1}")
    if previous is not None and not previous["continue"]:
        raise ValueError(f"claim {claim.spec.name!r}: look {look - 1} stopped the claim")
    n = claim.looks[look]
    rows = runs[(runs["seed"] >= claim.first_seed) & (runs["seed"] < claim.first_seed + n)]
    decided = {}
    if previous is not None:
        decided = {c["key"]: c for c in previous["comparisons"] if c["decided_at"] is not None}
    comparisons, statistic, upward = claim_comparisons(rows, claim.spec, claim.confidence, claim.margin)
    records, merged = [], []
    for comparison in comparisons:
        if comparison.key in decided:
            record = dict(decided[comparison.key])
        else:
            if comparison.n < n:
                raise ValueError(f"claim {claim.spec.name!r}, look {look}: comparison {comparison.key!r} "
                                 f"has {comparison.n} paired seeds, the look needs {n}")
            record = {"key": comparison.key, "units": [list(u) for u in comparison.units],
                      "value": comparison.value, "ci_low": comparison.ci_low, "ci_high": comparison.ci_high,
                      "verdict": comparison.verdict, "n": comparison.n,
                      "text": comparison.text if " n=" in comparison.text else f"{comparison.text} (n={comparison.n})",
                      "decided_at": look if is_decided(comparison.verdict) else None}
        records.append(record)
        merged.append(_as_comparison(record))
    missing = set(decided) - {r["key"] for r in records}
    if missing:
        raise ValueError(f"claim {claim.spec.name!r}, look {look}: comparisons {sorted(missing)} vanished")
    result = summarise(claim.spec, merged, statistic, upward)
    pending = list(dict.fromkeys(unit_key(tuple(u)) for r in records if r["decided_at"] is None
                                 for u in r["units"]))
    last = look == len(claim.looks) - 1
    counts = look_counts(claim, look, previous)
    stop = not (bool(pending) and not last)
    readings = []
    if stop:  # every registered reading on the runs the last look read, at its level
        margins = {claim.spec.kind: claim.margin, **claim.reading_margins}
        readings = [{k: _nan_none(v) for k, v in row.items()}
                    for row in reading_rows(claim.spec, rows, margins, claim.confidence, seeds="powered")[1:]]
        readings.insert(0, {"claim": claim.spec.name, "figure": claim.spec.figure, "source": claim.spec.source,
                            "reading": claim.spec.reading or "primary", "primary": True, "kind": claim.spec.kind,
                            "metric": claim.spec.metric, "statistic": result.statistic,
                            "value": _nan_none(result.value), "ci_low": _nan_none(result.ci_low),
                            "ci_high": _nan_none(result.ci_high), "confidence": claim.confidence,
                            "n": n, "verdict": result.verdict, "why": claim.spec.why, "seeds": "powered"})
    return {"claim": claim.spec.name, "look": look, "n": n, "confidence": claim.confidence,
            "looks": list(claim.looks), "margin": claim.margin, "statistic": result.statistic,
            "value": result.value, "ci_low": _nan_none(result.ci_low), "ci_high": _nan_none(result.ci_high),
            "verdict": result.verdict, "comparisons": records, "counts": counts,
            "pending": pending, "continue": not stop, "readings": readings,
            "history": (list(previous["history"]) if previous else [])
            + [{"n": n, "decided": sum(r["decided_at"] is not None for r in records),
                "comparisons": len(records), "verdict": result.verdict}]}


def looks_text(state: Mapping) -> str:
    """e.g. '20: 3/4 decided, inconclusive; 40: 4/4 decided, holds'."""
    return "; ".join(f"{h['n']}: {h['decided']}/{h['comparisons']} decided, {h['verdict']}"
                     for h in state["history"])


def excluded_text(state: Mapping) -> str:
    """What an inconclusive claim's undecided comparisons exclude: effects
    outside their final intervals, at the look's level."""
    if state["verdict"] != INCONCLUSIVE:
        return ""
    level = f"{100 * state['confidence']:.4g}%"
    parts = [f"{r['key']}: below {r['ci_low']:.3g} and above {r['ci_high']:.3g}" for r in state["comparisons"]
             if r["decided_at"] is None and r["ci_low"] is not None]
    return f"effects excluded at {level}: " + "; ".join(parts) if parts else ""


def powered_row(claim: PoweredClaim, state: Mapping) -> dict:
    """The claim's row of the powered table from its last look's state."""
    nan = float("nan")
    return {"claim": claim.spec.name, "figure": claim.spec.figure, "statement": claim.spec.statement,
            "value": state["value"], "ci_low": nan if state["ci_low"] is None else state["ci_low"],
            "ci_high": nan if state["ci_high"] is None else state["ci_high"],
            "confidence": state["confidence"], "verdict": state["verdict"], "n_seeds": state["n"],
            "cap": claim.cap, "n_runs": int(sum(state["counts"].values())), "looks": looks_text(state),
            "excluded": excluded_text(state),
            "detail": "; ".join(r["text"] + (f" [decided at n={claim.looks[r['decided_at']]}]"
                                             if r["decided_at"] is not None else " [undecided at the cap]")
                                for r in state["comparisons"])}


def final_look(claim: PoweredClaim, state: Mapping) -> bool:
    return not state["continue"]
