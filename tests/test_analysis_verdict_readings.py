"""The registry's statistics: time to the optimal level, the skew-corrected
interval, two-level verdicts, "not testable", readings and their marks, the
calibration study and the seed bookkeeping."""

import math

import numpy as np
import pandas as pd
import pytest

from conftest import REPO
from cqb.analysis.calibration import Shape, calibrate, null_values, simulate_procedure
from cqb.analysis.claims.tables import BY_CONSTRUCTION, READING_DEPENDENT, ROBUST, reading_mark, reading_rows
from cqb.analysis.verdict_rules import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, TIE, combine, two_level_verdict
from cqb.analysis.claims.registry import ClaimSpec, Reading
from cqb.analysis.claims.kinds import check_claim
from cqb.analysis.claims.statistics import mean_interval
from cqb.analysis.summaries import time_to_optimal
from cqb.errors import ConfigError
from cqb.studies.claim_specs import check_seed_uses, registry_hash, retired_seeds


def runs_table(values: dict, metric: str, **fixed) -> pd.DataFrame:
    rows = []
    for (policy, sweep_value), per_seed in values.items():
        for seed, value in enumerate(per_seed):
            row = {"policy": policy, "sweep_param": "x" if sweep_value else "", "sweep_value": sweep_value,
                   "seed": seed, "horizon": 100, "final_regret": 0, "tail_regret": 0.0, "mean_regret": 0.0,
                   "peak_queue": 10, "final_queue": 1, "late_slope": 0.0, "stalled": False,
                   "censored": False, "explore_rounds": float("nan"), **fixed}
            row[metric] = value
            rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------- time to optimal


def test_time_to_optimal_is_the_round_after_the_last_trailing_mean_at_or_above_the_level():
    regret = np.array([5, 5, 0, 0, 0, 0], dtype=float)
    assert time_to_optimal(regret, 1.0, 2) == (4, False)  # trailing means 5, 5, 2.5, 0, 0, 0
    assert time_to_optimal(regret, 1.0, 1) == (3, False)
    assert time_to_optimal(np.array([0, 0, 0, 3.0]), 1.0, 1) == (5, True)  # censored: T + 1
    assert time_to_optimal(np.zeros(4), 1.0, 2) == (1, False)
    # a trailing mean equal to the level is not below it
    assert time_to_optimal(np.array([1.0, 1.0, 0.0]), 1.0, 1) == (3, False)


# ------------------------------------------------------------------- intervals


def test_skew_corrected_interval_leans_with_the_skew_and_is_the_t_interval_without_it():
    from scipy import stats

    symmetric = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    low, high = mean_interval(symmetric, 0.95)
    half = stats.t.ppf(0.975, 4) * symmetric.std(ddof=1) / math.sqrt(5)
    assert (low, high) == pytest.approx((-half, half))
    skewed = np.array([0.1, 0.2, 0.1, 0.3, 0.2, 5.0, 0.1, 0.2])
    low, high = mean_interval(skewed, 0.95)
    assert high - skewed.mean() > skewed.mean() - low > 0
    assert mean_interval(np.full(5, 2.0)) == (2.0, 2.0)


def test_skew_corrected_interval_covers_exponential_means_better_than_t():
    from scipy import stats

    from cqb.analysis.claims.statistics import skew_corrected_bounds

    rng = np.random.default_rng(5)
    samples = rng.exponential(1.0, (20000, 20))
    low, high = skew_corrected_bounds(samples, 0.95)
    miss_high = np.mean(high < 1.0)
    m, s = samples.mean(axis=1), samples.std(axis=1, ddof=1)
    t_miss_high = np.mean(m + stats.t.ppf(0.975, 19) * s / math.sqrt(20) < 1.0)
    assert miss_high < 0.6 * t_miss_high and miss_high < 0.05  # nominal 0.025 a side


# -------------------------------------------------------------------- verdicts


def test_does_not_hold_needs_the_wider_bonferroni_interval_on_the_wrong_side():
    assert two_level_verdict(HOLDS, HOLDS) == HOLDS
    assert two_level_verdict(FAILS, FAILS) == FAILS
    assert two_level_verdict(FAILS, INCONCLUSIVE) == INCONCLUSIVE
    assert two_level_verdict(TIE, INCONCLUSIVE) == TIE


