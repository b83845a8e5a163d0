"""The calibration study: the powered reading's whole procedure, simulated.

The powered reading (:mod:`cqb.analysis.powered_reading`) claims an error rate: each
of K looks at level α/K, "does not hold" at α/(K·m) for a claim of m
comparisons, a comparison stopping at the first look that decides it. That
rate rests on every interval having its nominal coverage at the n used.
Here it is shown instead of asserted (docs/verdicts.md, "Error rates,
simulated"): per powered claim, the comparison that decides it on the
figures' run tables gives per-seed values (a paired difference, a per-run
metric, the signs of a sweep pair, stall flags); ``replications`` times, seeds
are drawn from them with replacement, look after look (cumulatively), and
the claim kind's statistic, levels and stopping rule are applied exactly as
the powered reading applies them:

* **null**: the values centred on the comparison's threshold (a mean moved
  onto it; the signs' up and down shares made equal, ties kept; the stall
  rate set to it): a directional verdict (holds or does not hold) is an
  error, and their share is the realised type-I error;
* **effect**: the values as observed: the share of replications reaching
  a verdict true of the observed effect (its direction, or a tie within δ
  where it lies within δ of the threshold) is the power;
* **edge of δ** (kinds with a margin δ > 0): the values moved so that the
  true effect lies exactly δ from the threshold, on the observed effect's
  side, the effect within δ hardest to tell from one beyond it: the share of
  replications whose decided interval is labelled "beyond δ"
  (:func:`cqb.analysis.verdict_rules.size_against_margin`) is the size
  label's error rate.

Everything is vectorised over replications, from one named random stream
per (claim, scenario).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .claims.kinds import MEAN, RATE, SIGN, claim_comparisons, claim_kind
from .claims.statistics import skew_corrected_bounds
from .summaries import binomial_bounds
from .verdict_rules import (BEYOND_MARGIN, FAILS, HOLDS, INCONCLUSIVE, NO_SIZE, NOT_TESTABLE, TIE,
                            comparison_verdicts, correct_verdicts, decided, procedure_levels, size_against_margin)

CALIBRATION_COLUMNS = ("claim", "kind", "comparison", "scenario", "n_values", "true_value", "threshold",
                       "replications", "looks", "holds", "does_not_hold", "tie", "inconclusive",
                       "type1_error", "type1_se", "type1_ok", "expected", "power", "mean_seeds",
                       "beyond_delta_error", "beyond_delta_se")


@dataclass(frozen=True)
class Shape:
    """What one comparison's per-seed data look like, for resampling."""

    claim: str
    kind: str
    comparison: str
    values: np.ndarray  # means: per-seed values; ordered: signs (+1, −1, 0); stall_rate: 0/1 flags
    threshold: float
    margin: float
    upward: bool
    comparisons: int  # m of the claim ("does not hold" at α/(K·m))


def _values_of(spec, runs, comparison) -> np.ndarray:
    """The per-seed values behind one comparison of a claim (its kind's)."""
    return claim_kind(spec.kind).seed_values(spec, runs, comparison)


def _null(kind: str) -> str:
    """How a kind's values are resampled: MEAN, SIGN or RATE."""
    return claim_kind(kind).null


def claim_shape(spec, runs: pd.DataFrame, margin: float, shape_runs: pd.DataFrame | None = None) -> Shape | None:
    """The shape of a claim's decisive comparison on ``runs`` (the figures'
    seeds): the one nearest its threshold among the testable comparisons with
    data. ``shape_runs``: a larger table of the same policies to draw the
    values from instead (the stall check's 200 seeds). None when the claim
    has no comparison to calibrate."""
    comparisons, _, upward = claim_comparisons(runs, spec, 0.95, margin)
    usable = [c for c in comparisons if c.verdict != NOT_TESTABLE and math.isfinite(c.value)]
    if not usable:
        return None
    threshold = claim_kind(spec.kind).threshold(spec.threshold)
    nearest = min(usable, key=lambda c: abs(c.value - threshold) / (abs(c.ci_high - c.ci_low) or 1.0))
    source = runs
    if shape_runs is not None and claim_kind(spec.kind).pooled_shape and all(
            policy in set(shape_runs["policy"]) for policy, _ in nearest.units):
        source = shape_runs
        spec = _without_sweep(spec)
        nearest = next(c for c in claim_comparisons(shape_runs, spec, 0.95, margin)[0]
                       if c.units[0][0] == nearest.units[0][0])
    values = _values_of(spec, source, nearest)
    return Shape(spec.name, spec.kind, nearest.key, values, threshold, margin, upward, len(comparisons))


