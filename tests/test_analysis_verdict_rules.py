"""One verdict rule for the claims, the powered reading and the calibration
study (cqb.analysis.verdict_rules): the calibration's verdicts and levels
equal the claims' on random draws, both equal the documented rule written out
here, and the calibration's simulated procedure stops at the look where the
powered reading stops on the same values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cqb.analysis.calibration as calibration
from cqb.analysis.calibration import Shape, sequential_procedure
from cqb.analysis.verdict_rules import FAILS, HOLDS, INCONCLUSIVE, TIE, fail_level, interval_verdict, two_level_verdict
from cqb.analysis.claims.registry import ClaimSpec
from cqb.analysis.claims.kinds import claim_comparisons
from cqb.analysis.powered_reading import PoweredClaim, evaluate_look
from cqb.analysis.verdict_rules import (BEYOND_MARGIN, NO_MARGIN, NO_SIZE, WITHIN_NOT_EXCLUDED, size_against_margin,
                                        size_label)

# ------------------------------------------------------- the rule, written out


def reference_interval_verdict(low, high, threshold, margin, upward):
    """docs/verdicts.md, "Verdicts" and "Tie within δ", as plain Python."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return INCONCLUSIVE
    if low > threshold:
        return HOLDS if upward else FAILS
    if high < threshold:
        return FAILS if upward else HOLDS
    if margin > 0 and threshold - margin < low and high < threshold + margin:
        return TIE
    return INCONCLUSIVE


def reference_comparison_verdict(narrow, wide, threshold, margin, upward):
    """docs/verdicts.md, "Combining comparisons": holds on the claim level's
    interval, does not hold on the Bonferroni level's, else a tie on the claim level's."""
    first = reference_interval_verdict(*narrow, threshold, margin, upward)
    second = reference_interval_verdict(*wide, threshold, margin, upward)
    if first == HOLDS:
        return HOLDS
    if second == FAILS:
        return FAILS
    return TIE if first == TIE else INCONCLUSIVE


# ------------------------------------------------------------ random draws

# interval ends placed around the threshold in units of the tie band (so that holds,
# fails, ties, straddles, nested and non-nested pairs all occur), exactly on the
# threshold or on ± δ, anywhere, or non-finite
OFFSET = st.one_of(st.sampled_from([-2.0, -1.0, -0.99, -0.5, -0.01, 0.0, 0.01, 0.5, 0.99, 1.0, 2.0]),
                   st.floats(-3.0, 3.0, allow_nan=False))
END = st.one_of(OFFSET.map(lambda u: ("band", u)), st.sampled_from([math.nan, math.inf, -math.inf]).map(
    lambda v: ("value", v)))


@st.composite
def designs(draw):
    threshold = draw(st.sampled_from([0.0, 0.5, 1.0, 0.02]) | st.floats(-1, 1.5, allow_nan=False))
    margin = draw(st.sampled_from([0.0, 0.0, 0.05, 0.15]) | st.floats(0, 0.5, allow_nan=False))
    unit = margin if margin > 0 else draw(st.sampled_from([0.05, 0.3]))

    def end(drawn):
        how, value = drawn
        return threshold + value * unit if how == "band" else value

    rows = draw(st.lists(st.tuples(END, END, END, END), min_size=1, max_size=40))
    return {"threshold": threshold, "margin": margin, "upward": draw(st.booleans()),
            "looks": draw(st.integers(1, 8)), "comparisons": draw(st.integers(1, 12)),
            "alpha": draw(st.sampled_from([0.05, 0.1, 0.01]) | st.floats(0.001, 0.3)),
            "rows": [tuple(end(e) for e in row) for row in rows]}


