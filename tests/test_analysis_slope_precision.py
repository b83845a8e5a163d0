"""Figure 5's note on unresolved slopes (cqb.analysis.slope_precision.resolution_costs):
the seeds per T for ±0.15 from the runs' own variances, and their cost."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cqb.analysis.rates import rate_tables
from cqb.analysis.slope_precision import predicted_half_width, resolution_costs


def runs(policy_means, seeds=8, horizons=(1000, 4000, 16000), sd=0.5, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for policy, scale in policy_means.items():
        for horizon in horizons:
            mean = scale * (horizon / 1000) ** -0.5
            for s in range(seeds):
                value = mean * (1 + sd * rng.standard_normal()) if scale > 0 else rng.normal(0, 0.01)
                rows.append({"experiment": "e", "policy": policy, "horizon": horizon, "seed": s,
                             "tail_regret": value, "final_regret": value, "final_queue": 1.0,
                             "final_oracle": 0.0, "stalled": False})
    return pd.DataFrame(rows)


def test_unresolved_slope_gets_the_seeds_and_cpu_that_resolve_it():
    table = runs({"noisy": 1.0, "zero": 0.0}, seeds=6, sd=1.2)
    _, slopes = rate_tables(table, bootstrap=200)
    out = resolution_costs(table, slopes, 0.15, seconds_per_run=0.5, seconds_per_thousand_rounds=0.1,
                           affordable_cpu_seconds=10.0)
    noisy = out[out["policy"] == "noisy"].iloc[0]
    assert not noisy["verdict"].startswith("resolved")
    seeds = {int(h): int(n) for h, n in (part.split(":") for part in noisy["seeds_needed"].split())}
    assert all(n >= 6 for n in seeds.values()) and sum(n - 6 for n in seeds.values()) == noisy["extra_runs"]
    assert noisy["cpu_seconds_needed"] == pytest.approx(sum((n - 6) * (0.5 + 0.1 * h / 1000)
                                                            for h, n in seeds.items()))
    own = table[table["policy"] == "noisy"]
    pilot = {h: g["tail_regret"].to_numpy() for h, g in own.groupby("horizon") if h in seeds}
    scale = noisy["delta_half_width"] / noisy["half_width"]
    assert abs(scale - 1) > 0.02  # the fit's bootstrap and delta-method half-widths differ here
    # the seeds reach the target, and not far beyond it (the allocation is the least that does)
    assert 0.97 * 0.15 * scale <= predicted_half_width(pilot, seeds) <= 0.15 * scale + 1e-9
    assert noisy["affordable"] == "no" and "beyond the affordable 10 s" in noisy["resolve_note"]
    assert f"half-width {noisy['half_width']:.2f} reached" in noisy["resolve_note"]
    zero = out[out["policy"] == "zero"].iloc[0]
    assert "no slope can be fitted" in zero["resolve_note"] and not zero["seeds_needed"]


def test_resolved_slope_is_left_alone():
    table = runs({"clean": 1.0}, seeds=400, sd=0.05)
    _, slopes = rate_tables(table, bootstrap=200)
    out = resolution_costs(table, slopes)
    assert out.iloc[0]["verdict"].startswith("resolved") and out.iloc[0]["resolve_note"] == ""


# ---------------------------------------------------------------- a second stage (config second_stage)


def two_stages(first=6, second=20, sd=1.2):
    """The first stage's runs (stage 1, seeds 0–5) and a second stage's (stage 2, fresh seeds)."""
    table = runs({"noisy": 1.0}, seeds=first + second, sd=sd)
    table["stage"] = np.where(table["seed"] < first, 1, 2)
    table.loc[table["stage"] == 2, "seed"] += 130000 - first
    return table


def test_the_second_stages_runs_enter_the_slope_the_counts_and_the_note():
    table = two_stages()
    summary, slopes = rate_tables(table, bootstrap=200)
    fit = slopes.iloc[0]
    assert (fit["n_runs"], fit["n_runs_stage2"]) == (78, 60)
    assert summary["n_runs"].tolist() == [26, 26, 26] and summary["n_runs_stage2"].tolist() == [20, 20, 20]
    # the estimates pool both stages: as if the runs had no stage at all, unlike the first stage alone
    _, pooled = rate_tables(table.drop(columns="stage"), bootstrap=200)
    _, first = rate_tables(table[table["stage"] == 1], bootstrap=200)
    assert fit["slope"] == pooled.iloc[0]["slope"] != first.iloc[0]["slope"]
    out = resolution_costs(table, slopes, 0.15).iloc[0]
    assert not out["verdict"].startswith("resolved")  # still unresolved after the second stage
    seeds = {int(h): int(n) for h, n in (part.split(":") for part in out["seeds_needed"].split())}
    # from every run: never fewer than the 26 run per T, the runs to add counted beyond them
    assert min(seeds.values()) >= 26 and out["extra_runs"] == sum(n - 26 for n in seeds.values())
    own = table[table["policy"] == "noisy"]
    pilot = {h: g["tail_regret"].to_numpy() for h, g in own.groupby("horizon")}
    scale = out["delta_half_width"] / out["half_width"]
    assert 0.97 * 0.15 * scale <= predicted_half_width(pilot, seeds) <= 0.15 * scale + 1e-9
    assert out["resolve_note"].startswith(f"after a second stage of 60 runs, half-width {out['half_width']:.2f} "
                                          f"reached; ±0.15 needs {int(out['extra_runs'])} more runs")


def test_the_summary_counts_the_first_stage_per_panel_and_both_stages_per_policy():
    from cqb.figures.rates_plot import rates_summary_markdown

    table = two_stages()
    table = pd.concat([table, runs({"plain": 1.0}, seeds=6, sd=1.2).assign(stage=1)])
    summary, slopes = rate_tables(table, bootstrap=200)
    text = rates_summary_markdown(summary, resolution_costs(table, slopes), {"e": "the instance"}, {})
    assert "*the instance* (T = 1000–16000, 6 seeds per T):" in text
    (noisy,) = [line for line in text.splitlines() if line.startswith("- noisy:")]
    assert ("no run of 78 stalled (60 of them a second stage on fresh seeds; seeds per T 1000: 26, 4000: 26, "
            "16000: 26)") in noisy and "after a second stage of 60 runs" in noisy
    (plain,) = [line for line in text.splitlines() if line.startswith("- plain:")]
    assert "no run of 18 stalled" in plain and "second stage" not in plain


def test_power_table_predicts_a_second_stage_policy_at_both_stages_seeds():
    from cqb.analysis.slope_precision import configured_seeds, power_table

    config = {"experiments": {"e": {
        "seeds": 10, "seeds_by_horizon": {"1000": 30}, "sweep": {"horizon": [1000, 4000, 16000]},
        "policies": ["noisy", "plain"],
        "second_stage": {"first_seed": 130000, "total_seeds": {"noisy": {1000: 200, "4000": 50}}}}}}
    configured = configured_seeds(config, ["e"])
    assert configured == {"e": {1000: 30, 4000: 10, 16000: 10}, ("e", "noisy"): {1000: 200, 4000: 50, 16000: 10}}
    table = pd.concat([runs({"noisy": 1.0}, seeds=8), runs({"plain": 1.0}, seeds=8, seed=1)])
    rows = {row["policy"]: row for row in power_table(table, min_seeds=5, configured=configured).to_dict("records")}
    assert rows["noisy"]["seeds_configured"] == "1000:200 4000:50 16000:10"
    assert rows["plain"]["seeds_configured"] == "1000:30 4000:10 16000:10"
    pilot = {h: g["tail_regret"].to_numpy() for h, g in table[table["policy"] == "noisy"].groupby("horizon")}
    assert rows["noisy"]["predicted_half_width"] == pytest.approx(
        predicted_half_width(pilot, {1000: 200, 4000: 50, 16000: 10}))
