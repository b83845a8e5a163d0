"""Per-run summaries and failure rates.

A mean over seeds hides the runs that never converge: one stalled seed moves
a mean of ten by tens of jobs. So every run is summarised by a handful of
numbers (its final and tail regret, its early regret, where its queue peaked)
and flagged as *stalled* when it has not come down to the optimal policy's
level by the end of the horizon. Per curve, the number of stalled runs is
reported with an exact (Clopper–Pearson) binomial interval, beside the mean
and the median.

Definition used throughout (docs/verdicts.md): a run is **stalled** when the
mean of Q(t) − Q*(t) over its last ``tail_fraction`` of rounds exceeds
``stall_threshold`` jobs. A converged run has a tail regret within a job or
two of zero; a stalled one keeps tens to hundreds of jobs more than the
oracle, so the threshold separates the two by an order of magnitude on each
side. A policy still in a pure-exploration phase at T (CQB-ε when τ > T) and a
context-blind policy levelling off above the optimal level are both "not
converged at T" by this definition, which is what the flag is meant to say.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .aggregate import load_curve_runs
from .curves import Curve


@dataclass(frozen=True)
class SummarySettings:
    tail_fraction: float = 0.1  # the tail regret averages Q − Q* over the last 10 % of rounds
    stall_threshold: float = 5.0  # jobs: tail regret above this → the run is stalled
    early_rounds: int = 1000  # "converges slower" compares mean regret over t ≤ this
    confidence: float = 0.95  # level of the binomial intervals
    # "reaches the optimal level": the first round after which the trailing
    # mean of Q − Q* over settle_window rounds stays below settle_level jobs
    # (the converge threshold; 100 rounds average out the ±1 jitter of single
    # rounds and are 2 % of T = 5000)
    settle_level: float = 1.0
    settle_window: int = 100

    def __post_init__(self):
        if not 0 < self.tail_fraction <= 1:
            raise ValueError(f"tail_fraction must lie in (0, 1], got {self.tail_fraction!r}")
        if not (self.stall_threshold >= 0 and math.isfinite(self.stall_threshold)):
            raise ValueError(f"stall_threshold must be a number ≥ 0, got {self.stall_threshold!r}")
        if isinstance(self.early_rounds, bool) or not isinstance(self.early_rounds, int) or self.early_rounds < 1:
            raise ValueError(f"early_rounds must be an integer ≥ 1, got {self.early_rounds!r}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must lie in (0, 1), got {self.confidence!r}")
        if not (self.settle_level > 0 and math.isfinite(self.settle_level)):
            raise ValueError(f"settle_level must be a number > 0, got {self.settle_level!r}")
        if isinstance(self.settle_window, bool) or not isinstance(self.settle_window, int) or self.settle_window < 1:
            raise ValueError(f"settle_window must be an integer ≥ 1, got {self.settle_window!r}")


# What a run file records of its instance (synthetic: how often θ* was redrawn
# to meet the slack, its largest norm, the share of contexts that pass).
INSTANCE_COLUMNS = ("theta_redraws", "theta_max_norm", "accept_rate", "measured_slack")
# The simulation code hash of the run file: results that mix code are refused.
RUN_COLUMNS = ("policy", "sweep_param", "sweep_value", "seed", "horizon", "final_queue",
               "final_oracle", "final_regret", "tail_regret", "mean_regret", "early_regret",
               "peak_round", "peak_queue", "late_slope", "full_slope", "time_to_optimal", "censored",
               "explore_rounds", "stalled", "projection_unconverged") + INSTANCE_COLUMNS + ("code_hash",)


def tail_length(horizon: int, tail_fraction: float, final_phase_start: int | None = None) -> int:
    """Rounds of the tail window: the last ``tail_fraction`` of the run, but
    never reaching back before a policy's final phase. A policy that changes
    its behaviour at a cutoff t_c (CQB-η-2: pure UCB after t_c) is judged at
    T on rounds t_c < t ≤ T only, else its tail mixes in the earlier phase."""
    length = max(1, int(math.ceil(tail_fraction * horizon)))
    if final_phase_start is not None and 0 <= final_phase_start < horizon:
        length = min(length, horizon - int(final_phase_start))
    return length


def time_to_optimal(regret: np.ndarray, level: float, window: int) -> tuple[int, bool]:
    """(round, censored): the first round t after which the trailing mean of
    Q − Q* over ``window`` rounds (fewer at the start) stays below ``level``
    through T; (T + 1, True) when the last round's trailing mean is not
    below it (right-censored at T: a censored run is slower than any other)."""
    regret = np.asarray(regret, dtype=np.float64)
    horizon = regret.shape[0]
    cumulative = np.concatenate(([0.0], np.cumsum(regret)))
    t = np.arange(1, horizon + 1)
    start = np.maximum(t - window, 0)
    trailing = (cumulative[t] - cumulative[start]) / (t - start)
    above = np.flatnonzero(~(trailing < level))
    if above.size and above[-1] == horizon - 1:
        return horizon + 1, True
    return (int(above[-1]) + 2 if above.size else 1), False


def explore_rounds(metadata: dict) -> float:
    """The policy's pure-exploration length τ from its resolved parameters (NaN without one)."""
    tau = (metadata.get("policy_params") or {}).get("tau")
    return math.nan if tau is None else float(tau)


