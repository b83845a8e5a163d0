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
        return {**result, "slope": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                "bootstrap_kept": 0}
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


def final_regret_rows(runs) -> list[dict]:
    """One row per run: (policy label, horizon, seed, Q(T), Q*(T), Q(T) − Q*(T)).

    ``runs`` yields (label, horizon, seed, run dict from :func:`cqb.io.load_run`)."""
    rows = []
    for label, horizon, seed, run in runs:
        queue, oracle = int(run["queue"][-1]), int(run["oracle_queue"][-1])
        rows.append({"policy": label, "horizon": int(horizon), "seed": int(seed),
                     "final_queue": queue, "final_oracle": oracle, "final_regret": queue - oracle})
    return rows


def rate_tables(final_rows: list[dict], bootstrap: int = 2000):
    """(per-horizon summary, per-policy slope) tables from :func:`final_regret_rows`."""
    import pandas as pd

    final = pd.DataFrame(final_rows)
    summary, slopes = [], []
    for policy in dict.fromkeys(final["policy"]):
        own = final[final["policy"] == policy]
        by_horizon = {int(h): group["final_regret"].to_numpy() for h, group in own.groupby("horizon")}
        for row in regret_summary(by_horizon):
            row["mean_queue"] = float(own[own["horizon"] == row["horizon"]]["final_queue"].mean())
            row["mean_oracle"] = float(own[own["horizon"] == row["horizon"]]["final_oracle"].mean())
            summary.append({"policy": policy, **row})
        fit = fit_rate(by_horizon, bootstrap=bootstrap)
        slopes.append({"policy": policy, "slope": fit["slope"], "ci_low": fit["ci_low"],
                       "ci_high": fit["ci_high"], "n_horizons": len(fit["horizons_used"]),
                       "bootstrap_kept": fit.get("bootstrap_kept", 0),
                       "horizons_used": " ".join(map(str, fit["horizons_used"])),
                       "horizons_dropped": " ".join(map(str, fit["horizons_dropped"]))})
    return pd.DataFrame(summary), pd.DataFrame(slopes)


def rates_figure_table(summary, slopes):
    """Figure 5's data table: the per-(policy, T) summary with the policy's
    fitted slope and interval (``slope``, ``slope_ci_low``, ``slope_ci_high``)
    and whether that T entered the fit (``in_fit``)."""
    fit = slopes.rename(columns={"ci_low": "slope_ci_low", "ci_high": "slope_ci_high"})
    table = summary.merge(fit[["policy", "slope", "slope_ci_low", "slope_ci_high", "horizons_used"]],
                          on="policy", how="left", sort=False)
    table["in_fit"] = [str(h) in str(used).split() for h, used in zip(table["horizon"], table["horizons_used"])]
    return table.drop(columns="horizons_used")


def plot_rates(summary, slopes, display_names: dict, colours: dict | None = None,
               title: str = "Empirical regret rates (mean over seeds, 95% t-intervals)"):
    """Log–log plot of the mean final regret against T with 95% intervals,
    fitted slopes in the legend, and reference shapes T^(−1/4), T^(−1/2), log²T
    (anchored at the geometric mean of the positive means). Horizons whose mean
    is not positive cannot be drawn on a log axis: the legend lists them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    figure, axis = plt.subplots(figsize=(10.0, 4.8), constrained_layout=True)
    horizons = np.array(sorted(summary["horizon"].unique()), dtype=float)
    positive = summary[summary["mean"] > 0]["mean"]
    anchor = float(np.exp(np.log(positive).mean())) if len(positive) else 1.0
    middle = float(np.exp(np.log(horizons).mean()))
    policies = list(dict.fromkeys(summary["policy"]))
    offsets = np.linspace(-0.03, 0.03, len(policies)) if len(policies) > 1 else [0.0]
    for policy, offset in zip(policies, offsets):
        rows = summary[summary["policy"] == policy].sort_values("horizon")
        fit = slopes[slopes["policy"] == policy].iloc[0]
        label = display_names.get(policy, policy)
        if math.isfinite(fit["slope"]):
            label += f": slope {fit['slope']:.2f} [{fit['ci_low']:.2f}, {fit['ci_high']:.2f}]"
        else:
            label += ": no slope (fewer than 2 positive means)"
        shown = (rows["mean"] > 0).to_numpy()
        hidden = rows["horizon"].to_numpy()[~shown]
        if hidden.size:
            label += f"; mean ≤ 0 at T = {', '.join(str(int(h)) for h in hidden)}"
        mean = rows["mean"].to_numpy()[shown]
        # an interval reaching below zero is drawn down to the axis' bottom
        low = np.where(rows["ci_low"].to_numpy()[shown] > 0, mean - rows["ci_low"].to_numpy()[shown],
                       mean * (1 - 1e-9))
        high = rows["ci_high"].to_numpy()[shown] - mean
        x = rows["horizon"].to_numpy(dtype=float)[shown] * np.exp(offset)  # dodge overlapping bars
        axis.errorbar(x, mean, yerr=[low, high], marker="o", markersize=4, capsize=3, linewidth=1.2,
                      label=label, color=(colours or {}).get(policy))
    references = {"T^(−1/4)": middle ** 0.25 * horizons ** -0.25,
                  "T^(−1/2)": middle ** 0.5 * horizons ** -0.5,
                  "log²T": np.log(horizons) ** 2 / math.log(middle) ** 2}
    for (name, shape), style in zip(references.items(), (":", "--", "-.")):
        axis.plot(horizons, anchor * shape, style, color="black", linewidth=1, label=f"∝ {name} (reference)")
    axis.set_xscale("log")
    axis.set_yscale("log", nonpositive="clip")
    if len(positive):
        axis.set_ylim(bottom=float(positive.min()) / 10)
    axis.set_xticks(horizons, [str(int(h)) for h in horizons])
    axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axis.set_xlabel("horizon T")
    axis.set_ylabel("queue-length regret E[Q(T) − Q*(T)]")
    axis.set_title(title, fontsize=10)
    handles, labels = axis.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i].startswith("∝"))  # policies first
    # beside the axes, not over the points
    axis.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=7, framealpha=0.9,
                loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return figure
