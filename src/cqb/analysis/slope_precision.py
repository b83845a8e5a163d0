"""Figure 5's power analysis: how many seeds per horizon give a slope of a
chosen precision at least cost (:func:`seeds_for_slope_width`, from a
pilot's per-run variances by the delta method), what resolving an
unresolved slope would cost (:func:`resolution_costs`), and the table
``python -m cqb.analysis.slope_precision PILOT_RUNS_TSV [CONFIG_YAML]`` prints.
The estimator and the slope fit are :mod:`cqb.analysis.rates`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from .rates import RESOLVED_HALF_WIDTH, Z95, second_stage_count, slope_weights


# ---------------------------------------------------------------- power analysis


def relative_variance(values, stalled=None) -> float:
    """Per-run variance of the converged values over their squared mean: the
    variance of log(mean of n runs) is this over n (delta method)."""
    values = np.asarray(values, float)
    if stalled is not None:
        values = values[~np.asarray(stalled, bool)]
    mean = values.mean()
    if values.size < 2 or not mean > 0:
        raise ValueError(f"pilot needs ≥ 2 converged runs with a positive mean, got {values.size} "
                         f"with mean {mean!r}")
    return float(values.var(ddof=1) / mean ** 2)


def predicted_half_width(pilot: Mapping[int, np.ndarray], seeds: Mapping[int, int]) -> float:
    """95 % half-width of the OLS log–log slope with ``seeds[T]`` runs per T,
    from the pilot's per-run relative variances (delta method)."""
    horizons = sorted(pilot)
    weights = slope_weights(horizons)
    variance = sum(w * w * relative_variance(pilot[h]) / seeds[h] for w, h in zip(weights, horizons))
    return Z95 * math.sqrt(variance)


def seeds_for_slope_width(pilot: Mapping[int, np.ndarray], target_half_width: float,
                          cost: Callable[[int], float] | None = None, min_seeds: int = 5) -> dict[int, int]:
    """Seeds per horizon so that the slope's 95 % interval has half-width ≤ the target,
    at the least total cost (seconds per run ``cost(T)``; equal costs if None).

    With a_h = w_h² v_h (w_h the OLS weight of log T_h, v_h the pilot's relative
    variance), Var(slope) = Σ a_h / n_h; minimising Σ n_h c_h under
    Var ≤ (target/1.96)² gives n_h ∝ √(a_h / c_h) (Lagrange). Every horizon gets at
    least ``min_seeds`` (the middle horizons carry little weight in a slope but
    are needed to see curvature)."""
    if not target_half_width > 0:
        raise ValueError(f"target_half_width must be > 0, got {target_half_width!r}")
    horizons = sorted(pilot)
    if len(horizons) < 2:
        raise ValueError(f"a slope needs ≥ 2 horizons, got {horizons}")
    cost = cost or (lambda horizon: 1.0)
    weights = slope_weights(horizons)
    a = np.array([w * w * relative_variance(pilot[h]) for w, h in zip(weights, horizons)])
    c = np.array([float(cost(h)) for h in horizons])
    budget = (target_half_width / Z95) ** 2
    raw = np.sqrt(a / c) * np.sqrt(a * c).sum() / budget
    seeds = {h: max(min_seeds, int(math.ceil(n - 1e-9))) for h, n in zip(horizons, raw)}
    assert predicted_half_width(pilot, seeds) <= target_half_width + 1e-9
    return seeds



RESOLVE_COLUMNS = ("seeds_needed", "extra_runs", "cpu_seconds_needed", "affordable", "resolve_note")


