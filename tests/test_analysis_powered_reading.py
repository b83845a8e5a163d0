"""The powered reading (cqb.powered), the tie-within-δ verdict and the powered
tuning's two stages (cqb.tuning), on tables of known content."""

import numpy as np
import pandas as pd
import pytest

from cqb.analysis.verdict_rules import FAILS, HOLDS, INCONCLUSIVE, TIE, combine, interval_verdict
from cqb.analysis.claims.registry import ClaimSpec
from cqb.analysis.summaries import binomial_interval
from cqb.analysis.claims.statistics import bootstrap_mean_interval, mean_interval
from cqb.errors import ConfigError
from cqb.analysis.powered_reading import PoweredClaim, evaluate_look, look_counts, powered_row, unit_key
from cqb.analysis.tuning import contenders, stage2_choices, tuning_table
from cqb.studies.claim_specs import check_seed_uses

FIRST = 20000


def runs_table(values: dict, metric="mean_regret", first=FIRST):
    """{(policy, sweep value): per-seed values} → a runs table on seeds first, first + 1, …"""
    rows = []
    for (policy, sweep_value), per_seed in values.items():
        for index, value in enumerate(per_seed):
            rows.append({"policy": policy, "sweep_param": "slack" if sweep_value else "",
                         "sweep_value": sweep_value, "seed": first + index, "mean_regret": 0.0,
                         "tail_regret": 0.0, "early_regret": 0.0, "late_slope": 0.0, "peak_queue": 1,
                         "final_queue": 0, "peak_round": 1, "stalled": False, metric: value})
    return pd.DataFrame(rows)


def best_claim(others, looks=(4, 8), margin=0.0, alpha=0.05):
    spec = ClaimSpec("best", "a is best", "best", "e", ("a",), metric="mean_regret")
    units = (("a", ""),) + tuple((o, "") for o in others)
    return PoweredClaim(spec, tuple(looks), FIRST, alpha, margin, units)


# ----------------------------------------------------------------- tie within δ


def test_interval_verdict_tie_only_when_straddling_inside_the_margin():
    assert interval_verdict(-0.02, 0.03, 0.0, margin=0.05) == TIE
    assert interval_verdict(-0.02, 0.06, 0.0, margin=0.05) == INCONCLUSIVE  # reaches past +δ
    assert interval_verdict(-0.06, 0.03, 0.0, margin=0.05) == INCONCLUSIVE  # reaches past −δ
    assert interval_verdict(0.01, 0.03, 0.0, margin=0.05) == HOLDS  # one side: the sign is decided
    assert interval_verdict(-0.03, -0.01, 0.0, margin=0.05) == FAILS
    assert interval_verdict(-0.02, 0.03, 0.0, margin=0.0) == INCONCLUSIVE  # δ = 0: no ties
    # around a threshold other than 0 (the sign test's 1/2), and for a claim that wants values below
    assert interval_verdict(0.4, 0.6, 0.5, margin=0.15) == TIE
    assert interval_verdict(0.2, 0.4, 0.5, margin=0.15, upward=False) == HOLDS


def test_combine_ties_with_holds_but_not_with_inconclusive():
    assert combine([HOLDS, HOLDS]) == HOLDS
    assert combine([HOLDS, TIE]) == TIE
    assert combine([TIE, TIE]) == TIE
    assert combine([TIE, INCONCLUSIVE]) == INCONCLUSIVE
    assert combine([TIE, FAILS, HOLDS]) == FAILS


# ----------------------------------------------------------------- the looks


def test_level_is_alpha_split_evenly_over_the_looks():
    claim = best_claim(["b"], looks=(20, 40, 80, 160))
    assert claim.confidence == pytest.approx(1 - 0.05 / 4)
    assert best_claim(["b"], looks=(400,)).confidence == pytest.approx(0.95)


def test_a_look_reads_exactly_its_first_n_seeds_at_its_level():
    rng = np.random.default_rng(1)
    a = rng.normal(0, 1, 8)
    b = a + 1.0 + rng.normal(0, 0.3, 8)
    b[4:] = a[4:] - 50  # seeds after the first look would reverse the verdict
    claim = best_claim(["b"], looks=(4, 8))
    state = evaluate_look(claim, 0, runs_table({("a", ""): a, ("b", ""): b}), None)
    (comparison,) = state["comparisons"]
    assert comparison["n"] == 4 and state["n"] == 4
    low, high = mean_interval(b[:4] - a[:4], claim.confidence)
    assert (comparison["ci_low"], comparison["ci_high"]) == pytest.approx((low, high))
    assert comparison["value"] == pytest.approx((b[:4] - a[:4]).mean())


