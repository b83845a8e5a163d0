"""Empirical queue-length regret rates: R_T = E[Q(T) − Q*(T)] against T.

Each run at horizon T gives one coupled estimate Q(T) − Q*(T) (policy and
oracle on the same random streams). Per (policy, T) we report the mean over
seeds with a 95% t-interval, and per policy the least-squares slope of
log R_T on log T with a seed-bootstrap interval. Horizons whose mean regret is
not positive cannot enter a log–log fit; they are reported, and left out of
the fit, with a flag.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

REFERENCE_RATES = {"T^(-1/4)": -0.25, "T^(-1/2)": -0.5}


def regret_summary(final_regrets: dict[int, np.ndarray]) -> list[dict]:
    """Per horizon: mean, sd, 95% interval of the final regret over seeds."""
    rows = []
    for horizon in sorted(final_regrets):
        values = np.asarray(final_regrets[horizon], dtype=np.float64)
        n = values.shape[0]
        mean = float(values.mean())
        sd = float(values.std(ddof=1)) if n > 1 else math.nan
        half = float(stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)) if n > 1 else math.nan
        rows.append({"horizon": horizon, "n_seeds": n, "mean": mean, "sd": sd,
                     "ci_low": mean - half, "ci_high": mean + half})
    return rows


def log_log_slope(horizons, means) -> float:
    horizons, means = np.asarray(horizons, float), np.asarray(means, float)
    return float(np.polyfit(np.log(horizons), np.log(means), 1)[0])


def fit_rate(final_regrets: dict[int, np.ndarray], bootstrap: int = 2000, seed: int = 0) -> dict:
    """Slope of log mean regret on log T, with a 95% seed-bootstrap interval."""
    horizons = sorted(final_regrets)
    means = np.array([np.mean(final_regrets[h]) for h in horizons])
    usable = [h for h, m in zip(horizons, means) if m > 0]
    result = {"horizons_used": usable, "horizons_dropped": [h for h in horizons if h not in usable]}
    if len(usable) < 2:
        return {**result, "slope": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    slope = log_log_slope(usable, [np.mean(final_regrets[h]) for h in usable])
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(bootstrap):
        resampled = []
        for h in usable:
            values = np.asarray(final_regrets[h], float)
            resampled.append(values[rng.integers(values.shape[0], size=values.shape[0])].mean())
        if min(resampled) > 0:
            draws.append(log_log_slope(usable, resampled))
    low, high = (np.percentile(draws, [2.5, 97.5]) if len(draws) >= bootstrap // 2 else (math.nan, math.nan))
    return {**result, "slope": slope, "ci_low": float(low), "ci_high": float(high),
            "bootstrap_kept": len(draws)}
