"""The paper's stated outcomes (and our own findings) as checks with a verdict.

Each claim is evaluated on the per-run summary tables of the experiments
(:mod:`cqb.analysis.summaries`): one number per run, so that policies and sweep values
can be paired by seed. Within a seed every policy plays the same arrivals,
contexts and service uniforms (common random numbers); across the values of an
instance sweep (K, d, ϵ) a seed keeps its arrival and service uniforms but
draws a new instance, so those pairs share less.

A claim reads its statistic, a 95 % interval and a verdict:

* ``holds``: the interval lies on the claim's side of its threshold;
* ``does not hold``: the interval lies on the other side;
* ``inconclusive``: the interval straddles the threshold.

Kinds of check (``ClaimSpec.kind``):

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
    when the observed share is at most ``threshold`` for every policy; the
    value is the largest share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .summaries import binomial_interval

KINDS = ("grows", "converges", "ordered", "best", "drops", "stall_rate")
METRICS = ("final_regret", "tail_regret", "mean_regret", "early_regret", "peak_round", "peak_queue",
           "late_slope")
HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
CLAIM_COLUMNS = ("claim", "figure", "experiment", "statement", "statistic", "value", "ci_low",
                 "ci_high", "verdict", "n_seeds", "detail")


@dataclass(frozen=True)
class ClaimSpec:
    name: str
    statement: str  # the claim in words
    kind: str
    experiment: str
    policies: tuple[str, ...] = ()
    figure: str = ""
    metric: str = "tail_regret"
    direction: str = "increasing"  # ordered: along increasing sweep values the metric is …
    sweep_values: tuple[str, ...] = ()  # restrict to these sweep values (all when empty)
    threshold: float = 0.0
    source: str = "paper"  # "paper" or "ours"

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.metric not in METRICS:
            raise ValueError(f"claim {self.name!r}: metric must be one of {METRICS}, got {self.metric!r}")
        if self.direction not in ("increasing", "decreasing"):
            raise ValueError(f"claim {self.name!r}: direction must be increasing or decreasing, "
                             f"got {self.direction!r}")


@dataclass(frozen=True)
class ClaimResult:
    statistic: str
    value: float
    ci_low: float
    ci_high: float
    verdict: str
    n_seeds: int
    detail: str = ""
    extra: dict = field(default_factory=dict)


def bootstrap_mean_interval(values, confidence=0.95, resamples=4000, seed=0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over seeds (a fixed stream:
    the same table gives the same interval)."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape[0] < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = values[rng.integers(values.shape[0], size=(resamples, values.shape[0]))].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def _verdict_above(low, high, threshold):
    if not (math.isfinite(low) and math.isfinite(high)):
        return INCONCLUSIVE
    if low > threshold:
        return HOLDS
    if high < threshold:
        return FAILS
    return INCONCLUSIVE


def _select(runs: pd.DataFrame, spec: ClaimSpec, policy: str | None = None) -> pd.DataFrame:
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


def _mean_check(values, threshold, below: bool) -> tuple[float, float, float, str]:
    mean = float(np.mean(values))
    low, high = bootstrap_mean_interval(values)
    verdict = _verdict_above(-high, -low, -threshold) if below else _verdict_above(low, high, threshold)
    return mean, low, high, verdict


def _decisive(results, upward: bool = True):
    """The comparison that decides a combined verdict, to be reported: a
    failing one if any (the farthest on the wrong side), else an inconclusive
    one, else the holding one nearest to its threshold. ``results`` are tuples
    (value, ci_low, ci_high, verdict, ...); ``upward``: the claim wants values
    above its threshold."""
    for wanted in (FAILS, INCONCLUSIVE, HOLDS):
        chosen = [r for r in results if r[3] == wanted]
        if chosen:
            if upward:
                return min(chosen, key=lambda r: r[2] if wanted == FAILS else r[1])
            return max(chosen, key=lambda r: r[1] if wanted == FAILS else r[2])
    raise ValueError("no comparisons")


def _combine(verdicts):
    verdicts = list(verdicts)  # read twice below
    if any(v == FAILS for v in verdicts):
        return FAILS
    if all(v == HOLDS for v in verdicts):
        return HOLDS
    return INCONCLUSIVE


def _groups(runs, spec):
    """(name, rows) per policy and sweep value: a claim must hold at every one."""
    for policy in spec.policies:
        rows = _select(runs, spec, policy)
        for value, group in rows.groupby("sweep_value", sort=False):
            yield (f"{policy} at {group['sweep_param'].iloc[0]} = {value}" if value != "" else policy), group


def _per_group_mean(runs, spec, values_of, threshold, below, describe):
    """One mean check per policy and sweep value; the row reports the least
    favourable one and lists all of them."""
    parts, results = [], []
    for name, rows in _groups(runs, spec):
        mean, low, high, verdict = _mean_check(values_of(rows), threshold, below)
        results.append((mean, low, high, verdict, len(rows)))
        parts.append(f"{name}: {mean:.3g} [{low:.3g}, {high:.3g}] n={len(rows)} {verdict}")
    worst = _decisive(results, upward=not below)
    return ClaimResult(describe, worst[0], worst[1], worst[2], _combine(r[3] for r in results),
                       min(r[4] for r in results), "; ".join(parts))


def check_grows(runs, spec):
    return _per_group_mean(runs, spec, lambda rows: rows["late_slope"].to_numpy(), spec.threshold,
                           below=False,
                           describe="mean over seeds of the least-squares slope of Q(t) over the "
                                    "second half of the horizon (jobs/round), bootstrap 95% interval; "
                                    f"holds above {spec.threshold:g}")


def check_converges(runs, spec):
    return _per_group_mean(runs, spec, lambda rows: rows[spec.metric].to_numpy(), spec.threshold,
                           below=True,
                           describe=f"mean over seeds of {spec.metric} (Q − Q*), bootstrap 95% "
                                    f"interval; holds below {spec.threshold:g} jobs")


def _drop_from_peak(rows):
    peak = rows["peak_queue"].to_numpy(dtype=np.float64)
    final = rows["final_queue"].to_numpy(dtype=np.float64)
    return np.where(peak > 0, (peak - final) / np.where(peak > 0, peak, 1), 0.0)


def check_drops(runs, spec):
    return _per_group_mean(runs, spec, _drop_from_peak, spec.threshold, below=False,
                           describe="mean over seeds of (peak Q − final Q)/peak Q, bootstrap 95% "
                                    f"interval; holds above {spec.threshold:g}")


def _sweep_order(rows):
    values = list(dict.fromkeys(rows["sweep_value"]))
    try:
        return sorted(values, key=float)
    except ValueError:
        return values


def check_ordered(runs, spec):
    parts, shares = [], []
    for policy in spec.policies:
        rows = _select(runs, spec, policy)
        values = _sweep_order(rows)
        wide = rows.pivot_table(index="seed", columns="sweep_value", values=spec.metric, aggfunc="first")
        for smaller, larger in zip(values, values[1:]):
            pair = wide[[smaller, larger]].dropna()
            change = pair[larger].to_numpy() - pair[smaller].to_numpy()
            if spec.direction == "decreasing":
                change = -change
            moved = int((change > 0).sum())
            counted = int((change != 0).sum())  # ties carry no sign
            share = moved / counted if counted else math.nan
            low, high = binomial_interval(moved, counted) if counted else (math.nan, math.nan)
            verdict = _verdict_above(low, high, 0.5)
            shares.append((share, low, high, verdict, len(pair)))
            parts.append(f"{policy} {smaller}→{larger}: {moved}/{counted} [{low:.2f}, {high:.2f}] {verdict}")
    worst = _decisive(shares)
    return ClaimResult(f"share of seeds whose {spec.metric} is {spec.direction} between adjacent sweep "
                       "values (paired by seed; exact binomial 95% interval; weakest pair shown); "
                       "holds when every pair is above 1/2",
                       worst[0], worst[1], worst[2], _combine(s[3] for s in shares),
                       min(s[4] for s in shares), "; ".join(parts))


def check_best(runs, spec):
    (claimed,) = spec.policies
    rows = _select(runs, spec)
    wide = rows.pivot_table(index="seed", columns="policy", values=spec.metric, aggfunc="first")
    if claimed not in wide:
        raise ValueError(f"claim {spec.name!r}: policy {claimed!r} not run in {spec.experiment!r}")
    others = [p for p in wide.columns if p not in (claimed, "oracle")]
    parts, results = [], []
    for other in others:
        pair = wide[[claimed, other]].dropna()
        difference = pair[other].to_numpy() - pair[claimed].to_numpy()
        mean = float(difference.mean())
        low, high = bootstrap_mean_interval(difference)
        verdict = _verdict_above(low, high, 0.0)
        results.append((mean, low, high, verdict, len(pair), other))
        parts.append(f"{other} − {claimed}: {mean:.3g} [{low:.3g}, {high:.3g}] {verdict}")
    worst = _decisive(results)
    return ClaimResult(f"paired by seed, mean of ({spec.metric} of another policy − {spec.metric} of "
                       f"{claimed}), bootstrap 95% interval; the comparison that decides, of the "
                       f"{len(others)} other non-oracle policies (here {worst[5]}); holds above 0",
                       worst[0], worst[1], worst[2], _combine(r[3] for r in results),
                       min(r[4] for r in results), "; ".join(parts))


def check_stall_rate(runs, spec):
    parts, results = [], []
    for policy in spec.policies:
        rows = _select(runs, spec, policy)
        stalled = int(rows["stalled"].sum())
        n = len(rows)
        low, high = binomial_interval(stalled, n)
        rate = stalled / n
        seeds = " ".join(str(s) for s in rows.loc[rows["stalled"].astype(bool), "seed"]) or "none"
        results.append((rate, low, high, rate <= spec.threshold, n))
        parts.append(f"{policy}: {stalled}/{n} [{low:.3f}, {high:.3f}] stalled seeds: {seeds}")
    worst = max(results, key=lambda r: r[0])
    verdict = HOLDS if all(r[3] for r in results) else FAILS
    return ClaimResult(f"share of stalled runs (tail regret above the stall threshold), exact binomial "
                       f"95% interval; largest over the policies; holds when every observed share is "
                       f"≤ {spec.threshold:g}",
                       worst[0], worst[1], worst[2], verdict, min(r[4] for r in results), "; ".join(parts))


CHECKS = {"grows": check_grows, "converges": check_converges, "ordered": check_ordered,
          "best": check_best, "drops": check_drops, "stall_rate": check_stall_rate}


def evaluate_claims(specs: Sequence[ClaimSpec], runs_tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The claims table: one row per claim, in the order given."""
    rows = []
    for spec in specs:
        if spec.experiment not in runs_tables:
            raise ValueError(f"claim {spec.name!r}: no run table for experiment {spec.experiment!r}")
        result = CHECKS[spec.kind](runs_tables[spec.experiment], spec)
        rows.append({"claim": spec.name, "figure": spec.figure, "experiment": spec.experiment,
                     "statement": spec.statement, "statistic": result.statistic, "value": result.value,
                     "ci_low": result.ci_low, "ci_high": result.ci_high, "verdict": result.verdict,
                     "n_seeds": result.n_seeds, "detail": result.detail})
    return pd.DataFrame(rows, columns=list(CLAIM_COLUMNS))


def claims_markdown(table: pd.DataFrame, header: str = "") -> str:
    """The claims table as Markdown: claim, figure, value [interval], verdict, n."""
    lines = [header] if header else []
    lines += ["| claim | figure | statistic | value [95% interval] | verdict | n seeds |",
              "| --- | --- | --- | --- | --- | ---: |"]
    for row in table.itertuples():
        interval = (f"{row.value:.3g} [{row.ci_low:.3g}, {row.ci_high:.3g}]"
                    if math.isfinite(row.ci_low) else f"{row.value:.3g}")
        lines.append(f"| {row.statement} | {row.figure} | {row.statistic} | {interval} | "
                     f"**{row.verdict}** | {row.n_seeds} |")
    lines += ["", "Every comparison behind each verdict:", ""]
    lines += [f"- `{row.claim}`: {row.detail}" for row in table.itertuples()]
    return "\n".join(lines) + "\n"