def test_a_borderline_failure_counts_for_one_comparison_but_not_among_six():
    rng = np.random.default_rng(2)
    base = rng.normal(0, 1, 40)
    difference = (base - base.mean()) / base.std(ddof=1) - 0.38  # t ≈ −2.4: below 0 at 95 %, not at 1 − 0.05/6
    values = {("claimed", ""): np.zeros(40)}
    values[("other0", "")] = difference
    one = ClaimSpec("b", "claimed is best", "best", "e", ("claimed",), metric="mean_regret")
    assert check_claim(runs_table(values, "mean_regret"), one).verdict == FAILS
    for k in range(1, 6):
        values[(f"other{k}", "")] = np.full(40, 10.0) + rng.normal(0, 0.1, 40)
    assert check_claim(runs_table(values, "mean_regret"), one).verdict == INCONCLUSIVE


def test_not_testable_comparisons_are_left_out_and_never_fail():
    assert combine([NOT_TESTABLE, HOLDS]) == HOLDS
    assert combine([NOT_TESTABLE, NOT_TESTABLE]) == NOT_TESTABLE
    spec = ClaimSpec("d", "drops", "drops", "e", ("eps",), threshold=0.5, testable="exploration_half")
    runs = pd.concat([runs_table({("eps", "0.05"): [9, 10, 9, 10, 9]}, "final_queue", peak_queue=10,
                                 explore_rounds=97.0),
                      runs_table({("eps", "0.1"): [1, 2, 1, 2, 1]}, "final_queue", peak_queue=10,
                                 explore_rounds=9.0)])
    result = check_claim(runs, spec)
    verdicts = {c.key.split(" = ")[1]: c.verdict for c in result.comparisons}
    assert verdicts == {"0.05": NOT_TESTABLE, "0.1": HOLDS} and result.verdict == HOLDS
    every = check_claim(runs, ClaimSpec("d", "drops", "drops", "e", ("eps",), threshold=0.5))
    assert every.verdict == FAILS  # the same data read at every ϵ


def test_time_to_optimal_pairs_censored_on_both_sides_are_not_testable():
    spec = ClaimSpec("o", "slower", "ordered", "e", ("p",), metric="time_to_optimal", direction="increasing")
    censored = runs_table({("p", "3"): [101] * 6, ("p", "5"): [101] * 6}, "time_to_optimal", censored=True)
    assert check_claim(censored, spec).verdict == NOT_TESTABLE
    slower = runs_table({("p", "3"): [10, 12, 9, 11, 10, 13], ("p", "5"): [101] * 6}, "time_to_optimal")
    slower.loc[slower["sweep_value"] == "5", "censored"] = True
    assert check_claim(slower, spec).comparisons[0].value == 1.0  # a censored run counts as slower


# -------------------------------------------------------------------- readings


def test_readings_are_evaluated_and_marked():
    spec = ClaimSpec("c", "converges", "converges", "e", ("p",), metric="tail_regret", threshold=1.0,
                     reading="tail", readings=(Reading("final", "the last round", (("metric", "final_regret"),)),))
    runs = runs_table({("p", ""): [0.1, 0.2, 0.1, 0.15, 0.2, 0.1]}, "tail_regret", final_regret=3)
    rows = reading_rows(spec, runs, {})
    assert [r["reading"] for r in rows] == ["tail", "final"] and rows[0]["primary"] and not rows[1]["primary"]
    assert [r["verdict"] for r in rows] == [HOLDS, FAILS]
    assert reading_mark(spec, [r["verdict"] for r in rows]) == READING_DEPENDENT
    assert reading_mark(spec, [HOLDS, HOLDS]) == ROBUST
    assert reading_mark(ClaimSpec("s", "x", "ordered", "e", ("p",), by_construction="τ"), [HOLDS]) == BY_CONSTRUCTION


