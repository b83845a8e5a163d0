"""The claims' statistics: each claim kind's check, one comparison at a time.

Each claim is evaluated on the per-run summary tables of the experiments
(:mod:`cqb.analysis.summaries`): one number per run, so that policies and sweep values
can be paired by seed. Within a seed every policy plays the same arrivals,
contexts and service uniforms (common random numbers); across the values of an
instance sweep (K, d, ϵ) a seed keeps its arrival and service uniforms but
draws a new instance, so those pairs share less.

A claim reads its statistic, a 95 % interval and a verdict:

* ``holds``: the interval lies on the claim's side of its threshold;
* ``does not hold``: the interval lies on the other side;
* ``tie within δ``: the interval straddles the threshold but lies inside
  threshold ± δ, the claim kind's equivalence margin (``claim_margins``);
* ``inconclusive``: the interval straddles the threshold, wider than ± δ.

A claim is a set of *comparisons* (per policy and sweep value, per adjacent
sweep pair, per other policy); each has its own interval and verdict, and
the claim's verdict combines them (:func:`cqb.analysis.verdict_rules.combine`;
every verdict rule is in :mod:`cqb.analysis.verdict_rules`). Every check takes the
interval level ``confidence`` and the margin ``margin``, so the powered
reading (:mod:`cqb.powered`) evaluates the same statistics at its own levels.

Kinds of check (``ClaimSpec.kind``; each is a row of :mod:`cqb.analysis.claims.kinds`):

``grows``
    the policy's queue grows: per run, the least-squares slope of Q(t) over
    the second half of the horizon; mean over seeds with a bootstrap interval;
    threshold 0 jobs/round.
``converges``
    the policy comes down to the optimal level: per run, the mean of
    Q(t) − Q*(t) over the last 10 % of rounds (the tail regret); mean over
    seeds with a bootstrap interval; it holds when the interval lies below
    ``threshold`` jobs.
``ordered``
    a metric moves monotonically along a sweep: for each pair of adjacent
    sweep values, the share of seeds in which the metric moves in the claimed
    direction, with an exact binomial (sign-test) interval; the claim holds
    when every adjacent pair's interval lies above one half, fails when some
    pair's lies below, and the reported value is the weakest pair's share.
``best``
    a policy beats every other non-oracle policy of the experiment: paired by
    seed, the mean difference (other − claimed) of the metric, with a bootstrap
    interval; holds when every interval lies above 0, fails when some interval
    lies below 0; the value is the smallest mean difference.
``drops``
    after its peak the queue falls: per run, (peak − final)/peak of Q(t); mean
    with a bootstrap interval; holds above ``threshold`` (a fraction).
``stall_rate``
    the share of stalled runs of each policy; exact binomial interval; holds
    when every policy's interval lies below ``threshold`` (its upper end at
    most the threshold), does not hold when some policy's lies above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..summaries import binomial_interval
from ..verdict_rules import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, TIE, combine, comparison_verdict, decisive, fail_level


@dataclass(frozen=True)
class ClaimResult:
    statistic: str
    value: float
    ci_low: float
    ci_high: float
    verdict: str
    n_seeds: int
    detail: str = ""
    comparisons: tuple = ()  # the Comparisons behind the verdict
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Comparison:
    """One interval of a claim: ``key`` names it (stable across looks),
    ``units`` are the (policy label, sweep value) run sets it reads."""

    key: str
    units: tuple
    value: float
    ci_low: float
    ci_high: float
    verdict: str
    n: int
    text: str


def bootstrap_mean_interval(values, confidence=0.95, resamples=4000, seed=0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over seeds (a fixed stream).
    Kept for comparison only: it under-covers at small n (docs/verdicts.md);
    the claims use :func:`mean_interval`."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape[0] < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = values[rng.integers(values.shape[0], size=(resamples, values.shape[0]))].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def skew_corrected_bounds(values, confidence):
    """Hall's skewness-corrected t interval of the mean, per row of
    ``values`` (replications × n), vectorised: with t = (x̄ − μ)/s and γ̂ the
    sample skewness, g(t) = t + γ̂t²/3 + γ̂²t³/27 + γ̂/(6n) is monotone and
    √n·g(t) is nearly Student-t with n − 1 degrees of freedom, so inverting
    g at ± t_(n−1) quantiles gives the interval (P. Hall, "On the removal of
    skewness by transformation", JRSS B 54, 1992). Second-order correct like
    the studentized bootstrap, without resampling; a row without spread
    gives its point."""
    from scipy.stats import t as student

    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    n = values.shape[1]
    mean = values.mean(axis=1)
    centred = values - mean[:, None]
    sd = np.sqrt((centred ** 2).sum(axis=1) / (n - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        skew = np.where(sd > 0, (centred ** 3).mean(axis=1) / sd ** 3, 0.0)
    c = float(student.ppf(1 - (1 - confidence) / 2, n - 1)) / math.sqrt(n)

    def inverse(x):
        # g⁻¹(x) = (3/γ̂)·(cbrt(1 + γ̂(x − γ̂/(6n))) − 1); x − γ̂/(6n) itself when γ̂ = 0
        shifted = x - skew / (6 * n)
        small = np.abs(skew) < 1e-9
        with np.errstate(invalid="ignore", divide="ignore"):
            root = 3 / skew * (np.cbrt(1 + skew * shifted) - 1)
        return np.where(small, shifted, root)

    low = mean - sd * inverse(c)
    high = mean - sd * inverse(-c)
    return np.where(sd > 0, low, mean), np.where(sd > 0, high, mean)


def mean_interval(values, confidence=0.95) -> tuple[float, float]:
    """Hall's skewness-corrected t interval of the mean over seeds
    (:func:`skew_corrected_bounds`); NaN below two seeds."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape[0] < 2:
        return math.nan, math.nan
    low, high = skew_corrected_bounds(values[None, :], confidence)
    return float(low[0]), float(high[0])


def _select(runs: pd.DataFrame, spec, policy: str | None = None) -> pd.DataFrame:
    rows = runs
    if policy is not None:
        rows = rows[rows["policy"] == policy]
    if spec.sweep_values:
        rows = rows[rows["sweep_value"].isin(spec.sweep_values)]
    if rows.empty:
        raise ValueError(f"claim {spec.name!r}: no runs of {policy or spec.policies} in "
                         f"experiment {spec.experiment!r}"
                         + (f" at sweep values {list(spec.sweep_values)}" if spec.sweep_values else ""))
    return rows


def _groups(runs, spec):
    """(name, rows) per policy and sweep value: a claim must hold at every one."""
    for policy in spec.policies:
        rows = _select(runs, spec, policy)
        for value, group in rows.groupby("sweep_value", sort=False):
            yield (policy, value), (f"{policy} at {group['sweep_param'].iloc[0]} = {value}"
                                    if value != "" else policy), group


def _testable(spec, rows) -> bool:
    """exploration_half: the policy's τ ends by T/2 (a policy without τ is testable)."""
    if spec.testable != "exploration_half":
        return True
    tau = rows["explore_rounds"].to_numpy(dtype=np.float64) if "explore_rounds" in rows else np.array([np.nan])
    tau = tau[np.isfinite(tau)]
    return tau.size == 0 or float(np.median(tau)) <= float(rows["horizon"].iloc[0]) / 2


def _per_group_mean(runs, spec, values_of, below, confidence, margin, fail_confidence=None):
    """One mean check per policy and sweep value."""
    groups = list(_groups(runs, spec))
    fail_confidence = fail_level(confidence, len(groups)) if fail_confidence is None else fail_confidence
    comparisons = []
    for unit, name, rows in groups:
        values = values_of(rows)
        mean = float(np.mean(values))
        low, high = mean_interval(values, confidence)
        if not _testable(spec, rows):
            verdict = NOT_TESTABLE
            comparisons.append(Comparison(name, (unit,), mean, low, high, verdict, len(rows),
                                          f"{name}: {mean:.3g} n={len(rows)} {verdict} "
                                          f"(τ = {float(np.nanmedian(rows['explore_rounds'])):.0f} > T/2)"))
            continue
        wide = mean_interval(values, fail_confidence)
        verdict = comparison_verdict(low, high, *wide, spec.threshold, margin, upward=not below)
        comparisons.append(Comparison(name, (unit,), mean, low, high, verdict, len(rows),
                                      f"{name}: {mean:.3g} [{low:.3g}, {high:.3g}] n={len(rows)} {verdict}"))
    return comparisons


def _pct(confidence):
    return f"{100 * confidence:.4g}%"


def _grows(runs, spec, confidence=0.95, margin=0.0, fail_confidence=None):
    metric = spec.metric if spec.metric in ("late_slope", "full_slope") else "late_slope"
    span = "the whole horizon" if metric == "full_slope" else "the second half of the horizon"
    return (_per_group_mean(runs, spec, lambda rows: rows[metric].to_numpy(), False, confidence, margin,
                            fail_confidence),
            f"mean over seeds of the least-squares slope of Q(t) over {span} "
            f"(jobs/round), skew-corrected t {_pct(confidence)} interval; holds above {spec.threshold:g}", True)


def _converges(runs, spec, confidence=0.95, margin=0.0, fail_confidence=None):
    return (_per_group_mean(runs, spec, lambda rows: rows[spec.metric].to_numpy(), True, confidence, margin,
                            fail_confidence),
            f"mean over seeds of {spec.metric} (Q − Q*), skew-corrected t {_pct(confidence)} interval; "
            f"holds below {spec.threshold:g} jobs", False)


def _typical_below(runs, spec, confidence=0.95, margin=0.0, fail_confidence=None):
    groups = list(_groups(runs, spec))
    fail_confidence = fail_level(confidence, len(groups)) if fail_confidence is None else fail_confidence
    comparisons = []
    for unit, name, rows in groups:
        below = int((rows[spec.metric].to_numpy(dtype=np.float64) < spec.threshold).sum())
        n = len(rows)
        low, high = binomial_interval(below, n, confidence)
        verdict = comparison_verdict(low, high, *binomial_interval(below, n, fail_confidence), 0.5, margin)
        comparisons.append(Comparison(name, (unit,), below / n, low, high, verdict, n,
                                      f"{name}: {below}/{n} [{low:.2f}, {high:.2f}] n={n} {verdict}"))
    return (comparisons,
            f"share of runs whose {spec.metric} is below {spec.threshold:g}, exact binomial "
            f"{_pct(confidence)} interval; holds above 1/2", True)


def drop_from_peak(rows):
    """Per run, (peak Q − final Q)/peak Q (0 for a queue that never rose)."""
    peak = rows["peak_queue"].to_numpy(dtype=np.float64)
    final = rows["final_queue"].to_numpy(dtype=np.float64)
    return np.where(peak > 0, (peak - final) / np.where(peak > 0, peak, 1), 0.0)


def _drops(runs, spec, confidence=0.95, margin=0.0, fail_confidence=None):
    where = "; comparisons with τ > T/2 not testable" if spec.testable == "exploration_half" else ""
    return (_per_group_mean(runs, spec, drop_from_peak, False, confidence, margin, fail_confidence),
            f"mean over seeds of (peak Q − final Q)/peak Q, skew-corrected t {_pct(confidence)} interval; "
            f"holds above {spec.threshold:g}{where}", True)


def _sweep_order(rows):
    values = list(dict.fromkeys(rows["sweep_value"]))
    try:
        return sorted(values, key=float)
    except ValueError:
        return values


def _ordered(runs, spec, confidence=0.95, margin=0.0, fail_confidence=None):
    pairs = []
    for policy in spec.policies:
        rows = _select(runs, spec, policy)
        values = _sweep_order(rows)
        wide = rows.pivot_table(index="seed", columns="sweep_value", values=spec.metric, aggfunc="first")
        censored = (rows.pivot_table(index="seed", columns="sweep_value", values="censored", aggfunc="first")
                    if spec.metric == "time_to_optimal" and "censored" in rows else None)
        for smaller, larger in zip(values, values[1:]):
            pairs.append((policy, smaller, larger, wide, censored))
    fail_confidence = fail_level(confidence, len(pairs)) if fail_confidence is None else fail_confidence
    comparisons = []
    for policy, smaller, larger, wide, censored in pairs:
        pair = wide[[smaller, larger]].dropna()
        change = pair[larger].to_numpy() - pair[smaller].to_numpy()
        if spec.direction == "decreasing":
            change = -change
        moved = int((change > 0).sum())
        counted = int((change != 0).sum())  # ties carry no sign (two censored runs are a tie)
        share = moved / counted if counted else math.nan
        low, high = binomial_interval(moved, counted, confidence) if counted else (math.nan, math.nan)
        key = f"{policy} {smaller}→{larger}"
        both_censored = (censored is not None and len(pair) > 0
                         and bool(censored.loc[pair.index, [smaller, larger]].astype(bool).all(axis=None)))
        if counted == 0 and both_censored:
            verdict = NOT_TESTABLE
        else:
            wide_interval = binomial_interval(moved, counted, fail_confidence) if counted else (math.nan, math.nan)
            verdict = comparison_verdict(low, high, *wide_interval, 0.5, margin)
        comparisons.append(Comparison(key, ((policy, smaller), (policy, larger)), share, low, high,
                                      verdict, len(pair),
                                      f"{key}: {moved}/{counted} [{low:.2f}, {high:.2f}] {verdict}"
                                      + (" (every run censored at T)" if verdict == NOT_TESTABLE else "")))
    censoring = ("; a run that never reaches the optimal level is censored at T and counts as slower"
                 if spec.metric == "time_to_optimal" else "")
    return (comparisons,
            f"share of seeds whose {spec.metric} is {spec.direction} between adjacent sweep values "
            f"(paired by seed, ties carry no sign{censoring}; exact binomial {_pct(confidence)} interval; "
            "weakest pair shown); holds when every pair is above 1/2", True)


def _best(runs, spec, confidence=0.95, margin=0.0, fail_confidence=None):
    (claimed,) = spec.policies
    rows = _select(runs, spec)
    wide = rows.pivot_table(index="seed", columns="policy", values=spec.metric, aggfunc="first")
    if claimed not in wide:
        raise ValueError(f"claim {spec.name!r}: policy {claimed!r} not run in {spec.experiment!r}")
    value_of = dict(zip(rows["policy"], rows["sweep_value"]))
    others = [p for p in wide.columns if p not in (claimed, "oracle")]
    fail_confidence = fail_level(confidence, len(others)) if fail_confidence is None else fail_confidence
    comparisons = []
    for other in others:
        pair = wide[[claimed, other]].dropna()
        difference = pair[other].to_numpy() - pair[claimed].to_numpy()
        mean = float(difference.mean())
        low, high = mean_interval(difference, confidence)
        verdict = comparison_verdict(low, high, *mean_interval(difference, fail_confidence), 0.0, margin)
        key = f"{other} − {claimed}"
        comparisons.append(Comparison(key, ((claimed, value_of[claimed]), (other, value_of[other])), mean,
                                      low, high, verdict, len(pair),
                                      f"{key}: {mean:.3g} [{low:.3g}, {high:.3g}] {verdict}"))
    return (comparisons,
            f"paired by seed, mean of ({spec.metric} of another policy − {spec.metric} of {claimed}), "
            f"skew-corrected t {_pct(confidence)} interval; the comparison that decides, of the "
            f"{len(others)} other non-oracle policies (here {{decisive}}); holds above 0", True)


def reference_factor(spec, policy: str, reference: str, value: str) -> float:
    """How far the claim lets ``value``'s metric exceed ``reference``'s: 1 for
    ``within_reference``; for ``rate_bound`` (a horizon sweep) the policy's
    theorem rate from T = reference to T = value (cqb.presentation)."""
    if spec.kind != "rate_bound":
        return 1.0
    from ...presentation import theorem_rate

    rate = theorem_rate(policy)
    if rate is None:
        raise ValueError(f"claim {spec.name!r}: policy {policy!r} states no theorem rate to bound its growth by")
    return float(rate.curve(np.array([float(reference), float(value)]))[1])


def reference_differences(spec, rows, policy: str, reference: str, value: str) -> np.ndarray:
    """Per seed (paired): metric at ``value`` − factor × metric at ``reference``."""
    wide = rows.pivot_table(index="seed", columns="sweep_value", values=spec.metric, aggfunc="first")
    pair = wide[[reference, value]].dropna()
    factor = reference_factor(spec, policy, reference, value)
    return pair[value].to_numpy(dtype=np.float64) - factor * pair[reference].to_numpy(dtype=np.float64)


def _against_reference(runs, spec, confidence=0.95, margin=0.0, fail_confidence=None):
    """Each sweep value against the first (the reference: an i.i.d. control,
    or the shortest horizon), per policy and paired by seed; holds below the
    claim's threshold."""
    pairs = []
    for policy in spec.policies:
        rows = _select(runs, spec, policy)
        if spec.kind == "rate_bound" and rows["sweep_param"].iloc[0] != "horizon":
            raise ValueError(f"claim {spec.name!r}: a rate bound needs a horizon sweep, "
                             f"not {rows['sweep_param'].iloc[0]!r}")
        values = _sweep_order(rows)
        pairs += [(policy, rows, values[0], value) for value in values[1:]]
    fail_confidence = fail_level(confidence, len(pairs)) if fail_confidence is None else fail_confidence
    comparisons = []
    for policy, rows, reference, value in pairs:
        difference = reference_differences(spec, rows, policy, reference, value)
        mean = float(difference.mean())
        low, high = mean_interval(difference, confidence)
        verdict = comparison_verdict(low, high, *mean_interval(difference, fail_confidence), spec.threshold,
                                     margin, upward=False)
        key = f"{policy} {value} vs {reference}"
        comparisons.append(Comparison(key, ((policy, reference), (policy, value)), mean, low, high, verdict,
                                      len(difference), f"{key}: {mean:.3g} [{low:.3g}, {high:.3g}] {verdict}"))
    grown = ("its theorem's rate × the value at the shortest horizon" if spec.kind == "rate_bound"
             else "the value at the reference (first sweep value)")
    return (comparisons,
            f"paired by seed, mean of ({spec.metric} − {grown}), skew-corrected t {_pct(confidence)} "
            f"interval, per sweep value; holds below {spec.threshold:g} jobs", False)


def _stall_rate(runs, spec, confidence=0.95, margin=0.0, fail_confidence=None):
    fail_confidence = fail_level(confidence, len(spec.policies)) if fail_confidence is None else fail_confidence
    comparisons = []
    for policy in spec.policies:
        rows = _select(runs, spec, policy)
        stalled = int(rows["stalled"].sum())
        n = len(rows)
        low, high = binomial_interval(stalled, n, confidence)
        seeds = " ".join(str(s) for s in rows.loc[rows["stalled"].astype(bool), "seed"]) or "none"
        verdict = comparison_verdict(low, high, *binomial_interval(stalled, n, fail_confidence), spec.threshold,
                                     margin, upward=False)
        units = tuple((policy, value) for value in dict.fromkeys(rows["sweep_value"]))
        comparisons.append(Comparison(policy, units, stalled / n, low, high, verdict, n,
                                      f"{policy}: {stalled}/{n} [{low:.3f}, {high:.3f}] {verdict}; "
                                      f"stalled seeds: {seeds}"))
    return (comparisons,
            f"share of stalled runs (tail regret above the stall threshold), exact binomial "
            f"{_pct(confidence)} interval; the decisive policy shown; holds when every policy's upper end "
            f"is below {spec.threshold:g}", False)


def summarise(spec, comparisons, statistic: str, upward: bool) -> ClaimResult:
    """The claim's row from its comparisons: the decisive one's value and
    interval (for ``best``: the comparison whose interval comes nearest to 0
    on the claim's side, or the failing one), the combined verdict, the
    smallest n and every comparison."""
    worst = decisive(comparisons, upward)
    if "{decisive}" in statistic:
        statistic = statistic.replace("{decisive}", worst.key.split(" − ")[0])
    return ClaimResult(statistic, worst.value, worst.ci_low, worst.ci_high,
                       combine(c.verdict for c in comparisons), min(c.n for c in comparisons),
                       "; ".join(c.text for c in comparisons), tuple(comparisons))


_drop_from_peak = drop_from_peak  # the name the calibration used
