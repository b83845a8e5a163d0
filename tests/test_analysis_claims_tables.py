"""Run summaries, failure counts and the claim checks on tables of known content."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cqb.analysis.aggregate import write_table
from cqb.analysis.verdict_rules import FAILS, HOLDS, INCONCLUSIVE
from cqb.analysis.claims.registry import ClaimSpec
from cqb.analysis.claims.statistics import bootstrap_mean_interval
from cqb.analysis.claims.tables import claims_markdown, evaluate_claims
from cqb.analysis.summaries import (SummarySettings, binomial_bounds, binomial_interval, curve_summaries, late_slope,
                           read_runs_table, run_summary, summarise_curves)
from conftest import curve_of, fabricate_run


# ----------------------------------------------------------------- run summaries


def test_run_summary_numbers_on_a_hand_made_run():
    queue = np.array([0, 1, 2, 5, 4, 3, 3, 2, 2, 2])
    oracle = np.array([0, 1, 1, 1, 1, 1, 0, 0, 1, 0])
    settings = SummarySettings(tail_fraction=0.2, stall_threshold=1.5, early_rounds=3)
    summary = run_summary(queue, oracle, settings)
    assert summary["final_regret"] == 2
    assert summary["tail_regret"] == pytest.approx((1 + 2) / 2)  # last 2 rounds: 2−1, 2−0
    assert summary["mean_regret"] == pytest.approx((queue - oracle).mean())
    assert summary["early_regret"] == pytest.approx((0 + 0 + 1) / 3)
    assert (summary["peak_round"], summary["peak_queue"]) == (4, 5)  # first maximum, 1-based
    assert summary["stalled"] is False  # 1.5 is not above 1.5
    assert run_summary(queue, oracle, SummarySettings(tail_fraction=0.2, stall_threshold=1.49))["stalled"]


def test_late_slope_is_the_least_squares_slope_of_the_second_half():
    rng = np.random.default_rng(3)
    queue = np.concatenate([rng.integers(0, 50, 100), 7 + 3 * np.arange(100) + rng.integers(0, 3, 100)])
    expected = np.polyfit(np.arange(100), queue[100:], 1)[0]
    assert late_slope(queue) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("successes,trials", [(0, 10), (1, 10), (5, 10), (10, 10), (2, 200), (0, 200)])
def test_binomial_interval_is_clopper_pearson(successes, trials):
    expected = stats.binomtest(successes, trials).proportion_ci(0.95, method="exact")
    low, high = binomial_interval(successes, trials)
    assert low == pytest.approx(expected.low, abs=1e-12)
    assert high == pytest.approx(expected.high, abs=1e-12)


def test_binomial_bounds_are_scipy_stats_beta_quantiles_bit_for_bit():
    """The published tables hold these bounds: computing them without
    scipy.stats must leave every bit as scipy.stats.beta.ppf gives it, over
    every count of trials up to 400 and beyond, at several levels."""
    for confidence in (0.8, 0.9, 0.95, 0.975, 0.99):
        tail = (1 - confidence) / 2
        for trials in [*range(1, 400), 1000, 4000, 9471]:
            successes = np.arange(trials + 1, dtype=np.float64)
            low, high = binomial_bounds(successes, np.full(successes.shape, trials), confidence)
            with np.errstate(invalid="ignore", divide="ignore"):
                expected_low = stats.beta.ppf(tail, successes[1:], trials - successes[1:] + 1)
                expected_high = stats.beta.ppf(1 - tail, successes[:-1] + 1, trials - successes[:-1])
            assert low[0] == 0.0 and high[-1] == 1.0
            assert np.array_equal(low[1:], expected_low), (confidence, trials)
            assert np.array_equal(high[:-1], expected_high), (confidence, trials)
    assert np.isnan(binomial_bounds(0, 0)[0]) and np.isnan(binomial_bounds(0, 0)[1])


def test_curve_summaries_count_stalled_runs_and_name_their_seeds(tmp_path):
    horizon = 100
    files = []
    for seed, tail in enumerate([0, 0, 40, 0, 12]):
        queue = np.full(horizon, 3)
        queue[-10:] += tail
        files.append(fabricate_run(tmp_path / f"seed{seed}.npz", queue, np.full(horizon, 3), seed=seed))
    runs = summarise_curves([curve_of("cqb_opt", files)], SummarySettings(stall_threshold=5.0))
    table = curve_summaries(runs)
    row = table.iloc[0]
    assert (row["n_runs"], row["n_stalled"], row["stalled_seeds"]) == (5, 2, "2 4")
    assert (row["stall_ci_low"], row["stall_ci_high"]) == pytest.approx(binomial_interval(2, 5))
    assert row["tail_regret_median"] == 0
    assert row["tail_regret_mean"] == pytest.approx((40 + 12) / 5)
    assert row["tail_regret_mean_converged"] == 0
    # the table survives a round trip through the TSV writer
    write_table(runs, tmp_path / "runs.tsv")
    back = read_runs_table(tmp_path / "runs.tsv")
    assert back["stalled"].tolist() == [False, False, True, False, True]


# ----------------------------------------------------------------- claim checks


def make_runs(values: dict, metric="tail_regret", sweep_param="", **fixed):
    """A runs table: {(policy, sweep_value): per-seed values of ``metric``}."""
    rows = []
    for (policy, sweep_value), per_seed in values.items():
        for seed, value in enumerate(per_seed):
            row = {"policy": policy, "sweep_param": sweep_param, "sweep_value": sweep_value,
                   "seed": seed, "final_regret": 0, "tail_regret": 0.0, "mean_regret": 0.0,
                   "early_regret": 0.0, "peak_round": 1, "peak_queue": 1, "final_queue": 0,
                   "late_slope": 0.0, "stalled": False, **fixed}
            row[metric] = value
            rows.append(row)
    return pd.DataFrame(rows)


def verdict(spec, runs):
    return evaluate_claims([spec], {spec.experiment: runs}).iloc[0]


def test_grows_holds_for_a_rising_queue_and_fails_for_a_falling_one():
    spec = ClaimSpec("lin", "Random grows", "grows", "e", ("random",))
    rising = make_runs({("random", ""): [0.1, 0.12, 0.09, 0.11]}, metric="late_slope")
    falling = make_runs({("random", ""): [-0.1, -0.12, -0.09, -0.11]}, metric="late_slope")
    noisy = make_runs({("random", ""): [-0.1, 0.12, -0.09, 0.11]}, metric="late_slope")
    assert verdict(spec, rising)["verdict"] == HOLDS
    assert verdict(spec, falling)["verdict"] == FAILS
    assert verdict(spec, noisy)["verdict"] == INCONCLUSIVE


def test_converges_needs_every_policy_below_the_threshold():
    spec = ClaimSpec("conv", "both converge", "converges", "e", ("a", "b"), threshold=1.0)
    good = make_runs({("a", ""): [0.1, 0.2, 0.0, 0.1], ("b", ""): [0.3, 0.1, 0.2, 0.2]})
    one_bad = make_runs({("a", ""): [0.1, 0.2, 0.0, 0.1], ("b", ""): [30, 20, 25, 40]})
    row = verdict(spec, good)
    assert row["verdict"] == HOLDS and row["n_seeds"] == 4
    assert row["value"] == pytest.approx(0.2)  # the policy nearest to failing is reported
    assert verdict(spec, one_bad)["verdict"] == FAILS


def test_ordered_is_a_paired_sign_test_along_the_sweep():
    seeds = 12
    rng = np.random.default_rng(0)
    base = rng.normal(size=seeds)
    increasing = {("p", str(k)): base + k for k in (3, 5, 7)}
    spec = ClaimSpec("K", "larger K slower", "ordered", "e", ("p",), metric="early_regret")
    runs = make_runs(increasing, metric="early_regret", sweep_param="n_servers")
    row = verdict(spec, runs)
    assert row["verdict"] == HOLDS and row["value"] == 1.0
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(binomial_interval(seeds, seeds))
    decreasing = ClaimSpec("K", "x", "ordered", "e", ("p",), metric="early_regret", direction="decreasing")
    assert verdict(decreasing, runs)["verdict"] == FAILS
    # sweep values are ordered as numbers, not as text ("10" after "5")
    text_order = make_runs({("p", "5"): base, ("p", "10"): base + 1}, metric="early_regret")
    assert verdict(spec, text_order)["verdict"] == HOLDS


def test_best_compares_paired_differences_with_every_non_oracle_policy():
    spec = ClaimSpec("best", "eps best", "best", "e", ("cqb_eps",), metric="mean_regret")
    values = {("cqb_eps", ""): [1.0, 2.0, 1.5, 1.2, 0.8, 1.1],
              ("cqb_opt", ""): [2.0, 3.1, 2.4, 2.0, 1.9, 2.2],
              ("oracle", ""): [0.0] * 6}
    assert verdict(spec, make_runs(values, metric="mean_regret"))["verdict"] == HOLDS
    values[("cqb_ts", "")] = [0.2, 0.5, 0.3, 0.1, 0.2, 0.4]
    row = verdict(spec, make_runs(values, metric="mean_regret"))
    assert row["verdict"] == FAILS and "cqb_ts" in row["statistic"]
    values[("cqb_ts", "")] = [2.0, 1.0, 2.5, 0.2, 1.8, 0.1]
    assert verdict(spec, make_runs(values, metric="mean_regret"))["verdict"] == INCONCLUSIVE


def test_stall_rate_reports_the_count_and_the_seeds():
    runs = make_runs({("a", ""): [0] * 10, ("b", ""): [0] * 10})
    runs.loc[(runs["policy"] == "b") & (runs["seed"] == 7), "stalled"] = True
    spec = ClaimSpec("stall", "few stalls", "stall_rate", "e", ("a", "b"), threshold=0.01)
    row = verdict(spec, runs)
    # 1/10: exact interval [0.0025, 0.445] straddles 1 %: the interval decides, not the observed share
    assert row["verdict"] == INCONCLUSIVE and row["value"] == pytest.approx(0.1)
    assert "b: 1/10" in row["detail"] and "stalled seeds: 7" in row["detail"]
    assert row["ci_high"] == pytest.approx(binomial_interval(1, 10)[1])
    # holds only when the upper end is at most the threshold (0.445 ≤ 0.45; not ≤ 0.44)
    assert verdict(ClaimSpec("s", "x", "stall_rate", "e", ("a", "b"), threshold=0.45), runs)["verdict"] == HOLDS
    assert verdict(ClaimSpec("s", "x", "stall_rate", "e", ("a", "b"), threshold=0.44), runs)["verdict"] == INCONCLUSIVE
    runs.loc[(runs["policy"] == "b") & (runs["seed"] < 6), "stalled"] = True  # 7/10: lower end 0.35
    assert verdict(ClaimSpec("s", "x", "stall_rate", "e", ("a", "b"), threshold=0.3), runs)["verdict"] == FAILS


def test_drops_measures_the_fall_from_the_peak():
    runs = make_runs({("p", ""): [0] * 5})
    runs["peak_queue"], runs["final_queue"] = 100, [5, 10, 2, 8, 0]
    spec = ClaimSpec("drop", "sharp drop", "drops", "e", ("p",), threshold=0.5)
    row = verdict(spec, runs)
    assert row["verdict"] == HOLDS and row["value"] == pytest.approx(1 - 25 / 500)


def test_bootstrap_interval_is_reproducible_and_covers_the_mean():
    values = np.random.default_rng(1).normal(3.0, 1.0, size=50)
    low, high = bootstrap_mean_interval(values)
    assert (low, high) == bootstrap_mean_interval(values)
    assert low < values.mean() < high
    half = stats.t.ppf(0.975, 49) * values.std(ddof=1) / math.sqrt(50)
    assert high - low == pytest.approx(2 * half, rel=0.15)


def test_claim_errors_name_the_claim_and_the_missing_runs():
    with pytest.raises(ValueError, match="'c'.*kind"):
        ClaimSpec("c", "x", "better", "e")
    runs = make_runs({("a", ""): [0.0, 0.1]})
    with pytest.raises(ValueError, match="'c'.*no runs of zz"):
        evaluate_claims([ClaimSpec("c", "x", "converges", "e", ("zz",))], {"e": runs})
    with pytest.raises(ValueError, match="no run table for experiment 'f'"):
        evaluate_claims([ClaimSpec("c", "x", "converges", "f", ("a",))], {"e": runs})


def test_markdown_table_has_one_row_per_claim():
    runs = make_runs({("a", ""): [0.0, 0.1, 0.2]})
    table = evaluate_claims([ClaimSpec("c1", "A converges", "converges", "e", ("a",), threshold=1.0),
                             ClaimSpec("c2", "A grows", "grows", "e", ("a",))], {"e": runs})
    text = claims_markdown(table)
    assert text.count("\n| A ") == 2 and "**holds**" in text


def test_instance_statistics_per_sweep_value_from_run_metadata(tmp_path):
    from cqb.sim.runfile import save_run
    from cqb.sim.simulate import RunResult
    from cqb.analysis.summaries import instance_statistics

    curves = []
    for slack, norms in (("0.1", (1.5, 1.7)), ("0.15", (1.9, 2.0))):
        files = []
        for seed, norm in enumerate(norms):
            path = tmp_path / slack / f"seed{seed}.npz"
            queue = np.zeros(20, dtype=np.int64)
            save_run(path, RunResult(queue, queue, np.full(20, np.nan), np.zeros(20, bool),
                                     {"seed": seed, "instance": {"theta_redraws": seed * 3,
                                                                 "theta_max_norm": norm,
                                                                 "accept_rate": 0.01 * (seed + 1),
                                                                 "measured_slack": 0.1}}))
            files.append(path)
        curves.append(curve_of("cqb_eps", files, "slack", slack))
    stats_table = instance_statistics(summarise_curves(curves))
    assert stats_table["sweep_value"].tolist() == ["0.1", "0.15"]
    assert stats_table["theta_redraws_max"].tolist() == [3, 3]
    assert stats_table["theta_max_norm_min"].tolist() == [1.5, 1.9]
    assert stats_table["accept_rate_max"].tolist() == [0.02, 0.02]


def test_converges_is_checked_at_every_sweep_value():
    runs = make_runs({("cqb_opt", "3"): [2.0, 3.0, 2.5, 2.2], ("cqb_opt", "5"): [0.1, 0.0, 0.2, 0.1]},
                     sweep_param="dim")
    spec = ClaimSpec("d", "converges", "converges", "e", ("cqb_opt",), threshold=1.0)
    row = verdict(spec, runs)
    assert row["verdict"] == FAILS and "dim = 3" in row["detail"] and "dim = 5" in row["detail"]
    only_five = ClaimSpec("d", "converges", "converges", "e", ("cqb_opt",), threshold=1.0, sweep_values=("5",))
    assert verdict(only_five, runs)["verdict"] == HOLDS


def test_tail_window_stays_inside_the_final_phase():
    from cqb.analysis.summaries import final_phase_start, tail_length

    assert tail_length(1000, 0.1) == 100
    assert tail_length(1000, 0.1, final_phase_start=950) == 50  # only rounds after the cutoff
    assert tail_length(1000, 0.1, final_phase_start=500) == 100  # the cutoff is further back
    assert tail_length(1000, 0.1, final_phase_start=1000) == 100  # no final phase inside the run
    queue = np.concatenate([np.full(950, 9), np.full(50, 1)])
    settings = SummarySettings(tail_fraction=0.1, stall_threshold=5.0)
    assert run_summary(queue, np.zeros(1000, int), settings)["tail_regret"] == pytest.approx(0.5 * 9 + 0.5)
    assert run_summary(queue, np.zeros(1000, int), settings, final_phase_start=950)["tail_regret"] == 1.0
    assert final_phase_start({"policy_params": {"cutoff": 4148, "tau": 444}}) == 4148
    assert final_phase_start({"policy_params": {"tau": 444}}) is None
    assert final_phase_start({}) is None