def _without_sweep(spec):
    from dataclasses import replace

    return replace(spec, sweep_values=())


def look_intervals(shape: Shape, sample: np.ndarray, confidence: float, fail_confidence: float):
    """(low, high, wide low, wide high, threshold) of the shape's statistic on
    each row of ``sample`` (replications × seeds): the claims' intervals
    (:mod:`cqb.analysis.claims.statistics`) at the claim level and at the
    "does not hold" level, vectorised."""
    if _null(shape.kind) == MEAN:
        low, high = skew_corrected_bounds(sample, confidence)
        wide_low, wide_high = skew_corrected_bounds(sample, fail_confidence)
        return low, high, wide_low, wide_high, shape.threshold
    if _null(shape.kind) == SIGN:
        moved = (sample > 0).sum(axis=1)
        counted = (sample != 0).sum(axis=1)
        return (*binomial_bounds(moved, counted, confidence), *binomial_bounds(moved, counted, fail_confidence), 0.5)
    # RATE
    stalled = sample.sum(axis=1)
    trials = np.full(sample.shape[0], sample.shape[1])
    return (*binomial_bounds(stalled, trials, confidence), *binomial_bounds(stalled, trials, fail_confidence),
            shape.threshold)


def sequential_procedure(shape: Shape, draws: np.ndarray, looks: Sequence[int],
                         alpha: float, with_size: bool = False) -> tuple[np.ndarray, ...]:
    """(verdict, seeds used) of each row of ``draws`` (replications × the
    cap's seeds, in the order the looks add them) under the powered reading's
    procedure: at each look the first n seeds, at the levels of
    :func:`cqb.analysis.verdict_rules.procedure_levels`, the two-level verdict
    of :func:`cqb.analysis.verdict_rules.comparison_verdicts`, and a row stops
    at the first look that decides it (:func:`cqb.analysis.verdict_rules.decided`).
    ``with_size``: also each row's size against δ, on the interval its
    verdict used (the Bonferroni level's for "does not hold")."""
    looks = tuple(int(n) for n in looks)
    confidence, fail_confidence = procedure_levels(alpha, len(looks), shape.comparisons)
    replications = draws.shape[0]
    verdict = np.full(replications, INCONCLUSIVE, dtype=object)
    size = np.full(replications, NO_SIZE, dtype=object)
    used = np.full(replications, looks[-1])
    open_ = np.ones(replications, dtype=bool)
    for n in looks:
        index = np.flatnonzero(open_)
        if index.size == 0:
            break
        low, high, wide_low, wide_high, threshold = look_intervals(shape, draws[index, :n], confidence,
                                                                   fail_confidence)
        now = comparison_verdicts(low, high, wide_low, wide_high, threshold, shape.margin, shape.upward)
        stop = decided(now)
        verdict[index[stop]] = now[stop]
        used[index[stop]] = n
        open_[index[stop]] = False
        if with_size:
            failing = now == FAILS
            sizes = size_against_margin(np.where(failing, wide_low, low), np.where(failing, wide_high, high),
                                        threshold, shape.margin, shape.upward)
            size[index[stop]] = sizes[stop]  # a tie straddles its threshold: no size
    return (verdict, used, size) if with_size else (verdict, used)


def simulate_procedure(shape: Shape, values: np.ndarray, looks: Sequence[int], alpha: float, replications: int,
                       rng) -> tuple[np.ndarray, np.ndarray]:
    """(verdict, seeds used) of each replication of the sequential procedure
    on seeds drawn with replacement from ``values``."""
    looks = tuple(int(n) for n in looks)
    draws = values[rng.integers(values.shape[0], size=(replications, looks[-1]))]
    return sequential_procedure(shape, draws, looks, alpha)