def late_slope(queue: np.ndarray) -> float:
    """Least-squares slope of Q(t) over the second half of the run (jobs per round)."""
    return full_slope(queue[queue.shape[0] // 2:])


def full_slope(queue: np.ndarray) -> float:
    """Least-squares slope of Q(t) over the rounds given (jobs per round)."""
    half = np.asarray(queue).astype(np.float64)
    if half.shape[0] < 2:
        return math.nan
    t = np.arange(half.shape[0], dtype=np.float64)
    t -= t.mean()
    return float((t * (half - half.mean())).sum() / (t * t).sum())


def run_summary(queue: np.ndarray, oracle: np.ndarray, settings: SummarySettings,
                final_phase_start: int | None = None) -> dict:
    """The summary numbers of one run from its Q(t) and Q*(t), t = 1..T
    (``final_phase_start``: see :func:`tail_length`)."""
    queue = np.asarray(queue, dtype=np.int64)
    oracle = np.asarray(oracle, dtype=np.int64)
    if queue.shape != oracle.shape or queue.ndim != 1 or queue.shape[0] == 0:
        raise ValueError(f"queue and oracle must be equal-length 1-d arrays, got {queue.shape} and {oracle.shape}")
    horizon = queue.shape[0]
    regret = (queue - oracle).astype(np.float64)
    tail = float(regret[-tail_length(horizon, settings.tail_fraction, final_phase_start):].mean())
    settled, censored = time_to_optimal(regret, settings.settle_level, settings.settle_window)
    return {
        "horizon": horizon,
        "final_queue": int(queue[-1]),
        "final_oracle": int(oracle[-1]),
        "final_regret": int(queue[-1] - oracle[-1]),
        "tail_regret": tail,
        "mean_regret": float(regret.mean()),
        "early_regret": float(regret[:settings.early_rounds].mean()),
        "peak_round": int(queue.argmax()) + 1,
        "peak_queue": int(queue.max()),
        "late_slope": late_slope(queue),
        "full_slope": full_slope(queue),
        "time_to_optimal": settled,
        "censored": censored,
        "stalled": bool(tail > settings.stall_threshold),
    }


def summarise_curves(curves: Sequence[Curve], settings: SummarySettings = SummarySettings()) -> pd.DataFrame:
    """One row per run of every curve, in curve order then seed order."""
    rows = []
    for curve in curves:
        queues, oracles, metadata = load_curve_runs(curve.files)
        for index, (queue, oracle, meta) in enumerate(zip(queues, oracles, metadata)):
            seed = meta.get("seed")
            if seed is None:
                seed = curve.seeds[index] if curve.seeds else index
            instance = meta.get("instance") or {}
            rows.append({"policy": curve.label, "sweep_param": curve.sweep_param,
                         "sweep_value": curve.sweep_text, "seed": int(seed),
                         **run_summary(queue, oracle, settings, final_phase_start(meta)),
                         "explore_rounds": explore_rounds(meta),
                         # projections whose solve ended uncertified (0 for a policy without them)
                         "projection_unconverged": int(meta.get("projection_unconverged") or 0),
                         **{key: _number(instance.get(key)) for key in INSTANCE_COLUMNS},
                         "code_hash": meta.get("code_hash", "")})
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


def final_phase_start(metadata: dict) -> int | None:
    """The round after which a run's policy is in its final phase (its
    resolved ``cutoff``), if it has one."""
    cutoff = (metadata.get("policy_params") or {}).get("cutoff")
    return None if cutoff is None else int(cutoff)


def _number(value):
    return math.nan if value is None else float(value)


def instance_statistics(runs: pd.DataFrame) -> pd.DataFrame:
    """Per sweep value, what the instances of the seeds look like: θ* redraws
    (mean, max), the range of max ‖θ*_k‖ and of the context acceptance rate.
    An instance sweep (slack, K, d) redraws θ* per value, so a curve compares
    instance populations as well as the swept quantity; this table says how
    much they differ. One instance per seed: the first policy's rows."""
    first = runs[runs["policy"] == runs["policy"].iloc[0]]
    rows = []
    for value, group in first.groupby("sweep_value", sort=False):
        rows.append({"sweep_param": group["sweep_param"].iloc[0], "sweep_value": value,
                     "n_instances": len(group),
                     "theta_redraws_mean": float(group["theta_redraws"].mean()),
                     "theta_redraws_max": float(group["theta_redraws"].max()),
                     "theta_max_norm_min": float(group["theta_max_norm"].min()),
                     "theta_max_norm_max": float(group["theta_max_norm"].max()),
                     "accept_rate_min": float(group["accept_rate"].min()),
                     "accept_rate_max": float(group["accept_rate"].max()),
                     "measured_slack_min": float(group["measured_slack"].min())})
    return pd.DataFrame(rows)


def binomial_bounds(successes, trials, confidence: float = 0.95):
    """Exact (Clopper–Pearson) bounds for binomial proportions, element-wise
    over arrays (NaN where there are no trials): the one implementation, used
    per claim by :func:`binomial_interval` and for many replications at once
    by the calibration study."""
    # betaincinv(a, b, q) is the Beta(a, b) quantile: the values of
    # scipy.stats.beta.ppf (one Boost routine under both; the test compares
    # them bit for bit), without scipy.stats's import, which costs an
    # aggregate job about half its CPU
    from scipy.special import betaincinv

    tail = (1 - confidence) / 2
    successes = np.asarray(successes, dtype=np.float64)
    trials = np.asarray(trials, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(successes > 0, betaincinv(successes, trials - successes + 1, tail), 0.0)
        high = np.where(successes < trials, betaincinv(successes + 1, trials - successes, 1 - tail), 1.0)
    empty = trials <= 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def binomial_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) interval for a binomial proportion."""
    if trials <= 0:
        return math.nan, math.nan
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must lie in [0, {trials}], got {successes}")
    low, high = binomial_bounds(successes, trials, confidence)
    return float(low), float(high)


CURVE_COLUMNS = ("policy", "sweep_param", "sweep_value", "n_runs", "n_stalled", "stall_rate",
                 "stall_ci_low", "stall_ci_high", "stalled_seeds", "final_regret_mean",
                 "final_regret_median", "tail_regret_mean", "tail_regret_median",
                 "tail_regret_mean_converged", "n_unconverged_runs", "unconverged_seeds")


def curve_summaries(runs: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per curve: stall count with its exact interval, the stalled seeds, and
    mean and median regrets (the mean over converged runs only is given
    beside the plain mean, never instead of it); the runs with a projection
    that ended uncertified, and their seeds."""
    rows = []
    for (policy, sweep_value), group in runs.groupby(["policy", "sweep_value"], sort=False):
        n = len(group)
        stalled = group["stalled"].astype(bool)
        low, high = binomial_interval(int(stalled.sum()), n, confidence)
        converged = group.loc[~stalled, "tail_regret"]
        unconverged = (group["projection_unconverged"] > 0 if "projection_unconverged" in group
                       else pd.Series(False, index=group.index))
        rows.append({
            "policy": policy, "sweep_param": group["sweep_param"].iloc[0], "sweep_value": sweep_value,
            "n_runs": n, "n_stalled": int(stalled.sum()), "stall_rate": float(stalled.mean()),
            "stall_ci_low": low, "stall_ci_high": high,
            "stalled_seeds": " ".join(str(s) for s in group.loc[stalled, "seed"]) or "-",
            "final_regret_mean": float(group["final_regret"].mean()),
            "final_regret_median": float(group["final_regret"].median()),
            "tail_regret_mean": float(group["tail_regret"].mean()),
            "tail_regret_median": float(group["tail_regret"].median()),
            "tail_regret_mean_converged": float(converged.mean()) if len(converged) else math.nan,
            "n_unconverged_runs": int(unconverged.sum()),
            "unconverged_seeds": " ".join(str(s) for s in group.loc[unconverged, "seed"]) or "-",
        })
    return pd.DataFrame(rows, columns=list(CURVE_COLUMNS))


def read_runs_table(path) -> pd.DataFrame:
    table = pd.read_csv(path, sep="\t", dtype={"policy": str, "sweep_param": str, "sweep_value": str,
                                               "code_hash": str},
                        keep_default_na=False, na_values={c: ["nan"] for c in ("late_slope", "full_slope", "explore_rounds")
                                                    + INSTANCE_COLUMNS})
    for flag in ("stalled", "censored"):
        if flag in table:
            table[flag] = table[flag].astype(str).str.lower().isin(("true", "1"))
    return table


def read_curves_table(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", dtype={"policy": str, "sweep_param": str, "sweep_value": str,
                                              "stalled_seeds": str, "unconverged_seeds": str}, keep_default_na=False,
                       na_values={"tail_regret_mean_converged": ["nan"]})
