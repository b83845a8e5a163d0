"""The claim kinds, one row each: everything that makes a kind itself.

A :class:`ClaimKind` holds a kind's check (its statistic, in
:mod:`cqb.analysis.claims.statistics`), the side and threshold its verdict is
judged against, how the calibration study (:mod:`cqb.analysis.calibration`)
draws its per-seed values and centres them for the null, and what its
equivalence margin δ (``claim_margins``) means. Every other module looks a
kind up here; the config schema's ``claim_kind`` enum and ``claim_margins``
properties are tested against this table (tests/test_extending.py), and
docs/extending.md lists the files a new kind touches. A claim's check
(:func:`claim_comparisons`, :func:`check_claim`) is its kind's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .statistics import (_against_reference, _best, _converges, _drops, _groups, _grows, _ordered, _stall_rate,
                         _typical_below, ClaimResult, drop_from_peak, reference_differences, summarise)

# how the calibration resamples a kind's per-seed values and centres them for its null
MEAN = "mean"  # a mean, moved onto the threshold
SIGN = "sign"  # signs (+1, −1, 0 a tie) read as a share against 1/2, made even
RATE = "rate"  # 0/1 flags read as a rate, set to the threshold


@dataclass(frozen=True)
class ClaimKind:
    name: str
    comparisons: Callable  # (runs, spec, confidence, margin, fail_confidence) → (comparisons, text, upward)
    upward: bool  # holds above its threshold (False: below)
    fixed_threshold: float | None  # judged against this (a share's 1/2, a difference's 0); None: the claim's own
    null: str  # MEAN, SIGN or RATE
    seed_values: Callable  # (spec, runs, comparison) → the per-seed values behind one comparison
    margin_units: str  # what δ of this kind is measured in
    margin_max: float | None = None  # a share's δ cannot exceed 1/2
    pooled_shape: bool = False  # the calibration may draw its values from the stall check's larger table
    against_other_policies: bool = False  # compares its policy with every other non-oracle policy
    sweep_pairs: bool = False  # one comparison per adjacent pair of sweep values

    def threshold(self, own: float) -> float:
        """The threshold of a claim of this kind whose own (``threshold:``) is ``own``."""
        return own if self.fixed_threshold is None else self.fixed_threshold


def _per_group(values_of):
    """Per-seed values of a per-(policy, sweep value) comparison: ``values_of(spec, rows)``."""
    def values(spec, runs, comparison):
        for unit, _, rows in _groups(runs, spec):
            if unit == comparison.units[0]:
                return values_of(spec, rows)
        raise ValueError(f"claim {spec.name!r}: no data for comparison {comparison.key!r}")
    return values


def _slope_values(spec, rows):
    metric = spec.metric if spec.metric in ("late_slope", "full_slope") else "late_slope"
    return rows[metric].to_numpy(dtype=np.float64)


def _metric_values(spec, rows):
    return rows[spec.metric].to_numpy(dtype=np.float64)


def _below_signs(spec, rows):
    return np.where(rows[spec.metric].to_numpy(dtype=np.float64) < spec.threshold, 1.0, -1.0)


def _stall_flags(spec, runs, comparison):
    for unit, _, rows in _groups(runs, spec):
        if unit == comparison.units[0]:
            return rows["stalled"].to_numpy(dtype=np.float64)
    return runs.loc[runs["policy"] == comparison.key, "stalled"].to_numpy(dtype=np.float64)


def _pair_signs(spec, runs, comparison):
    (policy, smaller), (_, larger) = comparison.units
    rows = runs[runs["policy"] == policy]
    wide = rows.pivot_table(index="seed", columns="sweep_value", values=spec.metric, aggfunc="first")
    pair = wide[[smaller, larger]].dropna()
    change = pair[larger].to_numpy(dtype=np.float64) - pair[smaller].to_numpy(dtype=np.float64)
    return np.sign(-change if spec.direction == "decreasing" else change)


def _reference_values(spec, runs, comparison):
    (policy, reference), (_, value) = comparison.units
    return reference_differences(spec, runs[runs["policy"] == policy], policy, reference, value)


def _paired_differences(spec, runs, comparison):
    other, claimed = comparison.key.split(" − ")
    wide = runs.pivot_table(index="seed", columns="policy", values=spec.metric, aggfunc="first")
    pair = wide[[claimed, other]].dropna()
    return (pair[other] - pair[claimed]).to_numpy(dtype=np.float64)


CLAIM_KINDS = (
    ClaimKind("grows", _grows, True, None, MEAN, _per_group(_slope_values), "jobs/round"),
    ClaimKind("converges", _converges, False, None, MEAN, _per_group(_metric_values), "jobs", pooled_shape=True),
    ClaimKind("typical_below", _typical_below, True, 0.5, SIGN, _per_group(_below_signs), "a share of runs",
              margin_max=0.5, pooled_shape=True),
    ClaimKind("ordered", _ordered, True, 0.5, SIGN, _pair_signs, "a share of seeds", margin_max=0.5,
              sweep_pairs=True),
    ClaimKind("best", _best, True, 0.0, MEAN, _paired_differences, "jobs", against_other_policies=True),
    ClaimKind("drops", _drops, True, None, MEAN, _per_group(lambda spec, rows: drop_from_peak(rows)), "a fraction"),
    ClaimKind("stall_rate", _stall_rate, False, None, RATE, _stall_flags, "a rate", pooled_shape=True),
    # each sweep value against the first, paired by seed: at most the claim's threshold above it
    ClaimKind("within_reference", _against_reference, False, None, MEAN, _reference_values, "jobs"),
    # a horizon sweep: growth from the shortest horizon at most the policy's theorem rate
    ClaimKind("rate_bound", _against_reference, False, None, MEAN, _reference_values, "jobs"),
)
KIND_TABLE = {kind.name: kind for kind in CLAIM_KINDS}
KINDS = tuple(KIND_TABLE)
# the kind of the claim that a policy does best (the sensitivity grid and the candidate benchmark read it)
BEST = next(kind.name for kind in CLAIM_KINDS if kind.against_other_policies)
COMPARISONS = {kind.name: kind.comparisons for kind in CLAIM_KINDS}


def claim_kind(name: str) -> ClaimKind:
    if name not in KIND_TABLE:
        raise ValueError(f"kind must be one of {KINDS}, got {name!r}")
    return KIND_TABLE[name]


def claim_comparisons(runs, spec, confidence=0.95, margin=0.0, fail_confidence=None):
    """(comparisons, statistic text, upward) of a claim on a run table:
    holds and ties judged at ``confidence``, "does not hold" at
    ``fail_confidence`` (default: Bonferroni over the claim's comparisons)."""
    return claim_kind(spec.kind).comparisons(runs, spec, confidence, margin, fail_confidence)


def check_claim(runs, spec, confidence=0.95, margin=0.0, fail_confidence=None) -> ClaimResult:
    return summarise(spec, *claim_comparisons(runs, spec, confidence, margin, fail_confidence))

