"""The claim kinds that read each sweep value against the first: within_reference
(an adversary against its i.i.d. control) and rate_bound (growth across the
horizon at most the policy's theorem rate)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cqb.analysis.claims.kinds import claim_kind
from cqb.analysis.claims.registry import ClaimSpec
from cqb.analysis.claims.statistics import _against_reference, reference_factor
from cqb.analysis.verdict_rules import FAILS, HOLDS
from test_analysis_claims_tables import make_runs, verdict

RNG = np.random.default_rng(5)


def noisy(centre, n=40, scale=0.2):
    return centre + scale * RNG.standard_normal(n)


def test_within_reference_holds_when_every_adversary_is_near_its_control():
    base = noisy(1.0)
    runs = make_runs({("cqb_opt", "synthetic"): base, ("cqb_opt", "subspace_shift"): base + 0.2,
                      ("cqb_opt", "deceptive_switch"): base + 0.1}, sweep_param="kind")
    spec = ClaimSpec("near", "near control", "within_reference", "e", ("cqb_opt",), threshold=1.0)
    assert verdict(spec, runs)["verdict"] == HOLDS


def test_within_reference_fails_when_one_adversary_exceeds_the_margin():
    base = noisy(1.0)
    runs = make_runs({("cqb_opt", "synthetic"): base, ("cqb_opt", "subspace_shift"): base + 3.0,
                      ("cqb_opt", "deceptive_switch"): base + 0.1}, sweep_param="kind")
    spec = ClaimSpec("near", "near control", "within_reference", "e", ("cqb_opt",), threshold=1.0)
    assert verdict(spec, runs)["verdict"] == FAILS
    comparisons, _, upward = _against_reference(runs, spec)
    assert not upward and [c.key for c in comparisons] == ["cqb_opt subspace_shift vs synthetic",
                                                           "cqb_opt deceptive_switch vs synthetic"]
    assert comparisons[0].value == pytest.approx(3.0)  # paired by seed: the base noise cancels


def test_the_first_sweep_value_is_the_reference_in_config_order():
    runs = make_runs({("p", "pool"): noisy(2.0), ("p", "sorted_pool"): noisy(2.0)}, sweep_param="kind")
    spec = ClaimSpec("x", "x", "within_reference", "e", ("p",), threshold=1.0)
    (comparison,), _, _ = _against_reference(runs, spec)
    assert comparison.units == (("p", "pool"), ("p", "sorted_pool"))


def test_rate_bound_scales_the_shortest_horizon_by_the_theorem_rate():
    spec = ClaimSpec("r", "log² growth", "rate_bound", "e", ("cqb_opt",))
    assert reference_factor(spec, "cqb_opt", "2000", "8000") == pytest.approx((math.log(8000) / math.log(2000)) ** 2)
    assert reference_factor(ClaimSpec("n", "n", "within_reference", "e", ("cqb_opt",)), "cqb_opt", "2000", "8000") == 1
    with pytest.raises(ValueError, match="states no theorem rate"):
        reference_factor(spec, "random", "2000", "8000")


def test_rate_bound_holds_under_log_squared_growth_and_fails_under_linear_growth():
    spec = ClaimSpec("r", "log² growth", "rate_bound", "e", ("cqb_opt",))
    factor = (math.log(8000) / math.log(2000)) ** 2
    start = noisy(1.0, scale=0.05)
    within = make_runs({("cqb_opt", "2000"): start, ("cqb_opt", "8000"): 0.8 * factor * start},
                       sweep_param="horizon")
    assert verdict(spec, within)["verdict"] == HOLDS
    linear = make_runs({("cqb_opt", "2000"): start, ("cqb_opt", "8000"): 4.0 * start}, sweep_param="horizon")
    assert 4.0 > factor and verdict(spec, linear)["verdict"] == FAILS


def test_rate_bound_needs_a_horizon_sweep():
    runs = make_runs({("cqb_opt", "0.1"): noisy(1.0), ("cqb_opt", "0.2"): noisy(1.0)}, sweep_param="slack")
    with pytest.raises(ValueError, match="needs a horizon sweep"):
        _against_reference(runs, ClaimSpec("r", "r", "rate_bound", "e", ("cqb_opt",)))


def test_the_calibrations_per_seed_values_are_the_checks_differences():
    base = noisy(1.0)
    runs = make_runs({("cqb_opt", "synthetic"): base, ("cqb_opt", "subspace_shift"): base + 0.5}, sweep_param="kind")
    spec = ClaimSpec("near", "near control", "within_reference", "e", ("cqb_opt",), threshold=1.0)
    (comparison,), _, _ = _against_reference(runs, spec)
    values = claim_kind("within_reference").seed_values(spec, runs, comparison)
    assert values.mean() == pytest.approx(comparison.value) and len(values) == comparison.n