def test_decided_comparisons_keep_their_look_and_only_undecided_units_are_requested():
    rng = np.random.default_rng(2)
    a = rng.normal(0, 1, 8)
    values = {("a", ""): a, ("b", ""): a + 10 + rng.normal(0, 0.1, 8),  # far worse: decided at look 0
              ("c", ""): a + rng.normal(0, 1, 8)}  # undecided
    claim = best_claim(["b", "c"], looks=(4, 8))
    first = evaluate_look(claim, 0, runs_table(values), None)
    decided = {c["key"]: c["decided_at"] for c in first["comparisons"]}
    assert decided == {"b − a": 0, "c − a": None}
    assert first["continue"] and first["pending"] == [unit_key(("a", "")), unit_key(("c", ""))]
    counts = look_counts(claim, 1, first)
    assert counts == {"a@": 8, "b@": 4, "c@": 8}  # b is not simulated again
    # the second look sees b on 4 seeds only (as requested) and keeps its first verdict
    table = runs_table(values)
    table = table[(table["policy"] != "b") | (table["seed"] < FIRST + 4)]
    second = evaluate_look(claim, 1, table, first)
    by_key = {c["key"]: c for c in second["comparisons"]}
    assert by_key["b − a"] == first["comparisons"][0]
    assert by_key["c − a"]["n"] == 8
    assert not second["continue"]  # the cap
    row = powered_row(claim, second)
    assert row["n_seeds"] == 8 and row["cap"] == 8 and row["n_runs"] == 20
    assert row["looks"].startswith("4: 1/2 decided") and "8: " in row["looks"]


def test_claim_stops_when_every_comparison_is_decided():
    a = np.zeros(8)
    claim = best_claim(["b"], looks=(4, 8))
    state = evaluate_look(claim, 0, runs_table({("a", ""): a, ("b", ""): a + np.arange(5, 13)}), None)
    assert state["verdict"] == HOLDS and not state["continue"] and state["pending"] == []
    with pytest.raises(ValueError, match="stopped"):
        evaluate_look(claim, 1, runs_table({("a", ""): a, ("b", ""): a + 1}), state)


def test_a_tie_within_the_margin_stops_the_claim():
    rng = np.random.default_rng(3)
    a = rng.normal(0, 1, 40)
    values = {("a", ""): a, ("b", ""): a + rng.normal(0, 0.01, 40)}
    claim = best_claim(["b"], looks=(40, 80), margin=0.05)
    state = evaluate_look(claim, 0, runs_table(values), None)
    assert state["verdict"] == TIE and not state["continue"]
    no_margin = evaluate_look(best_claim(["b"], looks=(40, 80)), 0, runs_table(values), None)
    assert no_margin["verdict"] == INCONCLUSIVE and no_margin["continue"]


def test_inconclusive_at_the_cap_states_what_it_excludes():
    rng = np.random.default_rng(4)
    a = rng.normal(0, 1, 6)
    claim = best_claim(["b"], looks=(6,))
    state = evaluate_look(claim, 0, runs_table({("a", ""): a, ("b", ""): a + rng.normal(0, 1, 6)}), None)
    assert state["verdict"] == INCONCLUSIVE
    row = powered_row(claim, state)
    low, high = state["comparisons"][0]["ci_low"], state["comparisons"][0]["ci_high"]
    assert row["excluded"] == f"effects excluded at 95%: b − a: below {low:.3g} and above {high:.3g}"


def test_ordered_claim_requests_only_the_sweep_values_of_its_undecided_pairs():
    spec = ClaimSpec("ord", "decreasing", "ordered", "e", ("p",), metric="mean_regret", direction="decreasing")
    claim = PoweredClaim(spec, (10, 20), FIRST, 0.05, 0.0, (("p", "0.05"), ("p", "0.1"), ("p", "0.15")))
    rng = np.random.default_rng(5)
    low = rng.normal(10, 1, 10)
    values = {("p", "0.05"): low, ("p", "0.1"): low - 5, ("p", "0.15"): low - 5 + rng.normal(0, 1, 10)}
    state = evaluate_look(claim, 0, runs_table(values), None)
    verdicts = {c["key"]: c["verdict"] for c in state["comparisons"]}
    assert verdicts["p 0.05→0.1"] == HOLDS and verdicts["p 0.1→0.15"] == INCONCLUSIVE
    low_n, high_n = binomial_interval(10, 10, claim.confidence)
    assert state["comparisons"][0]["ci_low"] == pytest.approx(low_n)
    assert state["pending"] == ["p@0.1", "p@0.15"]