def calibration_verdicts_and_levels(monkeypatch, design):
    """The calibration's own sequential procedure (one look at the design's
    levels) on the drawn intervals: its look_intervals replaced by the draws,
    recording the levels the procedure asks for."""
    rows = np.array(design["rows"], dtype=np.float64)
    asked = []

    def drawn_intervals(shape, sample, confidence, fail_confidence):
        asked.append((confidence, fail_confidence))
        chosen = rows[sample[:, 0].astype(int)]  # each draw carries its row's index
        return chosen[:, 0], chosen[:, 1], chosen[:, 2], chosen[:, 3], shape.threshold

    monkeypatch.setattr(calibration, "look_intervals", drawn_intervals)
    shape = Shape("c", "best", "x", np.zeros(1), design["threshold"], design["margin"], design["upward"],
                  design["comparisons"])
    looks = tuple(range(1, design["looks"] + 1))
    draws = np.repeat(np.arange(len(rows), dtype=np.float64)[:, None], looks[-1], axis=1)
    verdict, used = sequential_procedure(shape, draws, looks, design["alpha"])
    return verdict, used, asked


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(design=designs())
def test_calibration_verdicts_and_levels_equal_the_claims_on_every_draw(monkeypatch, design):
    verdict, used, asked = calibration_verdicts_and_levels(monkeypatch, design)
    alpha, looks, m = design["alpha"], design["looks"], design["comparisons"]
    # the levels: every look the calibration asks for the powered reading's level and the claims' split
    claim = PoweredClaim(ClaimSpec("c", "", "best", "e", ("a",)), tuple(range(1, looks + 1)), 0, alpha, 0.0, ())
    assert asked and all(level == (claim.confidence, fail_level(claim.confidence, m)) for level in asked)
    assert claim.confidence == pytest.approx(1 - alpha / looks, abs=1e-15)
    assert fail_level(claim.confidence, m) == pytest.approx(1 - alpha / (looks * m), abs=1e-15)
    # the verdicts: at its first look (the draws are the same at every look) each row's
    # verdict is the claims' two-level verdict and the rule's as written
    t, margin, upward = design["threshold"], design["margin"], design["upward"]
    for row, got, n in zip(design["rows"], verdict, used):
        claims = two_level_verdict(interval_verdict(row[0], row[1], t, margin, upward),
                                   interval_verdict(row[2], row[3], t, margin, upward))
        assert got == claims == reference_comparison_verdict(row[:2], row[2:], t, margin, upward), row
        assert n == (1 if got != INCONCLUSIVE else looks)  # decided rows stop at the first look


def test_an_interval_on_the_wrong_side_inside_the_band_is_no_tie_in_the_calibration_either():
    # the calibration's former copy called this a tie; the claims call it inconclusive: the claim
    # level's interval lies below 0 inside ±δ, the Bonferroni level's reaches 0
    from cqb.analysis.verdict_rules import comparison_verdict, comparison_verdicts

    assert comparison_verdict(-0.0495, -0.025, -0.1, 0.0, 0.0, 0.05) == INCONCLUSIVE
    shape = Shape("c", "best", "x", np.zeros(1), 0.0, 0.05, True, 6)
    verdicts = comparison_verdicts(np.array([-0.0495]), np.array([-0.025]), np.array([-0.1]), np.array([0.0]),
                                   shape.threshold, shape.margin, shape.upward)
    assert list(verdicts) == [INCONCLUSIVE]


def test_the_tie_band_is_open_and_does_not_hold_needs_the_wide_interval():
    assert interval_verdict(0.35, 0.6, 0.5, 0.15) == INCONCLUSIVE  # touching −δ is not inside
    assert interval_verdict(0.36, 0.65, 0.5, 0.15) == INCONCLUSIVE  # touching +δ
    assert interval_verdict(0.36, 0.64, 0.5, 0.15) == TIE
    assert interval_verdict(0.5, 0.6, 0.5, 0.15) == TIE  # touching the threshold: undecided, inside the band
    assert two_level_verdict(FAILS, INCONCLUSIVE) == INCONCLUSIVE and two_level_verdict(INCONCLUSIVE, FAILS) == FAILS
    assert fail_level(0.95, 0) == fail_level(0.95, 1) == 0.95 and fail_level(1 - 0.05 / 4, 6) == 1 - 0.05 / 24


# ------------------------------------------------- the same look on the same values

FIRST = 500