def null_values(shape: Shape, rng) -> np.ndarray:
    """The shape's values moved onto the boundary of its claim."""
    values = shape.values
    if _null(shape.kind) == MEAN:
        return values - values.mean() + shape.threshold
    if _null(shape.kind) == SIGN:
        signed = values[values != 0]
        ties = values[values == 0]
        half = np.concatenate([np.ones(max(1, signed.size)), -np.ones(max(1, signed.size))])
        return np.concatenate([half, np.zeros(2 * ties.size)]) if ties.size else half
    # RATE: a rate equal to the threshold, as 0/1 flags
    size = 10000
    return (np.arange(size) < round(shape.threshold * size)).astype(np.float64)


def edge_values(shape: Shape) -> np.ndarray:
    """The shape's values moved so that the true effect lies δ from the
    threshold on the observed effect's side (the claim's side when it sits
    on the threshold): a mean shifted there; signs with that share moving
    the claimed way, ties kept in proportion."""
    observed = _true_value(shape, shape.values)
    side = np.sign(observed - _threshold(shape)) or (1.0 if shape.upward else -1.0)
    target = _threshold(shape) + side * shape.margin
    if _null(shape.kind) == MEAN:
        return shape.values - shape.values.mean() + target
    size = 10000
    ties = int(round(size * float(np.mean(shape.values == 0)))) if _null(shape.kind) == SIGN else 0
    signed = size - ties
    up = int(round(target * signed))
    return np.concatenate([np.ones(up), -np.ones(signed - up), np.zeros(ties)])


def _threshold(shape: Shape) -> float:
    return 0.5 if _null(shape.kind) == SIGN else shape.threshold


def _true_value(shape: Shape, values: np.ndarray) -> float:
    if _null(shape.kind) == SIGN:
        return float((values > 0).sum() / max(1, (values != 0).sum()))
    return float(values.mean())


def correct_set(shape: Shape) -> tuple[str, ...]:
    """The verdicts true of the observed effect (verdict_rules.correct_verdicts):
    its direction, and a tie within δ where it lies within δ of the threshold."""
    value = shape.values.mean() if _null(shape.kind) != SIGN else (
        (shape.values > 0).sum() / max(1, (shape.values != 0).sum()))
    threshold = 0.5 if _null(shape.kind) == SIGN else shape.threshold
    right = correct_verdicts(float(value), shape.margin, threshold, shape.upward)
    return tuple(v for v in (HOLDS, FAILS, TIE) if v in right)