# ----------------------------------------------------------------- seeds


def test_seed_uses_must_be_disjoint():
    check_seed_uses({"evaluation": set(range(10)), "tuning": set(range(1000, 1030)), "powered": {20000}})
    with pytest.raises(ConfigError, match="powered.*shared with tuning"):
        check_seed_uses({"evaluation": set(range(10)), "tuning": set(range(1000, 1030)), "powered": {1005}})


# ----------------------------------------------------------------- powered tuning


def tuning_runs(spec, seeds):
    """spec: {(policy, value): (stalled seeds count, mean regret)} → a tuning runs table."""
    rows = []
    for (policy, value), (stalls, regret) in spec.items():
        for index in range(seeds):
            rows.append({"policy": f"{policy}.c{value}", "sweep_param": "c", "sweep_value": value, "seed": index,
                         "stalled": index < stalls, "mean_regret": regret,
                         "tail_regret": 0.0})
    return pd.DataFrame(rows)


def test_contenders_are_the_lowest_regrets_among_values_not_shown_to_stall_too_often():
    runs = tuning_runs({("p", "0.01"): (5, 0.1),  # lower bound of 5/30 ≈ 0.056 > 0.02: out
                        ("p", "0.03"): (1, 0.2), ("p", "0.1"): (0, 0.5), ("p", "0.3"): (0, 0.9),
                        ("q", "1"): (30, 5.0), ("q", "3"): (30, 4.0), ("q", "10"): (30, 6.0)}, 30)
    chosen = contenders(tuning_table(runs), runs, 2, 0.02)
    assert chosen[chosen["policy"] == "p"]["value"].tolist() == ["0.03", "0.1"]
    assert chosen[chosen["policy"] == "p"]["label"].tolist() == ["p.c0.03", "p.c0.1"]
    # every value of q stalls: the same rule keeps the fewest stalls, then the lowest regrets
    assert chosen[chosen["policy"] == "q"]["value"].tolist() == ["3", "1"]


def test_stage2_picks_the_safe_contender_with_the_lowest_regret():
    runs = tuning_runs({("p", "0.03"): (3, 0.2), ("p", "0.1"): (0, 0.5), ("p", "0.3"): (0, 0.9),
                        ("q", "1"): (4, 0.3), ("q", "3"): (2, 0.8)}, 200)
    table = stage2_choices(tuning_table(runs), 0.02)
    chosen = table[table["chosen"]].set_index("policy")["value"]
    assert chosen["p"] == "0.1"  # 0.03 has the lower regret but 3/200 stalls: upper bound 4.3 %
    assert table.set_index(["policy", "value"]).loc[("p", "0.1"), "safe"]
    assert chosen["q"] == "3"  # none safe: the fewest stalls wins over the lower regret
    assert not table[table["policy"] == "q"]["safe"].any()


def test_claims_markdown_shows_both_readings_side_by_side():
    from cqb.analysis.claims.tables import claims_markdown, evaluate_claims, with_powered

    spec = ClaimSpec("best", "a is best", "best", "e", ("a",), metric="mean_regret")
    a = np.zeros(10)
    first = evaluate_claims([spec], {"e": runs_table({("a", ""): a, ("b", ""): a + np.linspace(-1, 1, 10)},
                                                     first=0)})
    claim = best_claim(["b"], looks=(8,))
    state = evaluate_look(claim, 0, runs_table({("a", ""): a, ("b", ""): a + np.arange(1, 11)}), None)
    table = with_powered(first, pd.DataFrame([powered_row(claim, state)]))
    text = claims_markdown(table)
    assert ("| powered: value [interval] (level) | powered verdict | size against δ | powered n (cap) |"
            in text)
    assert f"(95 %) | **{INCONCLUSIVE}** | 10 |" in text and f"4.5 [2.45, 6.55] (95 %) | **{HOLDS}** | – | 8 (8) |" in text
    assert "at the figures' seeds: 0 holds, 0 does not hold, 0 tie within δ, 1 inconclusive, 0 not testable at this T; powered: 1 holds" in text
    with pytest.raises(ValueError, match="not in the claims table"):
        with_powered(first, pd.DataFrame([dict(powered_row(claim, state), claim="other")]))