def runs_of(kind, values, others):
    """A runs table on seeds FIRST, FIRST + 1, … whose comparison of interest
    has per-seed ``values`` as the calibration reads them, plus ``others``
    comparisons decided at the first look."""
    n = len(values)
    rows = []

    def add(policy, sweep, **columns):
        for i in range(n):
            row = {"policy": policy, "sweep_param": "d" if sweep else "", "sweep_value": sweep, "seed": FIRST + i,
                   "horizon": 100, "tail_regret": 0.0, "time_to_optimal": 50.0, "censored": False,
                   "stalled": False, "explore_rounds": math.nan, "late_slope": 0.0}
            row.update({k: (v[i] if isinstance(v, np.ndarray) else v) for k, v in columns.items()})
            rows.append(row)

    if kind == "best":  # other − claimed: the claimed policy at 0, the decisive other at the values
        add("a", "", tail_regret=np.zeros(n))
        add("b", "", tail_regret=np.asarray(values, dtype=float))
        for k in range(others):
            add(f"z{k}", "", tail_regret=np.full(n, 50.0) + np.arange(n) % 3)  # far worse: holds at once
    elif kind == "converges":
        add("p", "", tail_regret=np.asarray(values, dtype=float))
    elif kind == "ordered":  # signs: time to optimal at d = 3 against d = 5 (0: a tie)
        add("p", "3", time_to_optimal=np.full(n, 50.0))
        add("p", "5", time_to_optimal=50.0 + np.asarray(values, dtype=float))
        for k in range(others):  # later pairs: always slower, hold at once
            add("p", str(7 + 2 * k), time_to_optimal=np.full(n, 60.0 + 10 * k))
    elif kind == "typical_below":  # +1: below the threshold of 1 job
        add("p", "", tail_regret=np.where(np.asarray(values) > 0, 0.2, 3.0))
    else:  # stall_rate: 0/1 flags
        add("p", "", stalled=np.asarray(values) > 0)
    return pd.DataFrame(rows)


KIND_CASES = {
    "best": (ClaimSpec("c", "", "best", "e", ("a",)), 0.0, True, 0.05),
    "converges": (ClaimSpec("c", "", "converges", "e", ("p",), threshold=1.0), 1.0, False, 0.0),
    "ordered": (ClaimSpec("c", "", "ordered", "e", ("p",), metric="time_to_optimal"), 0.5, True, 0.15),
    "typical_below": (ClaimSpec("c", "", "typical_below", "e", ("p",), threshold=1.0), 0.5, True, 0.0),
    "stall_rate": (ClaimSpec("c", "", "stall_rate", "e", ("p",), threshold=0.2), 0.2, False, 0.0),
}


@st.composite
def procedures(draw):
    kind = draw(st.sampled_from(sorted(KIND_CASES)))
    looks = tuple(sorted(draw(st.sets(st.integers(4, 40), min_size=1, max_size=4))))
    cap = looks[-1]
    if kind in ("best", "converges"):
        centre = draw(st.sampled_from([0.0, 0.02, 0.3, 1.0, 0.8, 1.3, -0.3]))
        spread = draw(st.sampled_from([0.05, 0.3, 1.0]))
        values = draw(st.lists(st.floats(-3, 3, allow_nan=False), min_size=cap, max_size=cap))
        values = [centre + spread * v for v in values]
    elif kind in ("ordered", "typical_below"):
        values = draw(st.lists(st.sampled_from([1.0, -1.0] + ([0.0] if kind == "ordered" else [])),
                               min_size=cap, max_size=cap))
    else:  # stall flags at a rate of 0 to 1/2 (the threshold is 0.2)
        rate = draw(st.sampled_from([0.0, 0.05, 0.2, 0.5]))
        values = [float(u < rate) for u in draw(st.lists(st.floats(0, 1, exclude_max=True),
                                                               min_size=cap, max_size=cap))]
    others = draw(st.integers(0, 3)) if kind in ("best", "ordered") else 0
    return kind, looks, np.asarray(values, dtype=np.float64), others, draw(st.sampled_from([0.05, 0.2]))