def test_no_claim_is_marked_robust_by_readings_that_decide_nothing():
    from cqb.analysis.claims.tables import NO_ALTERNATIVE_READING, UNDECIDED_BY_READINGS, reading_agreement

    spec = ClaimSpec("c", "x", "ordered", "e", ("p",))
    assert reading_mark(spec, [INCONCLUSIVE, INCONCLUSIVE, INCONCLUSIVE]) == UNDECIDED_BY_READINGS  # dim_slower's
    assert reading_mark(spec, [HOLDS, INCONCLUSIVE, INCONCLUSIVE]) == UNDECIDED_BY_READINGS
    assert reading_agreement(spec, [HOLDS, HOLDS, INCONCLUSIVE]) == (ROBUST, 1, 2, [])
    assert reading_agreement(spec, [TIE, HOLDS]) == (READING_DEPENDENT, 1, 1, [1])
    assert reading_mark(spec, [HOLDS]) == NO_ALTERNATIVE_READING
    # the published readings: robust only where the primary and at least half the alternatives decide
    published = pd.read_csv(REPO / "docs" / "results" / "claims_readings.tsv", sep="\t", keep_default_na=False)
    for claim, group in published.groupby("claim"):
        primary = group[group["primary"].astype(str) == "True"].iloc[0]
        if primary["mark"] == ROBUST:
            assert primary["verdict"] in (HOLDS, FAILS, TIE), claim
            others = group[group["primary"].astype(str) != "True"]
            assert 2 * int(others["verdict"].isin((HOLDS, FAILS, TIE)).sum()) >= len(others) > 0, claim


def test_an_alternative_may_not_override_what_a_reading_is_not():
    with pytest.raises(ValueError, match="cannot override"):
        ClaimSpec("c", "x", "converges", "e", ("p",), readings=(Reading("r", "w", (("policies", ("q",)),)),))


# ----------------------------------------------------------------- calibration


def test_the_sequential_procedure_keeps_its_error_at_the_null_and_finds_a_clear_effect():
    rng = np.random.default_rng(11)
    values = rng.normal(0.3, 1.0, 50)
    shape = Shape("c", "converges", "p", values, 1.0, 0.0, False, 1)
    table = calibrate([shape], {"c": ((20, 40, 80, 160), 0.05)}, 2000, 3)
    null, effect = table.iloc[0], table.iloc[1]
    assert null["true_value"] == pytest.approx(1.0)
    assert null["type1_error"] <= 0.05 + 2 * null["type1_se"] and null["type1_ok"]
    assert effect["expected"] == HOLDS and effect["power"] > 0.9


def test_calibration_power_counts_every_verdict_true_of_the_effect():
    """At a share of 0.443 against 1/2 with δ = 0.15 (the confirmatory study's
    CQB-Opt 10 → 20), a tie and "does not hold" are both true: the power is
    their sum, as the power analysis that set N counts it."""
    signs = np.array([1.0] * 62 + [-1.0] * 78 + [0.0] * 20)  # 62 of 140 signed pairs moved
    shape = Shape("c", "ordered", "p", signs, 0.5, 0.15, True, 2)
    effect = calibrate([shape], {"c": ((217,), 0.05)}, 2000, 3).iloc[1]
    assert effect["expected"] == f"{FAILS} or {TIE}"
    assert effect["power"] == pytest.approx(effect["does_not_hold"] + effect["tie"])
    assert effect["does_not_hold"] > 0.05 and effect["tie"] > 0.05  # both occur at this N


def test_the_size_is_judged_on_the_interval_the_verdict_used_and_beyond_delta_rarely_errs_at_its_edge():
    from cqb.analysis.calibration import edge_values, sequential_procedure
    from cqb.analysis.summaries import binomial_interval
    from cqb.analysis.verdict_rules import BEYOND_MARGIN, WITHIN_NOT_EXCLUDED, procedure_levels, size_label

    shape = Shape("c", "ordered", "p", np.array([1.0] * 30 + [-1.0] * 70), 0.5, 0.15, True, 3)
    # rows of 200 signs moving the claimed way 25 % of the time, then 27.5 % (the Bonferroni interval
    # reaches into the band where the claim level's does not), 42 % (below 1/2 at the claim level only:
    # inconclusive, no size), 34, 40, 62, 70 %
    draws = np.array([[1.0] * k + [-1.0] * (200 - k) for k in (50, 55, 84, 68, 80, 124, 140)])
    verdict, used, size = sequential_procedure(shape, draws, (200,), 0.05, with_size=True)
    confidence, fail_confidence = procedure_levels(0.05, 1, 3)
    for row, got, label in zip(draws, verdict, size):
        k = int((row > 0).sum())
        level = fail_confidence if got == FAILS else confidence  # "does not hold": the Bonferroni interval
        expected = size_label(*binomial_interval(k, 200, level), 0.5, 0.15) if got in (HOLDS, FAILS) else ""
        assert label == expected, (k, got)
    assert list(verdict[:3]) == [FAILS, FAILS, INCONCLUSIVE] and list(size[:3]) == [BEYOND_MARGIN,
                                                                                    WITHIN_NOT_EXCLUDED, ""]
    # the edge: a true share of 0.35 (δ below 1/2, the observed side); "beyond δ" is then an error
    edge = edge_values(shape)
    assert (edge > 0).sum() / (edge != 0).sum() == pytest.approx(0.35)
    table = calibrate([shape], {"c": ((20, 40, 80, 160), 0.05)}, 4000, 5)
    row = table[table["scenario"] == "edge of δ"].iloc[0]
    assert row["beyond_delta_error"] <= 0.05 / 2 + 2 * row["beyond_delta_se"]
    assert table[table["scenario"] != "edge of δ"]["beyond_delta_error"].isna().all()
    # no margin, no edge scenario
    assert set(calibrate([Shape("d", "converges", "p", np.ones(20), 1.0, 0.0, False, 1)],
                         {"d": ((20,), 0.05)}, 100, 1)["scenario"]) == {"null", "effect"}


