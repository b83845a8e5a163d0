"""Empirical queue-length regret rates: R_T against T on log–log axes.

Estimand (docs/figures.md, Figure 5). Each run at horizon T is summarised by
:func:`cqb.analysis.summaries.run_summary`; its **tail regret**, the mean of
Q(t) − Q*(t) over the last 10 % of rounds, estimates R at ≈ T with far less
noise than the final round's Q(T) − Q*(T) (an integer that is 0 or ±1 at most
seeds once a policy has converged). The final-round regret is kept as a
secondary column.

Robust estimator. A stalled run (tail regret above the stall threshold of
:class:`cqb.analysis.summaries.SummarySettings`) keeps tens to hundreds of jobs and
alone decides a mean of 30. Per (policy, T) we therefore report the number of
stalled runs with an exact interval (a finding, never dropped silently) and,
as the point on the figure, the **mean tail regret over the runs that did not
stall**, with a 95 % seed-bootstrap interval; the plain mean and the median
over all runs stand beside it.

Slope. Least squares of log(estimate) on log T over the horizons whose
estimate is positive, with a 95 % seed-bootstrap interval (seeds resampled
within each T, the estimator recomputed) and the delta-method half-width that
the power analysis (:func:`cqb.analysis.slope_precision.seeds_for_slope_width`)
predicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from ..presentation import theorem_rate
from .aggregate import read_run_file
from .summaries import SummarySettings, binomial_interval, final_phase_start, run_summary

Z95 = 1.959963984540054

def reference_curve(policy: str, horizons: np.ndarray) -> np.ndarray | None:
    """Shape of the policy's theorem rate at ``horizons`` (1 at the first), or
    None (the rate is part of the policy's spec, cqb.sim.policies)."""
    rate = theorem_rate(policy)
    return None if rate is None else rate.curve(horizons)


def reference_label(policy: str, missing: str = "-") -> str:
    """The policy's theorem rate in words, or ``missing``."""
    rate = theorem_rate(policy)
    return missing if rate is None else rate.label


def reference_slope(policy: str, horizons) -> float:
    """The slope the policy's theorem rate has over ``horizons`` (least squares on log–log)."""
    curve = reference_curve(policy, horizons)
    if curve is None:
        return math.nan
    if len(curve) < 2:  # one horizon: the local slope
        return float(theorem_rate(policy).local_slope(float(np.asarray(horizons)[0])))
    return float(np.polyfit(np.log(np.asarray(horizons, float)), np.log(curve), 1)[0])


# ---------------------------------------------------------------- per-run values


def read_rate_runs(runs: Iterable, files: Iterable) -> Iterable[tuple]:
    """What :func:`rate_run_rows` takes, from the run files: ``runs`` yields
    (experiment, policy label, T, seed), ``files`` the run file of each."""
    for (experiment, label, horizon, seed), path in zip(runs, files, strict=True):
        run = read_run_file(path)
        yield (experiment, label, horizon, seed, run["queue"], run["oracle_queue"],
               final_phase_start(run["metadata"]))


def rate_run_rows(runs: Iterable, settings: SummarySettings = SummarySettings()) -> list[dict]:
    """One row per run from :func:`cqb.analysis.summaries.run_summary`.

    ``runs`` yields (experiment, policy label, T, seed, queue, oracle queue,
    start of the policy's final phase or None)."""
    rows = []
    for experiment, policy, horizon, seed, queue, oracle, final_phase in runs:
        summary = run_summary(queue, oracle, settings, final_phase)
        if summary["horizon"] != int(horizon):
            raise ValueError(f"{experiment}/{policy}/T{horizon}/seed{seed}: {summary['horizon']} rounds, "
                             f"expected T = {horizon}")
        rows.append({"experiment": experiment, "policy": policy, "seed": int(seed), **summary})
    return rows


# ---------------------------------------------------------------- robust estimator


def converged_mean(values: np.ndarray, stalled: np.ndarray) -> float:
    """Mean of ``values`` over the runs that did not stall (NaN if all stalled)."""
    values, stalled = np.asarray(values, float), np.asarray(stalled, bool)
    kept = values[~stalled]
    return float(kept.mean()) if kept.size else math.nan


def bootstrap_converged_means(values, stalled, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` seed-bootstrap replicates of :func:`converged_mean` (NaN where all stalled)."""
    values, stalled = np.asarray(values, float), np.asarray(stalled, bool)
    index = rng.integers(values.shape[0], size=(draws, values.shape[0]))
    keep = ~stalled[index]
    counts = keep.sum(axis=1)
    sums = np.where(keep, values[index], 0.0).sum(axis=1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)  # max(·, 1): no 0/0 computed


def horizon_row(values, stalled, final_regrets, bootstrap: int, rng: np.random.Generator,
                confidence: float = 0.95) -> dict:
    """Per (policy, T): the estimate with its interval, the stall count, and
    the plain mean, median and final-round regret beside them."""
    values, stalled = np.asarray(values, float), np.asarray(stalled, bool)
    final = np.asarray(final_regrets, float)
    n, n_stalled = values.shape[0], int(stalled.sum())
    kept = values[~stalled]
    estimate = converged_mean(values, stalled)
    replicates = bootstrap_converged_means(values, stalled, bootstrap, rng)
    replicates = replicates[np.isfinite(replicates)]
    alpha = 100 * (1 - confidence) / 2
    low, high = (np.percentile(replicates, [alpha, 100 - alpha]) if replicates.size else (math.nan, math.nan))
    sd = float(kept.std(ddof=1)) if kept.size > 1 else math.nan
    stall_low, stall_high = binomial_interval(n_stalled, n, confidence)
    final_kept = final[~stalled]
    final_sd = float(final_kept.std(ddof=1)) if final_kept.size > 1 else math.nan
    return {"n_runs": n, "n_stalled": n_stalled, "stall_ci_low": stall_low, "stall_ci_high": stall_high,
            "estimate": estimate, "ci_low": float(low), "ci_high": float(high), "sd_converged": sd,
            # delta method: sd of log(estimate) = relative standard error
            "log_se": sd / (estimate * math.sqrt(kept.size)) if kept.size > 1 and estimate > 0 else math.nan,
            "tail_mean_all": float(values.mean()), "tail_median_all": float(np.median(values)),
            "final_mean_converged": float(final_kept.mean()) if final_kept.size else math.nan,
            "final_se_converged": final_sd / math.sqrt(final_kept.size) if final_kept.size > 1 else math.nan}


# ---------------------------------------------------------------- slope


def slope_weights(horizons) -> np.ndarray:
    """w_h with OLS slope = Σ w_h log y_h on x_h = log T_h."""
    x = np.log(np.asarray(horizons, float))
    centred = x - x.mean()
    return centred / (centred ** 2).sum()


def fit_slope(by_horizon: Mapping[int, tuple], bootstrap: int = 2000, seed: int = 0,
              confidence: float = 0.95) -> dict:
    """Slope of log(converged mean tail regret) on log T with a seed-bootstrap
    interval and the delta-method half-width.

    ``by_horizon``: T → (per-run values, per-run stalled flags). Horizons whose
    estimate is not positive (or all stalled) cannot enter a log fit: they are
    listed in ``horizons_dropped``. Bootstrap draws in which a used horizon's
    estimate is not positive are discarded (``bootstrap_kept`` says how many)."""
    horizons = sorted(by_horizon)
    estimates = {h: converged_mean(*by_horizon[h]) for h in horizons}
    used = [h for h in horizons if estimates[h] > 0]  # NaN > 0 is False
    result = {"horizons_used": used, "horizons_dropped": [h for h in horizons if h not in used]}
    nan = {"slope": math.nan, "ci_low": math.nan, "ci_high": math.nan, "delta_half_width": math.nan,
           "bootstrap_kept": 0}
    if len(used) < 2:
        return {**result, **nan}
    weights = slope_weights(used)
    slope = float(weights @ np.log([estimates[h] for h in used]))
    rng = np.random.default_rng(seed)
    replicates = np.column_stack([bootstrap_converged_means(*by_horizon[h], bootstrap, rng) for h in used])
    good = (replicates > 0).all(axis=1)
    draws = np.log(replicates[good]) @ weights
    alpha = 100 * (1 - confidence) / 2
    low, high = (np.percentile(draws, [alpha, 100 - alpha]) if good.sum() >= bootstrap // 2
                 else (math.nan, math.nan))
    log_var = []
    for h in used:
        values, stalled = (np.asarray(a) for a in by_horizon[h])
        kept = np.asarray(values, float)[~np.asarray(stalled, bool)]
        log_var.append(kept.var(ddof=1) / (kept.size * estimates[h] ** 2) if kept.size > 1 else math.nan)
    half = Z95 * math.sqrt(float(weights ** 2 @ np.array(log_var)))
    return {**result, "slope": slope, "ci_low": float(low), "ci_high": float(high),
            "delta_half_width": half, "bootstrap_kept": int(good.sum())}


# ---------------------------------------------------------------- tables


def second_stage_count(runs) -> int:
    """How many of ``runs`` (rows of the per-run table) are a second stage's
    (column ``stage`` = 2; a table without it has none)."""
    return int((runs["stage"] == 2).sum()) if "stage" in runs else 0


def rate_tables(runs, bootstrap: int = 2000, seed: int = 0, confidence: float = 0.95):
    """(per (experiment, policy, T) summary, per (experiment, policy) slope) tables
    from the per-run table of :func:`rate_run_rows` (with its ``stalled`` flag and,
    where a second stage ran, its ``stage``, 1 or 2). Every run of both stages
    enters the estimates, the intervals and the slope (Stein's design); the
    ``n_runs_stage2`` columns say how many are the second stage's."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    summary, slopes = [], []
    for experiment in dict.fromkeys(runs["experiment"]):
        for policy in dict.fromkeys(runs.loc[runs["experiment"] == experiment, "policy"]):
            own = runs[(runs["experiment"] == experiment) & (runs["policy"] == policy)]
            by_horizon = {}
            for horizon, group in own.groupby("horizon"):
                values = group["tail_regret"].to_numpy(float)
                stalled = group["stalled"].to_numpy(bool)
                by_horizon[int(horizon)] = (values, stalled)
                summary.append({"experiment": experiment, "policy": policy, "horizon": int(horizon),
                                **horizon_row(values, stalled, group["final_regret"], bootstrap, rng,
                                              confidence),
                                "n_runs_stage2": second_stage_count(group),
                                "final_queue_mean": float(group["final_queue"].mean()),
                                "final_oracle_mean": float(group["final_oracle"].mean()),
                                "final_regret_mean": float(group["final_regret"].mean())})
            fit = fit_slope(by_horizon, bootstrap=bootstrap, seed=seed, confidence=confidence)
            horizons = sorted(by_horizon)
            used = fit["horizons_used"] or horizons
            slopes.append({"experiment": experiment, "policy": policy, "slope": fit["slope"],
                           "ci_low": fit["ci_low"], "ci_high": fit["ci_high"],
                           "half_width": (fit["ci_high"] - fit["ci_low"]) / 2,
                           "delta_half_width": fit["delta_half_width"],
                           "reference": reference_label(policy),
                           "reference_slope": reference_slope(policy, used),
                           "n_horizons": len(fit["horizons_used"]), "bootstrap_kept": fit["bootstrap_kept"],
                           "n_runs": int(len(own)), "n_runs_stage2": second_stage_count(own),
                           "n_stalled": int(own["stalled"].sum()),
                           "horizons_used": " ".join(map(str, fit["horizons_used"])) or "-",
                           "horizons_dropped": " ".join(map(str, fit["horizons_dropped"])) or "-"})
    slopes = pd.DataFrame(slopes)
    slopes["verdict"] = [slope_verdict(row) for _, row in slopes.iterrows()]
    return pd.DataFrame(summary), slopes


RESOLVED_HALF_WIDTH = 0.15  # the brief's resolution target for a slope


def slope_verdict(row) -> str:
    """What the fitted slope says about the theorem's rate (an upper bound)."""
    if not math.isfinite(row["slope"]):
        return "no slope (fewer than two positive estimates)"
    if not math.isfinite(row["ci_low"]):
        # near zero, resampling the seeds often makes some horizon's estimate non-positive
        return ("no interval (fewer than half the bootstrap draws have a positive estimate at "
                "every horizon): not resolved")
    resolved = "resolved" if row["half_width"] <= RESOLVED_HALF_WIDTH else "not resolved"
    reference = row["reference_slope"]
    if not math.isfinite(reference):
        return resolved
    if row["ci_high"] < reference:
        relation = "faster than the bound's rate"
    elif row["ci_low"] > reference:
        relation = "slower than the bound's rate"
    else:
        relation = "consistent with the bound's rate"
    return f"{resolved}; {relation}"


def rates_figure_table(summary, slopes):
    """Figure 5's data table: the per-(experiment, policy, T) summary with the
    fitted slope and interval beside it and whether that T entered the fit."""
    fit = slopes.rename(columns={"ci_low": "slope_ci_low", "ci_high": "slope_ci_high"})
    table = summary.merge(fit[["experiment", "policy", "slope", "slope_ci_low", "slope_ci_high",
                               "horizons_used"]], on=["experiment", "policy"], how="left", sort=False)
    table["in_fit"] = [str(h) in str(used).split() for h, used in zip(table["horizon"], table["horizons_used"])]
    return table.drop(columns="horizons_used")


# ---------------------------------------------------------------- the experiments Figure 5 draws


def rate_runs(plan, experiments: list[str], run_file: str) -> list[tuple[str, str, int, int, str, int]]:
    """(experiment, label, T, seed, run file, stage) of every run Figure 5 reads, in
    config order; stage 2 for the seeds of an experiment's ``second_stage``, else 1."""
    return [(name, curve.label, curve.horizon, seed, path, 2 if seed in set(curve.second_stage_seeds) else 1)
            for name in experiments for curve in plan.curves[name]
            for seed, path in zip(curve.seeds, plan.run_files(curve, run_file))]
