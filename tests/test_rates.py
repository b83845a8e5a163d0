"""cqb.analysis.rates: the tail-regret estimand, the robust per-horizon estimator, the
log–log slope with its intervals, the power analysis, and Figure 5's drawing
and rendered summary (no Snakemake)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cqb.analysis.rates import (
    bootstrap_converged_means,
    converged_mean,
    fit_slope,
    horizon_row,
    predicted_half_width,
    rate_run_rows,
    rate_tables,
    rates_figure_table,
    reference_slope,
    seeds_for_slope_width,
    Z95,
)
from cqb.analysis.summaries import SummarySettings

HORIZONS = (2000, 5000, 10000, 20000, 50000)


def noisy_power_law(exponent, seeds, rng, scale=20.0, noise=0.5, horizons=HORIZONS):
    """Per T: ``seeds`` runs whose values are scale·T^exponent·lognormal(noise),
    normalised so that their expectation is exactly scale·T^exponent."""
    return {h: scale * h ** exponent * rng.lognormal(-noise ** 2 / 2, noise, size=seeds[h] if isinstance(seeds, dict)
                                                     else seeds) for h in horizons}


def no_stalls(values):
    return {h: (v, np.zeros(v.shape, bool)) for h, v in values.items()}


# ---------------------------------------------------------------- estimand


def test_tail_regret_of_a_run_is_the_mean_of_the_last_tenth():
    horizon = 200
    oracle = np.full(horizon, 3)
    queue = oracle.copy()
    queue[-20:] += np.arange(20) % 3  # last 10 %: 0, 1, 2, 0, …
    queue[:100] += 50  # early excess must not enter the tail regret
    (row,) = rate_run_rows([("exp", "cqb_eps", horizon, 7, queue, oracle, None)])
    assert row["tail_regret"] == pytest.approx((np.arange(20) % 3).mean())
    assert row["final_regret"] == int(queue[-1] - oracle[-1])
    assert row["experiment"] == "exp" and row["seed"] == 7 and not row["stalled"]


def test_a_run_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="expected T = 300"):
        rate_run_rows([("exp", "cqb_eps", 300, 0, np.zeros(200, int), np.zeros(200, int), None)])


def test_stall_flag_follows_the_summary_threshold():
    queue, oracle = np.full(100, 10), np.full(100, 4)  # tail regret 6
    (loose,) = rate_run_rows([("e", "p", 100, 0, queue, oracle, None)], SummarySettings(stall_threshold=10))
    (strict,) = rate_run_rows([("e", "p", 100, 0, queue, oracle, None)], SummarySettings(stall_threshold=5))
    assert not loose["stalled"] and strict["stalled"]


# ---------------------------------------------------------------- robust estimator


def test_converged_mean_ignores_stalled_runs_and_counts_them():
    values = np.array([0.1, 0.2, 0.3, 484.0])
    stalled = values > 5
    assert converged_mean(values, stalled) == pytest.approx(0.2)
    row = horizon_row(values, stalled, np.array([0, 1, 0, 480]), 500, np.random.default_rng(0))
    assert row["n_runs"] == 4 and row["n_stalled"] == 1
    assert row["estimate"] == pytest.approx(0.2)
    assert row["tail_mean_all"] == pytest.approx(values.mean())  # the plain mean stays beside it
    assert row["final_mean_converged"] == pytest.approx(1 / 3)
    assert 0.1 <= row["ci_low"] <= 0.2 <= row["ci_high"] <= 0.3
    assert 0 < row["stall_ci_low"] < 0.25 < row["stall_ci_high"] < 1


def test_all_stalled_gives_no_estimate():
    row = horizon_row(np.array([50.0, 60.0]), np.array([True, True]), np.array([50, 60]), 100,
                      np.random.default_rng(0))
    assert math.isnan(row["estimate"]) and math.isnan(row["ci_low"]) and row["n_stalled"] == 2


def test_bootstrap_replicates_are_means_of_resampled_converged_runs():
    values = np.array([1.0, 2.0, 100.0])
    stalled = np.array([False, False, True])
    draws = bootstrap_converged_means(values, stalled, 2000, np.random.default_rng(1))
    finite = draws[np.isfinite(draws)]
    assert ((finite >= 1.0) & (finite <= 2.0)).all()  # the stalled value never enters
    assert np.isnan(draws).mean() == pytest.approx((1 / 3) ** 3, abs=0.02)  # all three draws stalled


# ---------------------------------------------------------------- slope


@pytest.mark.parametrize("exponent", [-0.5, -0.25, 0.3])
def test_slope_of_exact_power_law_is_recovered(exponent):
    exact = {h: (np.full(5, 50.0 * h ** exponent), np.zeros(5, bool)) for h in HORIZONS}
    fit = fit_slope(exact, bootstrap=200)
    assert fit["slope"] == pytest.approx(exponent, abs=1e-10)
    assert fit["ci_low"] == pytest.approx(exponent, abs=1e-10)
    assert fit["ci_high"] == pytest.approx(exponent, abs=1e-10)
    assert fit["delta_half_width"] == pytest.approx(0, abs=1e-12)


def test_stalled_run_does_not_move_the_slope():
    rng = np.random.default_rng(5)
    values = noisy_power_law(-0.5, 30, rng)
    clean = fit_slope(no_stalls(values), bootstrap=300)
    values[20000] = np.append(values[20000], 484.0)
    stalled = {h: (v, v > 5) for h, v in values.items()}
    fit = fit_slope(stalled, bootstrap=300)
    assert fit["slope"] == pytest.approx(clean["slope"], abs=1e-12)


def test_non_positive_estimates_are_dropped_and_reported():
    data = {h: (np.full(4, h ** -0.5), np.zeros(4, bool)) for h in HORIZONS}
    data[20000] = (np.array([0.1, -0.1, 0.0, 0.0]), np.zeros(4, bool))
    fit = fit_slope(data, bootstrap=200)
    assert fit["horizons_dropped"] == [20000]
    assert fit["slope"] == pytest.approx(-0.5, abs=1e-10)


def test_slope_intervals_cover_the_true_exponent_at_the_nominal_rate():
    """Bootstrap and delta-method intervals on noisy synthetic power laws:
    coverage near 95 % over repeated data sets, half-widths that agree."""
    rng = np.random.default_rng(11)
    covered, halves, deltas = 0, [], []
    repeats = 120
    for repeat in range(repeats):
        fit = fit_slope(no_stalls(noisy_power_law(-0.25, 40, rng)), bootstrap=400, seed=repeat)
        covered += fit["ci_low"] <= -0.25 <= fit["ci_high"]
        halves.append((fit["ci_high"] - fit["ci_low"]) / 2)
        deltas.append(fit["delta_half_width"])
    assert 0.88 <= covered / repeats <= 0.995
    assert np.median(halves) == pytest.approx(np.median(deltas), rel=0.15)


# ---------------------------------------------------------------- power analysis


def test_power_analysis_seeds_reach_the_target_width_on_a_known_power_law():
    """Pilot on a synthetic power law with known noise; the seeds it asks for
    give slope intervals of about the target half-width, with coverage."""
    rng = np.random.default_rng(2)
    target = 0.15
    pilot = noisy_power_law(-0.5, 200, rng, noise=0.8)  # a large pilot: variances well estimated
    seeds = seeds_for_slope_width(pilot, target, cost=lambda h: 0.3 + h / 4000, min_seeds=5)
    assert predicted_half_width(pilot, seeds) <= target
    # the end points carry the slope: more seeds there than in the middle
    assert seeds[2000] > seeds[10000] and seeds[50000] > seeds[10000]
    assert seeds[10000] >= 5
    halves, slopes, covered = [], [], 0
    for repeat in range(80):
        fit = fit_slope(no_stalls(noisy_power_law(-0.5, seeds, rng, noise=0.8)), bootstrap=300, seed=repeat)
        halves.append((fit["ci_high"] - fit["ci_low"]) / 2)
        slopes.append(fit["slope"])
        covered += fit["ci_low"] <= -0.5 <= fit["ci_high"]
    predicted = predicted_half_width(pilot, seeds)
    # the slope's actual spread is what the power analysis predicted …
    assert Z95 * np.std(slopes) == pytest.approx(predicted, rel=0.2)
    # … and the bootstrap interval, a little narrow on skewed small samples, is near it
    assert np.median(halves) == pytest.approx(predicted, rel=0.25)
    assert covered >= 68


def test_power_analysis_puts_seeds_where_they_are_cheap():
    rng = np.random.default_rng(4)
    pilot = noisy_power_law(-0.5, 200, rng)
    flat = seeds_for_slope_width(pilot, 0.1, min_seeds=1)
    costly_end = seeds_for_slope_width(pilot, 0.1, cost=lambda h: 1.0 if h < 50000 else 100.0, min_seeds=1)
    assert costly_end[50000] < flat[50000] and costly_end[2000] > flat[2000]


def test_power_analysis_refuses_a_pilot_without_signal():
    pilot = {2000: np.array([0.0, 0.0, 0.0]), 50000: np.array([0.1, 0.2])}
    with pytest.raises(ValueError, match="positive mean"):
        seeds_for_slope_width(pilot, 0.15)
    with pytest.raises(ValueError, match="target_half_width"):
        seeds_for_slope_width({2000: np.ones(3), 50000: np.ones(3)}, 0.0)


# ---------------------------------------------------------------- tables, figure, summary


def fake_runs(rng):
    rows = []
    for experiment, scale in (("base", 0.5), ("harder", 0.75)):
        for policy, exponent in (("cqb_eps", -0.25), ("cqb_opt", 0.1)):
            for h in (2000, 10000, 50000):
                for seed in range(12):
                    tail = scale * h ** exponent * rng.lognormal(0, 0.2)
                    if experiment == "base" and policy == "cqb_opt" and h == 10000 and seed == 3:
                        tail = 300.0
                    rows.append({"experiment": experiment, "policy": policy, "horizon": h, "seed": seed,
                                 "tail_regret": tail, "final_regret": round(tail), "final_queue": round(tail) + 2,
                                 "final_oracle": 2, "stalled": tail > 5})
    return pd.DataFrame(rows)


def test_rate_tables_have_one_row_per_curve_and_horizon_with_stalls_counted():
    summary, slopes = rate_tables(fake_runs(np.random.default_rng(0)), bootstrap=300)
    assert len(summary) == 2 * 2 * 3 and len(slopes) == 4
    stalled = summary[summary["n_stalled"] > 0]
    assert list(zip(stalled["experiment"], stalled["policy"], stalled["horizon"])) == [("base", "cqb_opt", 10000)]
    base_opt = slopes[(slopes["experiment"] == "base") & (slopes["policy"] == "cqb_opt")].iloc[0]
    assert base_opt["n_stalled"] == 1 and base_opt["n_runs"] == 36
    assert base_opt["reference_slope"] == pytest.approx(reference_slope("cqb_opt", [2000, 10000, 50000]))
    eps = slopes[(slopes["experiment"] == "harder") & (slopes["policy"] == "cqb_eps")].iloc[0]
    assert eps["ci_low"] <= -0.25 <= eps["ci_high"]
    table = rates_figure_table(summary, slopes)
    assert len(table) == len(summary) and table["in_fit"].all()


def test_reference_slopes_are_the_theorems_rates():
    assert reference_slope("cqb_eps", HORIZONS) == pytest.approx(-0.25)
    assert reference_slope("cqb_eta2", HORIZONS) == pytest.approx(-0.5)
    # log²T over 2000–50000: local slope 2/ln T, between 2/ln 50000 and 2/ln 2000
    assert 2 / math.log(50000) < reference_slope("cqb_opt", HORIZONS) < 2 / math.log(2000)
    assert math.isnan(reference_slope("random", HORIZONS))


def test_summary_text_is_generated_from_the_tables():
    from cqb.figures.rates_plot import plot_rates, rates_summary_markdown

    summary, slopes = rate_tables(fake_runs(np.random.default_rng(0)), bootstrap=300)
    titles = {"base": "Base instance", "harder": "Harder instance"}
    names = {"cqb_eps": "CQB-ε", "cqb_opt": "CQB-Opt"}
    text = rates_summary_markdown(summary, slopes, titles, names)
    for _, fit in slopes.iterrows():
        assert f"{fit['slope']:.2f}".replace("-", "−") in text
    assert "1 of 36 runs stalled" in text and "*Harder instance*" in text
    figure = plot_rates(summary, slopes, titles, names)
    assert len(figure.axes) == 2
    assert [axis.get_title() for axis in figure.axes] == ["Base instance", "Harder instance"]


def test_power_table_reports_seeds_cost_and_the_configured_prediction():
    from cqb.analysis.rates import power_table

    rng = np.random.default_rng(6)
    rows = []
    for h, values in noisy_power_law(-0.5, 50, rng).items():
        rows += [{"experiment": "e", "policy": "cqb_eps", "horizon": h, "tail_regret": v, "stalled": False}
                 for v in values]
    rows += [{"experiment": "e", "policy": "cqb_eps", "horizon": 99999, "tail_regret": -0.1, "stalled": False}] * 3
    table = power_table(pd.DataFrame(rows), 0.15, min_seeds=5, configured={"e": {h: 20 for h in HORIZONS}},
                        cost=lambda h: 1.0)
    (row,) = table.to_dict("records")
    assert row["horizons_left_out"] == "99999"
    needed = dict(item.split(":") for item in row["seeds_needed"].split())
    assert row["cpu_seconds_needed"] == sum(int(n) for n in needed.values())  # cost 1 s a run
    pilot = {h: np.array([r["tail_regret"] for r in rows if r["horizon"] == h]) for h in HORIZONS}
    assert row["predicted_half_width"] == pytest.approx(predicted_half_width(pilot, {h: 20 for h in HORIZONS}))


@pytest.mark.parametrize("low, high, expected", [
    (-0.70, -0.60, "resolved; faster than the bound's rate"),
    (-0.45, -0.10, "not resolved; consistent with the bound's rate"),
    (-0.20, -0.05, "resolved; slower than the bound's rate"),
])
def test_verdict_compares_the_interval_with_the_theorem_slope(low, high, expected):
    from cqb.analysis.rates import slope_verdict

    row = {"slope": (low + high) / 2, "ci_low": low, "ci_high": high, "half_width": (high - low) / 2,
           "reference_slope": -0.25}
    assert slope_verdict(row) == expected