def resolution_costs(runs, slopes, target_half_width: float = RESOLVED_HALF_WIDTH, seconds_per_run: float = 0.04,
                     seconds_per_thousand_rounds: float = 0.009, affordable_cpu_seconds: float = 1800.0):
    """``slopes`` with, per unresolved (experiment, policy), what resolving it
    would cost, from the runs' own per-run variances (Stein's second stage,
    :func:`seeds_for_slope_width`, never fewer seeds than were run; after a
    second stage, from the runs of both stages, and the note says so): the seeds
    per T, the runs to add, their CPU at ``seconds_per_run`` +
    ``seconds_per_thousand_rounds`` · T/1000 per run, and whether that is
    within ``affordable_cpu_seconds``. The delta-method target is the
    bootstrap target scaled by the fit's own ratio of the two half-widths.
    Where fewer than two horizons have a positive converged mean, no slope
    can be fitted at those horizons whatever the seeds: the note says so."""
    slopes = slopes.copy()
    for column in RESOLVE_COLUMNS:
        slopes[column] = "" if column in ("seeds_needed", "resolve_note") else math.nan
    slopes["affordable"] = ""

    def cost(horizon):
        return seconds_per_run + seconds_per_thousand_rounds * horizon / 1000

    for index, fit in slopes.iterrows():
        if str(fit["verdict"]).startswith("resolved"):
            continue
        own = runs[(runs["experiment"] == fit["experiment"]) & (runs["policy"] == fit["policy"])]
        pilot, run_seeds, nonpositive = {}, {}, []
        for horizon, group in own.groupby("horizon"):
            values = group.loc[~group["stalled"].astype(bool), "tail_regret"].to_numpy(float)
            run_seeds[int(horizon)] = len(group)
            if values.size >= 2 and values.mean() > 0 and values.var(ddof=1) > 0:
                pilot[int(horizon)] = values
            else:
                nonpositive.append(int(horizon))  # mean ≤ 0, no spread, or fewer than 2 converged runs
        reached = (f"half-width {fit['half_width']:.2f} reached" if math.isfinite(fit["half_width"])
                   else "no interval reached")
        stage2 = second_stage_count(own)
        if stage2:  # Stein's design has no third stage: what more would be needed, from all runs
            reached = f"after a second stage of {stage2} runs, {reached}"
        if len(pilot) < 2:
            slopes.at[index, "resolve_note"] = (
                f"{reached}; at T = {' '.join(map(str, nonpositive))} the converged runs' tail regret has no "
                "positive mean with a spread (≥ 2 runs): no slope can be fitted at these horizons")
            continue
        scale = (fit["delta_half_width"] / fit["half_width"]
                 if math.isfinite(fit["half_width"]) and fit["half_width"] > 0
                 and math.isfinite(fit["delta_half_width"]) else 1.0)
        horizons = sorted(pilot)
        seeds = seeds_for_slope_width(pilot, target_half_width * scale, cost=cost,
                                      min_seeds=min(run_seeds[h] for h in horizons))
        seeds = {h: max(n, run_seeds[h]) for h, n in seeds.items()}
        extra = sum(seeds[h] - run_seeds[h] for h in horizons)
        cpu = sum((seeds[h] - run_seeds[h]) * cost(h) for h in horizons)
        affordable = cpu <= affordable_cpu_seconds
        slopes.at[index, "seeds_needed"] = " ".join(f"{h}:{n}" for h, n in seeds.items())
        slopes.at[index, "extra_runs"] = extra
        slopes.at[index, "cpu_seconds_needed"] = cpu
        slopes.at[index, "affordable"] = "yes" if affordable else "no"
        dropped = (f"; T = {' '.join(map(str, nonpositive))} left out (no positive mean with a spread)"
                   if nonpositive else "")
        slopes.at[index, "resolve_note"] = (
            f"{reached}; ±{target_half_width:g} needs {extra} more runs (seeds per T "
            f"{', '.join(f'{h}: {n}' for h, n in seeds.items())}), ≈ {cpu:,.0f} s of CPU"
            + ("" if affordable else f", beyond the affordable {affordable_cpu_seconds:,.0f} s") + dropped)
    return slopes


# ---------------------------------------------------------------- the power analysis as a table


def run_cost(horizon: int, startup: float = 0.9, per_thousand_rounds: float = 0.075) -> float:
    """Seconds of one job (start-up and scheduling, then the rounds); the defaults
    were measured on the base instance (docs/figures.md)."""
    return startup + per_thousand_rounds * horizon / 1000


