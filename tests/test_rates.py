"""cqb.rates: final regrets, per-horizon intervals and log–log slopes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cqb.rates import final_regret_rows, fit_rate, rate_tables, rates_figure_table, regret_summary


def exact_power_law(exponent, scale=50.0, horizons=(1000, 2000, 5000, 10000)):
    # every seed equal: no noise, the fit must return the exponent exactly
    return {h: np.full(5, scale * h ** exponent) for h in horizons}


@pytest.mark.parametrize("exponent", [-0.5, -0.25, 0.3])
def test_slope_of_exact_power_law_is_recovered(exponent):
    fit = fit_rate(exact_power_law(exponent), bootstrap=200)
    assert fit["slope"] == pytest.approx(exponent, abs=1e-10)
    # no noise: every bootstrap draw gives the same slope
    assert fit["ci_low"] == pytest.approx(exponent, abs=1e-10)
    assert fit["ci_high"] == pytest.approx(exponent, abs=1e-10)
    assert fit["horizons_dropped"] == []


def test_noisy_power_law_interval_contains_the_estimate():
    rng = np.random.default_rng(3)
    regrets = {h: 40 * h ** -0.5 * rng.lognormal(0, 0.3, size=30) for h in (1000, 3000, 10000, 30000)}
    fit = fit_rate(regrets, bootstrap=500)
    assert fit["ci_low"] <= fit["slope"] <= fit["ci_high"]
    assert fit["ci_low"] < -0.5 < fit["ci_high"]
    assert fit["bootstrap_kept"] == 500


def test_non_positive_means_are_dropped_and_reported():
    regrets = exact_power_law(-0.5)
    regrets[20000] = np.array([1.0, -1.0, 0.0])  # mean 0
    regrets[50000] = np.array([-1.0, 0.0, 0.0])  # mean < 0
    fit = fit_rate(regrets, bootstrap=200)
    assert fit["horizons_dropped"] == [20000, 50000]
    assert fit["horizons_used"] == [1000, 2000, 5000, 10000]
    assert fit["slope"] == pytest.approx(-0.5, abs=1e-10)


def test_fewer_than_two_positive_means_give_no_slope():
    fit = fit_rate({1000: np.array([1.0, 2.0]), 2000: np.array([0.0, 0.0])}, bootstrap=200)
    assert math.isnan(fit["slope"]) and math.isnan(fit["ci_low"])
    assert fit["horizons_dropped"] == [2000]


def test_summary_interval_is_a_t_interval_around_the_mean():
    values = np.array([0.0, 1.0, 2.0, 5.0, 2.0])
    (row,) = regret_summary({1000: values})
    assert row["n_seeds"] == 5 and row["mean"] == pytest.approx(2.0)
    assert row["ci_low"] <= row["mean"] <= row["ci_high"]
    half = 2.7764451051977987 * values.std(ddof=1) / math.sqrt(5)  # t(0.975, 4)
    assert row["ci_high"] - row["mean"] == pytest.approx(half)


def fake_runs(rng):
    for policy, exponent in (("cqb_opt", -0.5), ("cqb_eps", -0.25)):
        for horizon in (1000, 4000, 16000):
            for seed in range(8):
                oracle = int(rng.integers(0, 3))
                regret = int(rng.poisson(60 * horizon ** exponent))
                queue = np.zeros(horizon, dtype=np.int64)
                queue[-1] = oracle + regret
                oracle_queue = np.zeros(horizon, dtype=np.int64)
                oracle_queue[-1] = oracle
                yield policy, horizon, seed, {"queue": queue, "oracle_queue": oracle_queue}


def test_rate_tables_from_run_rows():
    rows = final_regret_rows(fake_runs(np.random.default_rng(0)))
    assert len(rows) == 2 * 3 * 8
    assert all(r["final_regret"] == r["final_queue"] - r["final_oracle"] for r in rows)
    summary, slopes = rate_tables(rows, bootstrap=300)
    assert list(summary["policy"].unique()) == ["cqb_opt", "cqb_eps"]  # input order kept
    assert len(summary) == 6 and (summary["n_seeds"] == 8).all()
    assert (summary["ci_low"] <= summary["mean"]).all() and (summary["mean"] <= summary["ci_high"]).all()
    np.testing.assert_allclose(summary["mean"], summary["mean_queue"] - summary["mean_oracle"])
    assert list(slopes["policy"]) == ["cqb_opt", "cqb_eps"]
    assert (slopes["ci_low"] <= slopes["slope"]).all() and (slopes["slope"] <= slopes["ci_high"]).all()
    # deterministic: the bootstrap has a fixed seed
    again = rate_tables(rows, bootstrap=300)[1]
    assert again.equals(slopes)
    table = rates_figure_table(summary, slopes)
    assert len(table) == 6 and {"slope", "slope_ci_low", "slope_ci_high", "in_fit"} <= set(table.columns)
    assert table["in_fit"].all()


def test_plot_rates_draws_with_dropped_horizons():
    from cqb.rates import plot_rates

    rows = final_regret_rows(fake_runs(np.random.default_rng(1)))
    rows += [{"policy": "cqb_eta2", "horizon": h, "seed": 0, "final_queue": 1, "final_oracle": 1,
              "final_regret": 0} for h in (1000, 4000, 16000)]
    summary, slopes = rate_tables(rows, bootstrap=100)
    figure = plot_rates(summary, slopes, {"cqb_opt": "CQB-Opt"})
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert any("no slope" in label for label in labels)
    assert sum(label.startswith("∝") for label in labels) == 3
