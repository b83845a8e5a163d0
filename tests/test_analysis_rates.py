"""cqb.analysis.rates: the tail-regret estimand, the robust per-horizon estimator, the
log–log slope with its intervals, the power analysis, and Figure 5's drawing
and rendered summary (no Snakemake)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from cqb.analysis.rates import (
    bootstrap_converged_means,
    converged_mean,
    fit_slope,
    horizon_row,
    rate_run_rows,
    rate_tables,
    rates_figure_table,
    reference_label,
    reference_slope,
    Z95,
    reference_curve,
    slope_verdict,
    slope_weights,
)
from cqb.analysis.slope_precision import predicted_half_width, relative_variance, seeds_for_slope_width
from cqb.analysis.summaries import SummarySettings, binomial_interval

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
    assert text.startswith("**Figure 5: do the theorems")
    assert rates_summary_markdown(summary, slopes, titles, names, figure="Figure 9").startswith("**Figure 9: do")
    figure = plot_rates(summary, slopes, titles, names)
    assert len(figure.axes) == 2
    assert [axis.get_title() for axis in figure.axes] == ["Base instance", "Harder instance"]


def test_power_table_reports_seeds_cost_and_the_configured_prediction():
    from cqb.analysis.slope_precision import power_table

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


# ================================================================ value by value (from mutation testing)
# cqb.analysis.rates, value by value on small hand-made inputs: every field of the
# per-horizon row, the slope fit's edge cases (two horizons, too few positive
# bootstrap draws, runs with two converged seeds), the power analysis's exact
# seed counts, the verdict's boundaries and the slope table's columns. Mutation
# testing showed the tests of the estimand's behaviour (above) leave
# these unchecked.


def no_warnings():
    context = warnings.catch_warnings()
    context.__enter__()
    warnings.simplefilter("error")
    return context


# ---------------------------------------------------------------- per-horizon row


def test_horizon_row_every_field_on_a_hand_made_horizon():
    values, stalled, final = [1.0, 2.0, 3.0, 10.0], [0, 0, 0, 1], [1, 0, 2, 5]  # 0/1 flags work as booleans
    row = horizon_row(values, stalled, final, 500, np.random.default_rng(4), confidence=0.9)
    replicates = bootstrap_converged_means(values, np.array(stalled, bool), 500, np.random.default_rng(4))
    low, high = np.percentile(replicates[np.isfinite(replicates)], [5, 95])
    stall_low, stall_high = binomial_interval(1, 4, 0.9)
    assert row == {"n_runs": 4, "n_stalled": 1, "stall_ci_low": stall_low, "stall_ci_high": stall_high,
                   "estimate": 2.0, "ci_low": low, "ci_high": high, "sd_converged": 1.0,
                   "log_se": 1.0 / (2.0 * math.sqrt(3)), "tail_mean_all": 4.0, "tail_median_all": 2.5,
                   "final_mean_converged": 1.0, "final_se_converged": pytest.approx(1.0 / math.sqrt(3), rel=1e-15)}
    assert stall_low != binomial_interval(1, 4)[0]  # the confidence reaches the stall interval


def test_horizon_row_with_two_converged_runs_has_every_spread():
    row = horizon_row([0.5, 1.5], [False, False], [0, 2], 200, np.random.default_rng(0))
    assert row["sd_converged"] == pytest.approx(math.sqrt(0.5))
    assert row["log_se"] == pytest.approx(math.sqrt(0.5) / (1.0 * math.sqrt(2)))
    assert row["final_se_converged"] == pytest.approx(math.sqrt(2) / math.sqrt(2))


def test_horizon_row_with_one_converged_run_has_no_spread_and_no_warning():
    context = no_warnings()
    try:
        row = horizon_row([2.0, 40.0], [False, True], [1, 30], 100, np.random.default_rng(0))
    finally:
        context.__exit__(None, None, None)
    assert row["estimate"] == 2.0 and row["final_mean_converged"] == 1.0
    assert math.isnan(row["sd_converged"]) and math.isnan(row["log_se"]) and math.isnan(row["final_se_converged"])


def test_horizon_row_all_stalled_has_no_estimate_and_no_warning():
    context = no_warnings()
    try:
        row = horizon_row([30.0, 40.0], [True, True], [30, 40], 100, np.random.default_rng(0))
        assert math.isnan(converged_mean([30.0, 40.0], [True, True]))
    finally:
        context.__exit__(None, None, None)
    assert all(math.isnan(row[key]) for key in ("estimate", "ci_low", "ci_high", "final_mean_converged"))


@pytest.mark.parametrize("values, log_se_finite", [([-1.0, 1.0], False), ([0.25, 0.75], True)])
def test_log_se_needs_a_positive_estimate_not_one_above_one(values, log_se_finite):
    row = horizon_row(values, [False, False], [0, 0], 50, np.random.default_rng(0))
    assert math.isfinite(row["log_se"]) == log_se_finite


def test_converged_mean_reads_0_1_flags_as_booleans():
    assert converged_mean([1.0, 5.0], [0, 1]) == 1.0
    replicates = bootstrap_converged_means([1.0, 5.0], [0, 1], 20, np.random.default_rng(0))
    assert np.isfinite(replicates).sum() > 10  # the draws that hold the converged run
    np.testing.assert_array_equal(replicates[np.isfinite(replicates)], 1.0)


def test_horizon_row_interval_is_the_central_bootstrap_percentile_range():
    values = np.random.default_rng(1).lognormal(0, 1, 25)
    row = horizon_row(values, np.zeros(25, bool), np.zeros(25), 400, np.random.default_rng(2), confidence=0.9)
    replicates = bootstrap_converged_means(values, np.zeros(25, bool), 400, np.random.default_rng(2))
    assert (row["ci_low"], row["ci_high"]) == tuple(np.percentile(replicates, [5, 95]))


# ---------------------------------------------------------------- slope


def test_fit_slope_below_two_positive_horizons_is_all_nan_with_no_draws_kept():
    fit = fit_slope({100: (np.array([1.0, 2.0]), np.zeros(2, bool)), 1000: (np.array([0.0, 0.0]), np.zeros(2, bool))})
    assert fit["horizons_used"] == [100] and fit["horizons_dropped"] == [1000]
    assert set(fit) == {"horizons_used", "horizons_dropped", "slope", "ci_low", "ci_high", "delta_half_width",
                        "bootstrap_kept"}
    assert fit["bootstrap_kept"] == 0
    assert all(math.isnan(fit[key]) for key in ("slope", "ci_low", "ci_high", "delta_half_width"))


def _two_horizons(first, second):
    return {100: (np.asarray(first, float), np.zeros(len(first), bool)),
            1000: (np.asarray(second, float), np.zeros(len(second), bool))}


def test_fit_slope_on_two_horizons_with_two_runs_each():
    by_horizon = _two_horizons([1.0, 3.0], [0.5, 1.5])
    fit = fit_slope(by_horizon, bootstrap=400, seed=3, confidence=0.8)
    assert fit["slope"] == pytest.approx(math.log(1.0 / 2.0) / math.log(10))
    # delta method: var(log mean) = var/(n·mean²) per horizon, weights ±1/ln 10
    log_var = [np.var([1.0, 3.0], ddof=1) / (2 * 4.0), np.var([0.5, 1.5], ddof=1) / (2 * 1.0)]
    assert fit["delta_half_width"] == pytest.approx(Z95 * math.sqrt(sum(log_var)) / math.log(10))
    rng = np.random.default_rng(3)
    replicates = np.column_stack([bootstrap_converged_means(*by_horizon[h], 400, rng) for h in (100, 1000)])
    good = (replicates > 0).all(axis=1)
    draws = np.log(replicates[good]) @ slope_weights([100, 1000])
    assert fit["bootstrap_kept"] == good.sum()
    assert (fit["ci_low"], fit["ci_high"]) == tuple(np.percentile(draws, [10, 90]))
    assert fit_slope(by_horizon, bootstrap=400, seed=3, confidence=0.8) == fit  # the seed fixes the draws


def test_fit_slope_interval_is_the_central_percentile_range_of_the_draws():
    rng = np.random.default_rng(8)
    by_horizon = _two_horizons(rng.lognormal(0, 1, 20), rng.lognormal(-1, 1, 20))
    fit = fit_slope(by_horizon, bootstrap=300, seed=1, confidence=0.9)
    draw_rng = np.random.default_rng(1)
    replicates = np.column_stack([bootstrap_converged_means(*by_horizon[h], 300, draw_rng) for h in (100, 1000)])
    draws = np.log(replicates) @ slope_weights([100, 1000])
    assert (fit["ci_low"], fit["ci_high"]) == tuple(np.percentile(draws, [5, 95]))


def test_one_converged_run_leaves_the_delta_width_undefined_without_warnings():
    context = no_warnings()
    try:
        fit = fit_slope(_two_horizons([1.0], [0.5, 1.5]), bootstrap=50)
    finally:
        context.__exit__(None, None, None)
    assert math.isfinite(fit["slope"]) and math.isnan(fit["delta_half_width"])


def test_bootstrap_draws_with_a_zero_estimate_are_not_kept():
    by_horizon = _two_horizons([0.0, 0.0, 0.0, 2.0], [0.0, 0.0, 1.0, 1.0])
    fit = fit_slope(by_horizon, bootstrap=400, seed=0)
    rng = np.random.default_rng(0)
    replicates = np.column_stack([bootstrap_converged_means(*by_horizon[h], 400, rng) for h in (100, 1000)])
    assert 0 < fit["bootstrap_kept"] == (replicates > 0).all(axis=1).sum() < 400
    assert math.isfinite(fit["ci_low"])


def test_no_interval_when_fewer_than_half_the_draws_are_positive_everywhere():
    # one positive run among ten per horizon: ≈ 0.65 of draws positive at each, ≈ 0.42 at both
    by_horizon = _two_horizons([0.0] * 9 + [1.0], [0.0] * 9 + [2.0])
    fit = fit_slope(by_horizon, bootstrap=1000, seed=0)
    assert 330 < fit["bootstrap_kept"] < 500
    assert math.isfinite(fit["slope"]) and math.isnan(fit["ci_low"]) and math.isnan(fit["ci_high"])


def test_fit_slope_reads_0_1_stall_flags_as_booleans():
    by_horizon = {100: (np.array([1.0, 3.0, 50.0]), np.array([0, 0, 1])),
                  1000: (np.array([0.5, 1.5, 60.0]), np.array([0, 0, 1]))}
    assert fit_slope(by_horizon, bootstrap=50)["delta_half_width"] == pytest.approx(
        fit_slope(_two_horizons([1.0, 3.0], [0.5, 1.5]), bootstrap=50)["delta_half_width"])


# ---------------------------------------------------------------- reference rates


def test_reference_curves_are_the_theorem_shapes_normalised_at_the_first_horizon():
    horizons = [1000, 4000, 16000]
    np.testing.assert_allclose(reference_curve("cqb_opt", horizons),
                               [math.log(h) ** 2 / math.log(1000) ** 2 for h in horizons], rtol=1e-14)
    np.testing.assert_allclose(reference_curve("cqb_eps", horizons), [1, 4 ** -0.25, 16 ** -0.25], rtol=1e-14)
    assert reference_curve("random", horizons) is None


def test_reference_slope_at_one_or_two_horizons():
    assert reference_slope("cqb_opt", [1000]) == pytest.approx(2 / math.log(1000), rel=1e-14)
    assert reference_slope("cqb_eps", [1000]) == -0.25
    secant = (2 * math.log(math.log(8000)) - 2 * math.log(math.log(1000))) / math.log(8)
    assert reference_slope("cqb_opt", [1000, 8000]) == pytest.approx(secant, rel=1e-12)


# ---------------------------------------------------------------- power analysis


def test_relative_variance_drops_stalled_runs_and_accepts_two():
    assert relative_variance([1.0, 3.0]) == pytest.approx(2.0 / 4.0)
    assert relative_variance([1.0, 3.0, 100.0], [False, False, True]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="≥ 2 converged runs"):
        relative_variance([1.0, 3.0, 100.0], [False, True, True])


def test_seeds_follow_the_lagrange_allocation_exactly():
    rng = np.random.default_rng(5)
    pilot = {h: rng.lognormal(0, 0.8, 30) for h in (1000, 3000, 100000)}
    cost = {1000: 1.0, 3000: 2.0, 100000: 30.0}
    seeds = seeds_for_slope_width(pilot, 0.02, cost=cost.get, min_seeds=1)
    weights = slope_weights(sorted(pilot))
    a = np.array([w * w * relative_variance(pilot[h]) for w, h in zip(weights, sorted(pilot))])
    c = np.array([cost[h] for h in sorted(pilot)])
    raw = np.sqrt(a / c) * np.sqrt(a * c).sum() / (0.02 / Z95) ** 2
    assert seeds == {h: math.ceil(n) for h, n in zip(sorted(pilot), raw)}
    assert min(seeds.values()) > 1 and len(set(seeds.values())) == 3


def test_seeds_default_to_at_least_five_and_need_two_horizons():
    pilot = {1000: np.array([1.0, 1.01, 0.99]), 10000: np.array([0.5, 0.51, 0.49])}
    assert seeds_for_slope_width(pilot, 1.0) == {1000: 5, 10000: 5}
    with pytest.raises(ValueError, match=r"^a slope needs ≥ 2 horizons, got \[1000\]$"):
        seeds_for_slope_width({1000: pilot[1000]}, 1.0)


# ---------------------------------------------------------------- verdict and tables


def _row(slope=-0.3, low=-0.4, high=-0.2, half=0.1, reference=-0.25):
    return {"slope": slope, "ci_low": low, "ci_high": high, "half_width": half, "reference_slope": reference}


@pytest.mark.parametrize("row, verdict", [
    (_row(slope=math.nan), "no slope (fewer than two positive estimates)"),
    (_row(low=math.nan), "no interval (fewer than half the bootstrap draws have a positive estimate at every "
                         "horizon): not resolved"),
    (_row(half=0.15), "resolved; consistent with the bound's rate"),
    (_row(high=-0.25), "resolved; consistent with the bound's rate"),  # touching the reference is consistent
    (_row(low=-0.25, high=0.0), "resolved; consistent with the bound's rate"),
])
def test_verdict_text_and_its_boundaries(row, verdict):
    assert slope_verdict(row) == verdict


def test_rate_run_rows_pass_the_final_phase_and_name_the_policy():
    queue, oracle = np.zeros(100, int), np.zeros(100, int)
    queue[95:] = 4  # the last tenth averages 2, the final phase (t > 95) 4
    rows = rate_run_rows([("base", "cqb_eta2", 100, 0, queue, oracle, 95),
                          ("base", "cqb_eps", 100, 0, queue, oracle, None)])
    assert [row["policy"] for row in rows] == ["cqb_eta2", "cqb_eps"]
    assert [row["tail_regret"] for row in rows] == [4.0, 2.0]


def _runs():
    rows = []
    for experiment, policy in (("base", "cqb_opt"), ("another", "q_ucb")):  # not in alphabetical order
        for horizon, level in ((100, 2.0), (1000, 1.0), (10000, 0.0), (100000, 0.0)):
            for seed, noise in enumerate((0.8, 1.0, 1.2)):
                rows.append({"experiment": experiment, "policy": policy, "horizon": horizon, "seed": seed,
                             "tail_regret": level * noise, "final_regret": 2 * seed, "final_queue": 3 + seed,
                             "final_oracle": seed, "stalled": False})
    return pd.DataFrame(rows)


def test_rate_tables_columns_and_values_on_two_experiments():
    runs = _runs()
    summary, slopes = rate_tables(runs, bootstrap=300, seed=2, confidence=0.9)
    assert list(zip(slopes["experiment"], slopes["policy"])) == [("base", "cqb_opt"), ("another", "q_ucb")]
    first = summary.iloc[0]
    assert (first["final_queue_mean"], first["final_oracle_mean"], first["final_regret_mean"]) == (4.0, 1.0, 2.0)
    assert first["stall_ci_high"] == binomial_interval(0, 3, 0.9)[1] != binomial_interval(0, 3)[1]
    by_horizon = {h: (np.array([0.8, 1.0, 1.2]) * level, np.zeros(3, bool))
                  for h, level in ((100, 2.0), (1000, 1.0), (10000, 0.0), (100000, 0.0))}
    fit = fit_slope(by_horizon, bootstrap=300, seed=2, confidence=0.9)
    for _, row in slopes.iterrows():
        assert (row["slope"], row["ci_low"], row["ci_high"], row["delta_half_width"], row["bootstrap_kept"]) == (
            fit["slope"], fit["ci_low"], fit["ci_high"], fit["delta_half_width"], fit["bootstrap_kept"])
        assert row["half_width"] == (fit["ci_high"] - fit["ci_low"]) / 2
        assert (row["n_horizons"], row["horizons_used"], row["horizons_dropped"]) == (2, "100 1000", "10000 100000")
    assert slopes["reference"].tolist() == [reference_label("cqb_opt"), "-"]
    # the theorem's slope over the horizons that entered the fit, not all four
    assert slopes.loc[0, "reference_slope"] == reference_slope("cqb_opt", [100, 1000])
    assert math.isnan(slopes.loc[1, "reference_slope"])
    table = rates_figure_table(summary, slopes)
    assert table["experiment"].tolist() == ["base"] * 4 + ["another"] * 4
    assert table["in_fit"].tolist() == [True, True, False, False] * 2
    assert (table["slope"] == fit["slope"]).all()
    again = rate_tables(runs, bootstrap=300, seed=2, confidence=0.9)
    pd.testing.assert_frame_equal(again[0], summary)
    pd.testing.assert_frame_equal(again[1], slopes)


def test_rate_tables_mark_an_empty_horizon_list_with_a_dash():
    runs = _runs()
    _, slopes = rate_tables(runs[runs["horizon"] <= 1000], bootstrap=100)
    assert slopes["horizons_dropped"].tolist() == ["-", "-"]
    _, slopes = rate_tables(runs[runs["horizon"] >= 10000], bootstrap=100)
    assert slopes["horizons_used"].tolist() == ["-", "-"]
    assert slopes["horizons_dropped"].tolist() == ["10000 100000"] * 2


# ---------------------------------------------------------------- power table and its command line


def _pilot_runs():
    rows = []
    values = {(100, "b"): [3.0, 2.0, 4.0], (1000, "b"): [1.0, 1.5, 0.5], (10000, "b"): [0.0, 0.0, 0.0],
              (100, "a"): [2.0, 2.0, 2.5, 9.0], (1000, "a"): [1.0, 1.2, 0.8]}
    for (horizon, experiment), tails in values.items():
        for seed, tail in enumerate(tails):
            rows.append({"experiment": experiment, "policy": "cqb_opt", "horizon": horizon, "seed": seed,
                         "tail_regret": tail, "stalled": tail > 5})
    return pd.DataFrame(rows)


def test_power_table_row_by_row():
    from cqb.analysis.slope_precision import power_table, predicted_half_width

    cost = {100: 1.0, 1000: 3.0}.get
    table = power_table(_pilot_runs(), 0.2, min_seeds=4, configured={"b": {100: 6, 1000: 7, 10000: 8}}, cost=cost)
    assert table["experiment"].tolist() == ["b", "a"]  # the runs' order, not sorted
    b, a = table.to_dict("records")
    pilot = {100: np.array([3.0, 2.0, 4.0]), 1000: np.array([1.0, 1.5, 0.5])}
    seeds = seeds_for_slope_width(pilot, 0.2, cost=cost, min_seeds=4)
    assert seeds == {100: 8, 1000: 7}  # above min_seeds, shaped by the cost
    assert b == {"experiment": "b", "policy": "cqb_opt", "pilot_runs": 9, "horizons_left_out": "10000",
                 "relative_variance": f"100:{relative_variance(pilot[100]):.2f} 1000:{relative_variance(pilot[1000]):.2f}",
                 "seeds_needed": f"100:{seeds[100]} 1000:{seeds[1000]}",
                 "cpu_seconds_needed": seeds[100] * 1.0 + seeds[1000] * 3.0,
                 "seeds_configured": "100:6 1000:7", "cpu_seconds_configured": 6 * 1.0 + 7 * 3.0,
                 "predicted_half_width": predicted_half_width(pilot, {100: 6, 1000: 7})}
    assert a["horizons_left_out"] == "-" and a["pilot_runs"] == 7
    assert math.isnan(a["seeds_configured"])  # experiment a has no configured seeds


def test_power_table_needs_three_converged_runs_and_a_positive_mean():
    from cqb.analysis.slope_precision import power_table

    runs = _pilot_runs()
    runs = runs[~((runs["experiment"] == "b") & (runs["horizon"] == 1000) & (runs["seed"] == 2))]  # two left
    row = power_table(runs[runs["experiment"] == "b"], 0.5).to_dict("records")[0]
    assert row["horizons_left_out"] == "1000 10000" and "seeds_needed" not in row


def test_configured_seeds_and_run_cost():
    from cqb.analysis.slope_precision import configured_seeds, run_cost

    config = {"experiments": {"e": {"seeds": 10, "seeds_by_horizon": {"2000": 30}, "sweep": {"horizon": [500, 2000]}}}}
    assert configured_seeds(config, ["e"]) == {"e": {500: 10, 2000: 30}}
    assert run_cost(2000) == pytest.approx(0.9 + 0.075 * 2)
    assert run_cost(1000, startup=0.0, per_thousand_rounds=2.0) == 2.0


def test_power_analysis_command_line(tmp_path, capsys):
    from cqb.analysis.slope_precision import main

    assert main([]) == 2 and "usage: python -m cqb.analysis.slope_precision" in capsys.readouterr().err
    runs = _pilot_runs()
    runs["stalled"] = runs["stalled"].map({True: "True", False: "False"})
    runs.to_csv(tmp_path / "pilot.tsv", sep="\t", index=False)
    (tmp_path / "config.yaml").write_text("experiments:\n  b:\n    seeds: 6\n    sweep: {horizon: [100, 1000, 10000]}\n")
    assert main([str(tmp_path / "pilot.tsv"), str(tmp_path / "config.yaml")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["experiment", "policy", "pilot_runs", "horizons_left_out"]
    assert "100:6 1000:6" in out and "10000" in out
    assert "100:0.02" in out  # experiment a's stalled run (tail 9.0, flag "True") left out of its pilot


def test_power_analysis_command_line_without_config_reads_0_1_stall_flags(tmp_path, capsys):
    from cqb.analysis.slope_precision import main

    runs = _pilot_runs()
    runs["stalled"] = runs["stalled"].astype(int)
    runs.to_csv(tmp_path / "pilot.tsv", sep="\t", index=False)
    assert main([str(tmp_path / "pilot.tsv")]) == 0
    out = capsys.readouterr().out
    assert "100:0.02" in out and "seeds_configured" not in out


def test_documented_defaults_2000_draws_seed_0_half_width_0_15_at_least_10_seeds():
    from cqb.analysis.slope_precision import power_table

    rng = np.random.default_rng(9)
    rows = [{"experiment": "e", "policy": "cqb_eps", "horizon": h, "seed": s, "tail_regret": rng.lognormal(-h / 2000, 1),
             "final_regret": 0, "final_queue": 0, "final_oracle": 0, "stalled": False}
            for h in (1000, 4000) for s in range(8)]
    runs = pd.DataFrame(rows)
    for given, explicit in zip(rate_tables(runs), rate_tables(runs, bootstrap=2000, seed=0, confidence=0.95)):
        pd.testing.assert_frame_equal(given, explicit)
    first = horizon_row(runs["tail_regret"][:8], np.zeros(8, bool), np.zeros(8), 2000, np.random.default_rng(0))
    assert rate_tables(runs)[0].loc[0, "ci_low"] == first["ci_low"]  # the summary's draws come from seed 0 too
    by_horizon = {h: (runs.loc[runs["horizon"] == h, "tail_regret"].to_numpy(), np.zeros(8, bool)) for h in (1000, 4000)}
    assert fit_slope(by_horizon) == fit_slope(by_horizon, bootstrap=2000, seed=0, confidence=0.95)
    pd.testing.assert_frame_equal(power_table(runs), power_table(runs, 0.15, min_seeds=10))
    assert power_table(runs, 5.0)["seeds_needed"].item() == "1000:10 4000:10"


def test_min_seeds_reaches_the_power_table_and_0_1_flags_reach_relative_variance():
    from cqb.analysis.slope_precision import power_table

    assert power_table(_pilot_runs(), 0.2, min_seeds=50)["seeds_needed"].tolist()[0] == "100:50 1000:50"
    assert relative_variance([1.0, 3.0, 100.0], [0, 0, 1]) == pytest.approx(0.5)


def test_power_analysis_command_line_reads_sys_argv_when_given_no_list(tmp_path, capsys, monkeypatch):
    from cqb.analysis.slope_precision import main

    runs = _pilot_runs()
    runs.to_csv(tmp_path / "pilot.tsv", sep="\t", index=False)
    monkeypatch.setattr("sys.argv", ["cqb.analysis.slope_precision", str(tmp_path / "pilot.tsv")])
    assert main() == 0
    assert "100:0.02" in capsys.readouterr().out
    monkeypatch.setattr("sys.argv", ["cqb.analysis.slope_precision"])
    assert main() == 2


def test_fit_slope_keeps_the_interval_when_exactly_half_the_draws_are_usable(monkeypatch):
    """The interval needs at least ⌊draws/2⌋ draws with every horizon's estimate
    positive: with 5 draws, 2 usable give an interval and 1 does not."""
    import cqb.analysis.rates as rates

    def fake_draws(usable):
        def draw(values, stalled, bootstrap, rng):
            signs = np.array([1.0] * usable + [-1.0] * (bootstrap - usable))
            return signs * (1.0 + 0.1 * np.arange(bootstrap)) * float(np.mean(values))
        return draw

    by_horizon = {100: (np.array([2.0, 2.2]), np.zeros(2, bool)), 1000: (np.array([1.0, 1.1]), np.zeros(2, bool))}
    monkeypatch.setattr(rates, "bootstrap_converged_means", fake_draws(2))
    fit = rates.fit_slope(by_horizon, bootstrap=5)
    assert fit["bootstrap_kept"] == 2 and np.isfinite(fit["ci_low"]) and np.isfinite(fit["ci_high"])
    monkeypatch.setattr(rates, "bootstrap_converged_means", fake_draws(1))
    fit = rates.fit_slope(by_horizon, bootstrap=5)
    assert fit["bootstrap_kept"] == 1 and np.isnan(fit["ci_low"]) and np.isnan(fit["ci_high"])


def test_rate_runs_are_read_through_the_run_file_format(tmp_path):
    from cqb.analysis.rates import read_rate_runs
    from cqb.sim.runfile import save_run
    from cqb.sim.simulate import RunResult

    queue = np.arange(10, dtype=np.int64)
    path = tmp_path / "seed3.npz"
    save_run(path, RunResult(queue=queue, oracle_queue=np.zeros(10, np.int64), gap=np.zeros(10),
                             explored=np.zeros(10, bool),
                             metadata={"seed": 3, "horizon": 10, "policy_params": {"cutoff": 4}}))
    (row,) = read_rate_runs([("base", "cqb_eps", 10, 3)], [path])
    assert row[:4] == ("base", "cqb_eps", 10, 3) and row[4].tolist() == queue.tolist() and row[6] == 4
    assert rate_run_rows([row])[0]["tail_regret"] == 9.0
    broken = tmp_path / "seed4.npz"
    broken.write_bytes(path.read_bytes()[:50])  # a truncated copy: one line naming the file
    with pytest.raises(ValueError, match="seed4.npz is not a readable run file"):
        list(read_rate_runs([("base", "cqb_eps", 10, 4)], [broken]))
    with pytest.raises(ValueError):  # a run without its file
        list(read_rate_runs([("base", "cqb_eps", 10, 3), ("base", "cqb_eps", 10, 4)], [path]))