@settings(max_examples=120, deadline=None)
@given(procedure=procedures())
def test_the_simulated_procedure_stops_where_the_powered_reading_stops(procedure):
    kind, looks, values, others, alpha = procedure
    spec, threshold, upward, margin = KIND_CASES[kind]
    runs = runs_of(kind, values, others)
    key = {"best": "b − a", "ordered": "p 3→5"}.get(kind)
    claim = PoweredClaim(spec, looks, FIRST, alpha, margin, ())
    m = len(claim_comparisons(runs, spec, claim.confidence, margin)[0])
    assert m == 1 + others
    state = None
    for look in range(len(looks)):
        state = evaluate_look(claim, look, runs, state)
        if not state["continue"]:
            break
    (record,) = [r for r in state["comparisons"] if key is None or r["key"] == key]
    shape = Shape("c", kind, record["key"], values, threshold, margin, upward, m)
    verdict, used = sequential_procedure(shape, values[None, :], looks, alpha)
    assert verdict[0] == record["verdict"]
    stopped_at = looks[record["decided_at"]] if record["decided_at"] is not None else looks[-1]
    assert used[0] == stopped_at
    # and at that look the calibration's statistic is the powered reading's interval
    low, high, *_ = calibration.look_intervals(shape, values[None, :stopped_at], claim.confidence,
                                               fail_level(claim.confidence, m))
    expected = (record["ci_low"], record["ci_high"])
    assert (low[0], high[0]) == pytest.approx(expected, rel=1e-12, abs=1e-12, nan_ok=True)


# ------------------------------------------------------- the size against δ


def reference_size(low, high, threshold, margin):
    """docs/verdicts.md, "Size against δ", as plain Python."""
    if not (math.isfinite(low) and math.isfinite(high)) or not (low > threshold or high < threshold):
        return NO_SIZE  # decides no side
    if margin <= 0:
        return NO_MARGIN
    if low > threshold:
        return BEYOND_MARGIN if low > threshold + margin else WITHIN_NOT_EXCLUDED
    return BEYOND_MARGIN if high < threshold - margin else WITHIN_NOT_EXCLUDED


@settings(max_examples=300, deadline=None)
@given(design=designs())
def test_the_size_against_the_margin_follows_the_rule_and_only_sizes_decided_intervals(design):
    t, margin, upward = design["threshold"], design["margin"], design["upward"]
    rows = np.array(design["rows"], dtype=np.float64)
    sizes = size_against_margin(rows[:, 0], rows[:, 1], t, margin, upward)
    for (low, high, *_), size in zip(design["rows"], sizes):
        assert size == reference_size(low, high, t, margin) == size_label(low, high, t, margin, not upward)
        verdict = interval_verdict(low, high, t, margin, upward)
        # a size only for an interval deciding a side; never for a tie or an inconclusive one
        assert (size != NO_SIZE) == (verdict in (HOLDS, FAILS)), (low, high, verdict, size)
        if size == BEYOND_MARGIN:  # no effect within δ of the threshold lies in the interval
            assert low > t + margin or high < t - margin


def test_the_size_band_is_open_like_the_tie_band():
    # servers_slower: 0.672 [0.509, 0.81] holds, but 0.509 lies inside 0.5 ± 0.15
    assert size_label(0.509, 0.81, 0.5, 0.15) == WITHIN_NOT_EXCLUDED
    assert size_label(0.65, 0.81, 0.5, 0.15) == WITHIN_NOT_EXCLUDED  # touching +δ
    assert size_label(0.651, 0.81, 0.5, 0.15) == BEYOND_MARGIN
    assert size_label(0.2, 0.35, 0.5, 0.15) == WITHIN_NOT_EXCLUDED  # touching −δ, below
    assert size_label(0.2, 0.349, 0.5, 0.15) == BEYOND_MARGIN
    assert size_label(0.36, 0.64, 0.5, 0.15) == NO_SIZE  # a tie keeps no size
    assert size_label(0.1, 0.2, 1.0, 0.0) == NO_MARGIN
    assert size_label(math.nan, 0.2, 1.0, 0.1) == NO_SIZE