def calibration_stream(seed: int, name: str) -> np.random.Generator:
    """The named stream of one (claim, scenario): a child of the study's seed
    keyed by the name, so adding a claim never shifts another's draws."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(zlib.crc32(name.encode()),)))


def calibrate(shapes: Sequence[Shape], designs: Mapping[str, tuple[tuple[int, ...], float]],
              replications: int, seed: int) -> pd.DataFrame:
    """The calibration table: per shape, a null and an effect scenario;
    ``designs`` maps a claim to its (looks, alpha)."""
    rows = []
    for shape in shapes:
        looks, alpha = designs[shape.claim]
        scenarios = ("null", "effect") + (("edge of δ",) if shape.margin > 0 and _null(shape.kind) != RATE else ())
        for scenario in scenarios:
            rng = calibration_stream(seed, f"{shape.claim}/{scenario}")
            values = {"null": null_values(shape, rng), "effect": shape.values,
                      "edge of δ": edge_values(shape)}[scenario]
            draws = values[rng.integers(values.shape[0], size=(replications, looks[-1]))]
            verdict, used, size = sequential_procedure(shape, draws, looks, alpha, with_size=True)
            beyond = float(np.mean(size == BEYOND_MARGIN)) if scenario == "edge of δ" else math.nan
            share = {v: float(np.mean(verdict == v)) for v in (HOLDS, FAILS, TIE, INCONCLUSIVE)}
            type1 = share[HOLDS] + share[FAILS] if scenario == "null" else math.nan
            se = math.sqrt(type1 * (1 - type1) / replications) if scenario == "null" else math.nan
            correct = correct_set(shape) if scenario == "effect" else ()
            true_value = (float(values.mean()) if _null(shape.kind) != SIGN
                          else float((values > 0).sum() / max(1, (values != 0).sum())))
            rows.append({"claim": shape.claim, "kind": shape.kind, "comparison": shape.comparison,
                         "scenario": scenario, "n_values": int(shape.values.shape[0]), "true_value": true_value,
                         "threshold": shape.threshold, "replications": replications,
                         "looks": " ".join(str(n) for n in looks),
                         "holds": share[HOLDS], "does_not_hold": share[FAILS], "tie": share[TIE],
                         "inconclusive": share[INCONCLUSIVE], "type1_error": type1, "type1_se": se,
                         "type1_ok": (type1 <= alpha + 2 * se) if scenario == "null" else "",
                         "expected": " or ".join(correct),
                         "power": sum(share[v] for v in correct) if correct else math.nan,
                         "mean_seeds": float(used.mean()), "beyond_delta_error": beyond,
                         "beyond_delta_se": math.sqrt(beyond * (1 - beyond) / replications)})
    return pd.DataFrame(rows, columns=list(CALIBRATION_COLUMNS))


def plot_calibration(table: pd.DataFrame, alpha: float, path_pdf, path_png) -> None:
    """Type-I error (± 2 Monte-Carlo SE, against α) and power per claim."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    null = table[table["scenario"] == "null"].reset_index(drop=True)
    effect = table[table["scenario"] == "effect"].reset_index(drop=True)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.45 * max(4, len(null)) + 1.5), sharey=True)
    y = np.arange(len(null))
    left.errorbar(null["type1_error"], y, xerr=2 * null["type1_se"], fmt="o", color="#a11")
    left.axvline(alpha, color="k", linestyle="--", linewidth=1, label=f"α = {alpha:g}")
    left.set_yticks(y, [f"{c} ({k})" for c, k in zip(null["claim"], null["kind"])])
    left.set_xlabel("type-I error at the null (± 2 MC SE)")
    left.legend(loc="lower right")
    left.invert_yaxis()
    right.barh(y, effect["power"], color="#17632a")
    right.set_xlim(0, 1)
    right.set_xlabel("power at the observed effect (share reaching its verdict)")
    fig.suptitle("Calibration of the powered reading: the whole sequential procedure, simulated")
    fig.tight_layout()
    fig.savefig(path_pdf)
    fig.savefig(path_png, dpi=110)
    plt.close(fig)


def calibration_table(claims: Mapping, runs_tables: Mapping[str, pd.DataFrame], shape_experiment: str | None,
                      replications: int, seed: int, replication: Mapping | None = None) -> pd.DataFrame:
    """The calibration table of the powered claims (``claims``: name →
    :class:`cqb.analysis.powered_reading.PoweredClaim`) on the run tables of their
    experiments (the convergence and stall claims' values from
    ``shape_experiment`` when it runs their policies); ``replication``: claim
    name → its registered replication design, whose rows
    (:func:`calibrate_replication`) are appended."""
    shapes, designs = [], {}
    shape_runs = runs_tables.get(shape_experiment) if shape_experiment else None
    for name, claim in claims.items():
        shape = claim_shape(claim.spec, runs_tables[claim.spec.experiment], claim.margin, shape_runs)
        if shape is None:
            continue
        shapes.append(shape)
        designs[name] = (claim.looks, claim.alpha)
    table = calibrate(shapes, designs, replications, seed)
    extra = [row for shape in shapes if shape.claim in (replication or {})
             for row in calibrate_replication(shape, *designs[shape.claim], replication[shape.claim], replications,
                                              seed)]
    return pd.concat([table, pd.DataFrame(extra, columns=list(CALIBRATION_COLUMNS))], ignore_index=True) if extra \
        else table


# The replication study simulated whole (docs/verdicts.md, "The replication
# study"): the powered design, then, where it decided "holds", the registered
# one-look study on fresh draws. Its own scenarios, beside null and effect.
REPLICATION_SCENARIOS = ("replication null", "replication within δ", "replication shrunken")