def power_table(runs, target_half_width: float = 0.15, min_seeds: int = 10,
                configured: Mapping[str, Mapping[int, int]] | None = None, cost=run_cost):
    """Per (experiment, policy), from a pilot's per-run table (columns experiment,
    policy, horizon, tail_regret, stalled): the seeds per T that reach the
    target half-width at least cost, their CPU time, and the half-width the
    ``configured`` seeds (experiment → T → seeds, and (experiment, policy) →
    T → seeds for a policy with a second stage, which wins; :func:`configured_seeds`)
    are predicted to give. Horizons whose pilot mean is not positive are left out (and listed)."""
    import pandas as pd

    rows = []
    for (experiment, policy), own in runs.groupby(["experiment", "policy"], sort=False):
        pilot, left_out = {}, []
        for horizon, group in own.groupby("horizon"):
            values = group.loc[~group["stalled"].astype(bool), "tail_regret"].to_numpy(float)
            if values.size > 2 and values.mean() > 0:
                pilot[int(horizon)] = values
            else:
                left_out.append(int(horizon))
        row = {"experiment": experiment, "policy": policy, "pilot_runs": len(own),
               "horizons_left_out": " ".join(map(str, left_out)) or "-"}
        if len(pilot) >= 2:
            seeds = seeds_for_slope_width(pilot, target_half_width, cost=cost, min_seeds=min_seeds)
            row.update({"relative_variance": " ".join(f"{h}:{relative_variance(v):.2f}" for h, v in pilot.items()),
                        "seeds_needed": " ".join(f"{h}:{n}" for h, n in seeds.items()),
                        "cpu_seconds_needed": sum(n * cost(h) for h, n in seeds.items())})
            own_configured = (configured or {}).get((experiment, policy), (configured or {}).get(experiment))
            if own_configured:
                chosen = {h: own_configured[h] for h in pilot}
                row.update({"seeds_configured": " ".join(f"{h}:{n}" for h, n in chosen.items()),
                            "cpu_seconds_configured": sum(n * cost(h) for h, n in chosen.items()),
                            "predicted_half_width": predicted_half_width(pilot, chosen)})
        rows.append(row)
    return pd.DataFrame(rows)


def configured_seeds(config: Mapping, experiments: Iterable[str]) -> dict:
    """experiment → T → seeds of the first stage, as the config sets them, and
    (experiment, label) → T → seeds of both stages for each label of the
    experiment's ``second_stage`` (its ``total_seeds`` where given, else the first stage's)."""
    result = {}
    for name in experiments:
        spec = config["experiments"][name]
        by_horizon = {int(k): v for k, v in (spec.get("seeds_by_horizon") or {}).items()}
        first = result[name] = {int(h): by_horizon.get(int(h), spec["seeds"]) for h in spec["sweep"]["horizon"]}
        for label, totals in ((spec.get("second_stage") or {}).get("total_seeds") or {}).items():
            totals = {int(k): v for k, v in totals.items()}
            result[(name, label)] = {h: max(n, totals.get(h, n)) for h, n in first.items()}
    return result


def main(argv=None) -> int:
    """python -m cqb.analysis.slope_precision PILOT_RUNS_TSV [CONFIG_YAML]: the power analysis table."""
    import sys

    import pandas as pd
    import yaml

    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m cqb.analysis.slope_precision PILOT_RUNS_TSV [CONFIG_YAML]", file=sys.stderr)
        return 2
    runs = pd.read_csv(argv[0], sep="\t", dtype={"experiment": str, "policy": str})
    runs["stalled"] = runs["stalled"].astype(str).str.lower().isin(("true", "1"))
    configured = None
    if len(argv) > 1:
        config = yaml.safe_load(open(argv[1]))
        configured = configured_seeds(config, [e for e in dict.fromkeys(runs["experiment"])
                                               if e in config["experiments"]])
    table = power_table(runs, configured=configured)
    with pd.option_context("display.width", 250, "display.max_colwidth", 80):
        print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