def test_calibration_shows_an_unsplit_alpha_exceeding_its_level():
    # the same data at one look per level α (no split): four looks at 95 % each
    rng = np.random.default_rng(4)
    values = rng.normal(0.0, 1.0, 200)
    shape = Shape("c", "grows", "p", values, 0.0, 0.0, True, 1)
    verdict, _ = simulate_procedure(shape, values - values.mean(), (20, 40, 80, 160), 0.2, 4000,
                                    np.random.default_rng(1))
    assert np.mean(verdict != INCONCLUSIVE) > 0.07  # α/K = 0.05 per look: the union exceeds 0.05


def test_the_typical_run_reading_is_calibrated_where_the_mean_reading_is_not():
    # runs shaped like the base instance: most end near 0 jobs, 2 % stall at ~80 jobs
    rng = np.random.default_rng(5)
    tail = np.where(rng.random(400) < 0.02, 80.0, rng.normal(0.2, 0.3, 400))
    runs = runs_table({("p", ""): list(tail)}, "tail_regret")
    from cqb.analysis.calibration import claim_shape
    typical = ClaimSpec(name="t", statement="", kind="typical_below", experiment="e", policies=("p",),
                        metric="tail_regret", threshold=1.0)
    shape = claim_shape(typical, runs, 0.0)
    assert shape.threshold == 0.5 and set(np.unique(shape.values)) <= {-1.0, 1.0}
    table = calibrate([shape], {"t": ((20, 40, 80, 160), 0.05)}, 2000, 3)
    null, effect = table.iloc[0], table.iloc[1]
    assert null["true_value"] == pytest.approx(0.5)
    assert null["type1_ok"] and effect["expected"] == HOLDS and effect["power"] > 0.9
    # the mean of the same runs moved onto 1 job: its "holds" is wrong far more often than α
    mean = Shape("m", "converges", "p", tail, 1.0, 0.0, False, 1)
    assert calibrate([mean], {"m": ((20, 40, 80, 160), 0.05)}, 2000, 3).iloc[0]["type1_error"] > 0.2


def test_null_values_sit_on_the_boundary():
    signs = Shape("o", "ordered", "p", np.array([1, 1, 1, -1, 0.0]), 0.5, 0.15, True, 1)
    centred = null_values(signs, None)
    assert (centred > 0).sum() == (centred < 0).sum() and (centred == 0).any()
    stall = Shape("s", "stall_rate", "p", np.zeros(10), 0.02, 0.0, False, 1)
    assert null_values(stall, None).mean() == pytest.approx(0.02)


# -------------------------------------------------------------------- seeds


def test_retired_seeds_are_refused_for_every_use():
    config = {"powered": {"retired_seeds": [[20000, 20009]]}}
    seeds = retired_seeds(config)
    assert seeds == set(range(20000, 20010))
    with pytest.raises(ConfigError, match="retired"):
        check_seed_uses({"retired powered seeds (seen)": seeds, "the powered claims": {20005}})
    with pytest.raises(ConfigError, match="first ≤ last"):
        retired_seeds({"powered": {"retired_seeds": [[5, 1]]}})


def test_the_registry_hash_changes_with_a_claim_and_not_with_a_figure():
    config = {"claims": [{"name": "a", "threshold": 1.0}], "figures": {"f": 1}}
    other = {"claims": [{"name": "a", "threshold": 0.9}], "figures": {"f": 1}}
    moved = {"claims": [{"name": "a", "threshold": 1.0}], "figures": {"f": 2}}
    assert registry_hash(config) != registry_hash(other) and registry_hash(config) == registry_hash(moved)