def values_at(shape: Shape, target: float) -> np.ndarray:
    """The shape's values moved so that their truth is ``target``: a mean
    shifted onto it; signs with the share of moved pairs at ``target`` (ties
    kept in proportion); stall flags at that rate."""
    values = shape.values
    if _null(shape.kind) == MEAN:
        return values - values.mean() + target
    size = 10000
    if _null(shape.kind) == SIGN:
        signed = round(size * max(1, (values != 0).sum()) / values.size)
        up = round(signed * target)
        return np.concatenate([np.ones(up), -np.ones(signed - up), np.zeros(size - signed)])
    return (np.arange(size) < round(target * size)).astype(np.float64)


def replication_procedure(shape: Shape, values: np.ndarray, looks: Sequence[int], alpha: float, seeds: int,
                          replication_alpha: float, replications: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """(powered verdict, replication verdict) of each replication: the
    sequential procedure on one sample, the one-look study of ``seeds`` seeds
    at ``replication_alpha`` (the claim's m) on an independent one."""
    powered, _ = simulate_procedure(shape, values, looks, alpha, replications, rng)
    replicated, _ = simulate_procedure(shape, values, (seeds,), replication_alpha, replications, rng)
    return powered, replicated


def calibrate_replication(shape: Shape, looks: Sequence[int], alpha: float, design: Mapping,
                          replications: int, seed: int) -> list[dict]:
    """The replication study's rows of one claim (``design``: its registered
    seeds, alpha and the shrunken effect of its decisive comparison):

    * *replication null* and *replication within δ* (the truth on the
      threshold, or δ/2 beyond it on the claim's side): ``type1_error`` is
      the share of replications *replicated as holding* (the powered design
      and the study both say holds); at the null it should be ≤ the study's
      α (within 2 SE), as both must err;
    * *replication shrunken* (the truth at the registered shrunken effect):
      ``power`` is the study's share of verdicts true of that effect, the
      power its size was chosen for; ``holds`` the share replicated as
      holding.

    The verdict shares are the study's, over every replication."""
    rows = []
    sign = 1.0 if shape.upward else -1.0
    targets = {"replication null": shape.threshold,
               "replication within δ": shape.threshold + sign * shape.margin / 2,
               "replication shrunken": float(design["effect"])}
    for scenario, target in targets.items():
        if scenario == "replication within δ" and shape.margin <= 0:
            continue
        rng = calibration_stream(seed, f"{shape.claim}/{scenario}")
        values = values_at(shape, target)
        powered, replicated = replication_procedure(shape, values, looks, alpha, int(design["seeds"]),
                                                    float(design["alpha"]), replications, rng)
        both = float(np.mean((powered == HOLDS) & (replicated == HOLDS)))
        share = {v: float(np.mean(replicated == v)) for v in (HOLDS, FAILS, TIE, INCONCLUSIVE)}
        right = correct_verdicts(target, shape.margin, shape.threshold, shape.upward)
        shrunk = scenario == "replication shrunken"
        se = math.sqrt(both * (1 - both) / replications)
        rows.append({"claim": shape.claim, "kind": shape.kind, "comparison": shape.comparison, "scenario": scenario,
                     "n_values": int(shape.values.shape[0]), "true_value": target, "threshold": shape.threshold,
                     "replications": replications,
                     "looks": " ".join(str(n) for n in looks) + f" + {int(design['seeds'])}",
                     "holds": both if shrunk else share[HOLDS], "does_not_hold": share[FAILS], "tie": share[TIE],
                     "inconclusive": share[INCONCLUSIVE], "type1_error": math.nan if shrunk else both,
                     "type1_se": math.nan if shrunk else se,
                     "type1_ok": (both <= float(design["alpha"]) + 2 * se) if scenario == "replication null" else "",
                     "expected": " or ".join(v for v in (HOLDS, FAILS, TIE) if v in right) if shrunk else "",
                     "power": sum(share[v] for v in right) if shrunk else math.nan,
                     "mean_seeds": float(design["seeds"])})
    return rows
