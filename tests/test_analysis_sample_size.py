"""The confirmatory study's power analysis (cqb.analysis.sample_size): the exact
power of a sign-test comparison under the two-level verdict rule, checked
against simulating the rule; the sample size search; and the registration
(config.yaml's confirmatory block) against the analysis's output."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from conftest import REPO
from cqb.analysis.sample_size import Effect, claim_power, comparison_power, correct_verdicts, sample_size
from cqb.analysis.summaries import binomial_bounds
from cqb.analysis.verdict_rules import FAILS, HOLDS, TIE, comparison_verdicts, procedure_levels


def simulated_power(effect, seeds, alpha, margin, comparisons, replications=40000, seed=1):
    """The same power by simulating the study: signed pairs, moved pairs, the verdict rule."""
    rng = np.random.default_rng(seed)
    counted = rng.binomial(seeds, effect.signed, replications)
    moved = rng.binomial(counted, effect.share)
    confidence, fail_confidence = procedure_levels(alpha, 1, comparisons)
    verdicts = comparison_verdicts(*binomial_bounds(moved, counted, confidence),
                                   *binomial_bounds(moved, counted, fail_confidence), 0.5, margin, True)
    return np.isin(verdicts.astype(str), list(correct_verdicts(effect.share, margin))).mean()


def test_correct_verdicts_tell_a_tie_from_a_direction():
    assert correct_verdicts(0.443, 0.15) == {FAILS, TIE}
    assert correct_verdicts(0.607, 0.15) == {HOLDS, TIE}
    assert correct_verdicts(0.8, 0.15) == {HOLDS}
    assert correct_verdicts(0.5, 0.15) == {TIE}
    assert correct_verdicts(0.45, 0.0) == {FAILS}


@pytest.mark.parametrize("effect, seeds, comparisons", [
    (Effect("10→20", 62, 140, 160), 120, 2),
    (Effect("5→10", 82, 135, 160), 90, 2),
    (Effect("x", 30, 40, 40), 25, 1),
])
def test_exact_power_equals_the_simulated_study(effect, seeds, comparisons):
    exact = comparison_power(effect, [seeds], 0.05, 0.15, comparisons)[0]
    simulated = simulated_power(effect, seeds, 0.05, 0.15, comparisons)
    assert exact == pytest.approx(simulated, abs=4 * np.sqrt(0.25 / 40000))


def test_power_grows_with_the_seeds_and_the_sample_size_reaches_it():
    effect = Effect("10→20", 62, 140, 160)
    low, high = comparison_power(effect, [40, 200], 0.05, 0.15, 2)
    assert low < 0.6 < 0.85 < high
    n = sample_size([effect], 0.05, 0.15, 2, power=0.8, stay=10)
    powers = claim_power([effect], np.arange(n - 1, n + 11), 0.05, 0.15, 2)
    assert (powers[1:] >= 0.8).all()  # reached at n and the next 10 sizes
    assert sample_size([effect], 0.05, 0.15, 2, power=0.8, stay=10) < sample_size([effect], 0.05, 0.15, 2,
                                                                                     power=0.9, stay=10)
    with pytest.raises(ValueError, match="not reached"):
        sample_size([Effect("tiny", 51, 100, 100)], 0.05, 0.0, 1, power=0.9, max_seeds=300)


def test_a_claim_needs_every_comparison_powered():
    strong, weak = Effect("a", 90, 100, 100), Effect("b", 62, 140, 160)
    one = claim_power([weak], [150], 0.05, 0.15, 2)[0]
    both = claim_power([strong, weak], [150], 0.05, 0.15, 2)[0]
    assert both <= one and both == pytest.approx(one - (1 - comparison_power(strong, [150], 0.05, 0.15, 2)[0]))


def _same_to_rounding(left, right) -> bool:
    """Equal JSON trees, floats within 1e-12 relative (ints, strings, keys exact)."""
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same_to_rounding(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_same_to_rounding, left, right))
    if isinstance(left, float) and isinstance(right, float):
        return math.isclose(left, right, rel_tol=1e-12, abs_tol=0.0)
    return type(left) is type(right) and left == right


def test_same_to_rounding_tells_a_changed_count_from_a_last_bit():
    assert _same_to_rounding({"a": [0.1 + 0.2, {"n": 3}]}, {"a": [0.3, {"n": 3}]})
    assert not _same_to_rounding({"a": [0.3, {"n": 3}]}, {"a": [0.3, {"n": 4}]})
    assert not _same_to_rounding({"p": 0.9}, {"p": 0.9 + 1e-9})
    assert not _same_to_rounding({"n": 3}, {"n": 3.0})
    assert not _same_to_rounding({"a": 1}, {"a": 1, "b": 2})


def test_the_registration_is_the_power_analysis_output():
    from cqb.studies.confirmatory import POWER_FILE, registered_analysis

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    analyses = registered_analysis(config)
    assert analyses, "config.yaml registers a confirmatory study"
    recorded = json.loads((REPO / "config" / POWER_FILE).read_text())
    # the committed output is today's analysis: its counts exactly, its powers to their last bits,
    # which the machine's libm and SIMD paths can change (seen: 1 ulp on another CPU)
    assert _same_to_rounding(recorded, json.loads(json.dumps(analyses)))
    for entry in config["confirmatory"]["claims"]:
        analysis = analyses[f"{entry['name']}__{entry['policy']}"]
        assert entry["seeds"] == analysis["seeds"]  # not a hand-typed number
        assert analysis["claim_power_bound"] >= config["confirmatory"]["power"]
        assert entry["margin"] == config["claim_margins"]["ordered"]  # δ registered before the powered runs


def test_the_confirmatory_design_is_calibrated_and_its_power_is_the_simulated_procedures():
    # the registered design simulated whole (cqb.analysis.calibration) on CQB-Opt's d 10→20 signs at
    # the cap (62 slower, 78 faster, 20 both censored): type-I error ≤ α + 2 SE at the null, and the
    # share of correct verdicts (a tie or "does not hold") at the observed effect is the exact power
    from cqb.analysis.calibration import Shape, calibrate

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    entry = config["confirmatory"]["claims"][0]
    n, alpha, m = entry["seeds"], config["confirmatory"]["alpha"], len(entry["observed"])
    signs = np.array([1.0] * 62 + [-1.0] * 78 + [0.0] * 20)
    shape = Shape("confirmatory", "ordered", "cqb_opt 10→20", signs, 0.5, entry["margin"], True, m)
    table = calibrate([shape], {"confirmatory": ((n,), alpha)}, 4000, 7)
    null, effect = table.iloc[0], table.iloc[1]
    assert null["type1_ok"] and null["type1_error"] <= alpha + 2 * null["type1_se"]
    exact = comparison_power(Effect("10→20", 62, 140, 160), [n], alpha, entry["margin"], m)[0]
    assert effect["tie"] + effect["does_not_hold"] == pytest.approx(exact, abs=4 * np.sqrt(0.25 / 4000))


def test_the_confirmatory_power_on_todays_core_is_the_generated_file():
    # the registered N's power at the effects today's published powered reading reports at the cap
    # (the pilot's counts came from the core the study was registered on), and the per-policy
    # verdicts' combined error, the union bound over the powered design's α and the study's
    from cqb.studies.confirmatory import CURRENT_FILE, current_analysis

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    current = current_analysis(config, REPO)
    assert _same_to_rounding(json.loads((REPO / "config" / CURRENT_FILE).read_text()), json.loads(json.dumps(current)))
    assert current["per_policy_error_bound"] == config["powered"]["alpha"] + config["confirmatory"]["alpha"]
    entry = config["confirmatory"]["claims"][0]
    today = current[f"{entry['name']}__{entry['policy']}"]
    assert today["seeds"] == entry["seeds"]
    assert today["pilot"] == [f"{e['moved']}/{e['counted']} of {e['seeds']}" for e in entry["observed"]]


def _counted_power_from_scratch(p, max_counted, alpha, margin, comparisons, threshold=0.5, upward=True):
    """counted_power as written before its tables: each call's own bounds, no cache (the grid of
    (c, k) pairs it sums over is the same function's)."""
    from cqb.analysis.sample_size import moved_grid

    confidence, fail_confidence = procedure_levels(alpha, 1, comparisons)
    c, k = moved_grid(p, max_counted)
    verdicts = comparison_verdicts(*binomial_bounds(k, c, confidence), *binomial_bounds(k, c, fail_confidence),
                                   threshold, margin, upward)
    ok = np.isin(verdicts.astype(str), list(correct_verdicts(p, margin, threshold, upward))).astype(np.float64)
    from scipy.stats import binom

    return np.bincount(c, weights=binom.pmf(k, c, p) * ok, minlength=max_counted + 1)


def test_the_cached_power_tables_equal_a_computation_from_scratch_on_every_call():
    """counted_power's cache and its shared bounds tables against each call
    computed alone, bit for bit: calls in an order that reuses a table (the
    same level, other shares and sizes, another direction and threshold), and
    comparison_power's pmf in one call against one per N; a caller that writes
    into the returned array does not change the next call's."""
    from cqb.analysis.sample_size import counted_power

    calls = [(Effect("a", 30, 50, 60), 120, 0.05, 0.15, 2, None, 0.5, True),
             (Effect("b", 12, 40, 50), 80, 0.05, 0.15, 2, None, 0.5, True),  # the same levels, another share
             (Effect("a", 30, 50, 60), 200, 0.05, 0.15, 2, None, 0.5, True),  # a larger size after a smaller
             (Effect("a", 30, 50, 60), 60, 0.05, 0.15, 2, None, 0.5, True),  # a smaller after a larger
             (Effect("a", 30, 50, 60), 60, 0.05, 0.15, 2, 0.55, 0.5, True),  # a shrunken share
             (Effect("c", 3, 40, 50), 90, 0.1, 0.05, 3, None, 0.1, False),  # a bound below, another level
             (Effect("c", 3, 40, 50), 90, 0.1, 0.05, 3, None, 0.1, True),  # only the direction differs
             (Effect("a", 30, 50, 60), 120, 0.05, 0.15, 2, None, 0.5, True)]  # the first again, from the cache
    for effect, n, alpha, margin, comparisons, share, threshold, upward in calls:
        p = effect.share if share is None else share
        got = counted_power(effect, n, alpha, margin, comparisons, share, threshold, upward)
        assert np.array_equal(got, _counted_power_from_scratch(p, n, alpha, margin, comparisons, threshold, upward))
        got[:] = -1.0
    effect, seeds = Effect("a", 30, 50, 60), [3, 17, 60, 41]
    from scipy.stats import binom

    given = _counted_power_from_scratch(effect.share, 60, 0.05, 0.15, 2)
    alone = [float(np.dot(binom.pmf(np.arange(n + 1), n, effect.signed), given[:n + 1])) for n in seeds]
    assert comparison_power(effect, seeds, 0.05, 0.15, 2).tolist() == alone


def test_the_mean_powers_quantiles_in_one_call_are_those_of_one_call_per_size():
    """mean_power reads every N's t quantiles from one call; each power equals
    the one computed alone, bit for bit."""
    from cqb.analysis.sample_size import mean_power

    seeds = [2, 5, 30, 31, 400]
    together = mean_power(0.02, 0.1, seeds, 0.05, 0.01, 4)
    assert together.tolist() == [mean_power(0.02, 0.1, [n], 0.05, 0.01, 4)[0] for n in seeds]
