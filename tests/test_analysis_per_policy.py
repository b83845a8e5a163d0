"""Per-policy readings of a claim (cqb.analysis.claims.tables.per_policy_rows), the
confirmatory study's claims from the config (cqb.studies.confirmatory) and
their rows in the README's summary (cqb.publishing.report)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from cqb.analysis.verdict_rules import FAILS, HOLDS, INCONCLUSIVE, TIE
from cqb.analysis.claims.registry import ClaimSpec
from cqb.analysis.claims.tables import per_policy_rows, per_policy_table
from cqb.analysis.summaries import binomial_interval
from cqb.errors import ConfigError
from cqb.studies.confirmatory import confirmatory_claims, confirmatory_seeds


def ordered_runs(times: dict) -> pd.DataFrame:
    """{(policy, d): per-seed time to optimal} → a runs table."""
    rows = []
    for (policy, d), per_seed in times.items():
        for seed, time in enumerate(per_seed):
            rows.append({"policy": policy, "sweep_param": "dim", "sweep_value": d, "seed": seed, "horizon": 100,
                         "time_to_optimal": float(time), "censored": False, "explore_rounds": float("nan")})
    return pd.DataFrame(rows)


DIM_CLAIM = ClaimSpec("dim", "Larger d converges slower", "ordered", "synthetic_dim", ("eps", "opt"),
                 metric="time_to_optimal", per_policy=True, per_policy_by_construction=(("eps", "τ ∝ d³"),))


def record(key, policy, values, verdict, n, look=0):
    low, high = values
    return {"key": key, "units": [[policy, "3"], [policy, "5"]], "value": (low + high) / 2, "ci_low": low,
            "ci_high": high, "verdict": verdict, "n": n, "text": f"{key}: {verdict}", "decided_at": look}


def test_each_policy_combines_its_own_comparisons_and_the_confirmatory_study_replaces_the_powered_ones():
    slower = list(range(10, 30))
    runs = ordered_runs({("eps", "3"): [1] * 20, ("eps", "5"): slower, ("opt", "3"): [5] * 20,
                         ("opt", "5"): [4, 6] * 10})
    powered = {"statistic": "share", "n": 160,
               "comparisons": [record("eps 3→5", "eps", (0.7, 0.9), HOLDS, 160),
                               record("opt 3→5", "opt", (0.34, 0.55), INCONCLUSIVE, 160, None)]}
    confirmatory = {"dim__opt": {"statistic": "share", "n": 217,
                                 "comparisons": [record("opt 3→5", "opt", (0.40, 0.49), FAILS, 217)]}}
    rows = {row["policy"]: row for row in per_policy_rows(DIM_CLAIM, runs, 0.15, powered, confirmatory)}
    assert rows["eps"]["verdict"] == HOLDS and rows["eps"]["source"] == "powered" and rows["eps"]["n_seeds"] == 160
    assert rows["eps"]["by_construction"] == "τ ∝ d³" and rows["opt"]["by_construction"] == ""
    assert rows["eps"]["figures_verdict"] == HOLDS  # 20 of 20 seeds slower at the figures' seeds
    assert rows["opt"]["powered_verdict"] == INCONCLUSIVE
    assert rows["opt"]["verdict"] == rows["opt"]["confirmatory_verdict"] == FAILS
    assert rows["opt"]["source"] == "confirmatory" and rows["opt"]["n_seeds"] == 217
    # without a confirmatory study the powered verdict is the headline; without either, the figures'
    assert {r["policy"]: r["source"] for r in per_policy_rows(DIM_CLAIM, runs, 0.15, powered)} == {
        "eps": "powered", "opt": "powered"}
    only_figures = per_policy_table([DIM_CLAIM, ClaimSpec("x", "x", "ordered", "synthetic_dim", ("opt",))],
                                    {"synthetic_dim": runs}, {"ordered": 0.15})
    assert list(only_figures["source"]) == ["figures", "figures"] and list(only_figures["policy"]) == ["eps", "opt"]
    assert only_figures.loc[1, "figures_verdict"] in (TIE, INCONCLUSIVE)  # half the seeds each way


def plan_of(values):
    curves = [SimpleNamespace(label=p, policy=p, sweep_text=v) for p in ("eps", "opt") for v in values]
    return SimpleNamespace(curves={"synthetic_dim": curves})


def confirmatory_config(**entry):
    base = {"name": "dim", "policy": "opt", "sweep_values": ["5", "10"], "margin": 0.15, "seeds": 217,
            "observed": [{"comparison": "opt 5→10", "moved": 6, "counted": 10, "seeds": 10}]}
    return {"claim_margins": {"ordered": 0.15},
            "confirmatory": {"first_seed": 120000, "alpha": 0.05, "claims": [{**base, **entry}]}}


def test_a_confirmatory_claim_is_one_look_on_its_policy_and_fresh_seeds():
    (claim,) = confirmatory_claims(confirmatory_config(), plan_of(["3", "5", "10"]), [DIM_CLAIM]).values()
    assert claim.spec.name == "dim__opt" and claim.spec.policies == ("opt",) and claim.looks == (217,)
    assert claim.units == (("opt", "5"), ("opt", "10")) and claim.confidence == pytest.approx(0.95)
    assert claim.spec.readings == () and claim.margin == 0.15
    seeds = confirmatory_seeds({"c": claim})
    assert min(seeds) == 120000 and max(seeds) == 120216
    with pytest.raises(ConfigError, match="registered δ"):
        confirmatory_claims(confirmatory_config(margin=0.1), plan_of(["5", "10"]), [DIM_CLAIM])
    with pytest.raises(ConfigError, match="one observed effect per comparison"):
        confirmatory_claims(confirmatory_config(sweep_values=["3", "5", "10"]), plan_of(["3", "5", "10"]), [DIM_CLAIM])
    with pytest.raises(ConfigError, match="not a policy"):
        confirmatory_claims(confirmatory_config(policy="random"), plan_of(["5", "10"]), [DIM_CLAIM])


def test_the_readme_summary_gives_the_verdict_per_policy_without_counting_it():
    from cqb.publishing.claims_summary import claims_summary_markdown

    claims = pd.DataFrame([{"claim": "dim", "figure": "fig3", "statement": "Larger d converges slower",
                            "statistic": "s", "value": 0.44, "ci_low": 0.34, "ci_high": 0.55,
                            "verdict": INCONCLUSIVE, "n_seeds": 10, "mark": "robust"}])
    per_policy = pd.DataFrame([
        {"claim": "dim", "policy": "cqb_eps", "verdict": HOLDS, "source": "powered", "value": 0.6, "ci_low": 0.5,
         "ci_high": 0.7, "n_seeds": 160, "by_construction": "τ ∝ d³", "figures_verdict": HOLDS,
         "figures_value": 0.9, "figures_ci_low": 0.6, "figures_ci_high": 1.0},
        {"claim": "dim", "policy": "cqb_opt", "verdict": INCONCLUSIVE, "source": "confirmatory", "value": 0.45,
         "ci_low": 0.38, "ci_high": 0.72, "n_seeds": 217, "by_construction": "", "figures_verdict": INCONCLUSIVE,
         "figures_value": 0.3, "figures_ci_low": 0.1, "figures_ci_high": 0.7}])
    text = claims_summary_markdown(claims, None, per_policy)
    # the per-policy rows are not counted; one policy undecided: no policy split
    assert ("primary readings: 0 holds, 0 does not hold, 0 tie within δ, 0 policy-dependent, 1 inconclusive."
            in text)
    assert "| ↳ for CQB-ε (by construction) | fig3 | **holds** 0.6 [0.5, 0.7] (95 %) |" in text
    assert "| ↳ for CQB-Opt | fig3 | **inconclusive** 0.45 [0.38, 0.72] (95 %) | – |" in text
    assert "↳" not in claims_summary_markdown(claims, None)


def test_a_claim_whose_policies_decide_differently_is_policy_dependent_and_says_what_each_comparison_showed():
    from cqb.publishing.claims_summary import claims_summary_markdown

    claims = pd.DataFrame([{"claim": "dim", "figure": "fig3", "statement": "Larger d converges slower",
                            "statistic": "s", "value": 0.44, "ci_low": 0.34, "ci_high": 0.55,
                            "verdict": INCONCLUSIVE, "n_seeds": 10, "mark": "robust", "detail": ""}])
    confirmatory = pd.DataFrame([{"claim": "dim__cqb_opt", "confidence": 0.95,
                                  "detail": "cqb_opt 5→10: 127/187 [0.61, 0.75] holds (n=217) [decided at n=217]; "
                                            "cqb_opt 10→20: 68/174 [0.32, 0.47] does not hold (n=217) "
                                            "[decided at n=217]"}])
    per_policy = pd.DataFrame([
        {"claim": "dim", "policy": "cqb_eps", "verdict": HOLDS, "source": "figures", "value": 0.6, "ci_low": 0.5,
         "ci_high": 0.7, "n_seeds": 10, "by_construction": "", "figures_verdict": HOLDS,
         "figures_value": 0.6, "figures_ci_low": 0.5, "figures_ci_high": 0.7, "detail": ""},
        {"claim": "dim", "policy": "cqb_opt", "verdict": FAILS, "source": "confirmatory", "value": 68 / 174,
         "ci_low": 0.318, "ci_high": 0.468, "n_seeds": 217, "by_construction": "", "figures_verdict": INCONCLUSIVE,
         "figures_value": 0.3, "figures_ci_low": 0.1, "figures_ci_high": 0.7,
         "detail": "cqb_opt 5→10: 127/187 [0.61, 0.75] holds (n=217); "
                   "cqb_opt 10→20: 68/174 [0.32, 0.47] does not hold (n=217)"}])
    design = {"dim": {"kind": "ordered", "threshold": 0.5, "margin": 0.15, "upward": True, "sweep_symbol": "d",
                      "word": "slower"}}
    text = claims_summary_markdown(claims, None, per_policy, design=design, confirmatory=confirmatory)
    assert "0 holds, 0 does not hold, 0 tie within δ, 1 policy-dependent, 0 inconclusive." in text
    assert "**policy-dependent**: holds for CQB-ε, does not hold for CQB-Opt (↳)" in text
    # "does not hold" shows the interval it was decided on: Bonferroni over the study's 2 comparisons
    low, high = binomial_interval(68, 174, 0.975)
    assert (f"**does not hold** 0.391 [{low:.3g}, {high:.3g}] (97.5 %): slower from d = 5 to 10 (127/187 seeds); "
            "not slower from 10 to 20 (68/174 seeds) | size within δ = 0.15 not excluded |") in text


def test_the_readme_says_why_a_claim_stays_undecided_at_its_cap():
    from cqb.publishing.claims_summary import claims_summary_markdown

    claims = pd.DataFrame([{"claim": "dim", "figure": "fig3", "statement": "Larger d converges slower (deteriorates)",
                            "statistic": "s", "value": 0.44, "ci_low": 0.34, "ci_high": 0.55,
                            "verdict": INCONCLUSIVE, "n_seeds": 10, "mark": "robust"}])
    powered = pd.DataFrame([{"claim": "dim", "verdict": INCONCLUSIVE, "value": 0.57, "ci_low": 0.46,
                             "ci_high": 0.68, "n_seeds": 160, "cap": 160, "excluded": "effects excluded: x",
                             "confidence": 0.9875, "detail": ""}])
    per_policy = pd.DataFrame([
        {"claim": "dim", "policy": "cqb_opt", "verdict": FAILS, "source": "confirmatory", "value": 0.39,
         "ci_low": 0.32, "ci_high": 0.47, "n_seeds": 217, "by_construction": "", "figures_verdict": INCONCLUSIVE,
         "figures_value": 0.3, "figures_ci_low": 0.1, "figures_ci_high": 0.7}])
    calibration = pd.DataFrame([{"claim": "dim", "scenario": "null", "power": float("nan")},
                                {"claim": "dim", "scenario": "effect", "power": 0.3985}])
    text = claims_summary_markdown(claims, powered, per_policy, calibration=calibration)
    assert ("*Larger d converges slower* stays inconclusive: its registered cap of 160 seeds is spent, and more "
            "looks would exceed the design's α (effects excluded: x); the design's power at the observed effect "
            "was 0.40 (calibration); per policy (↳ rows): cqb_opt does not hold (confirmatory).") in text
    # not at the cap yet: no such note (more registered seeds could still decide it)
    assert "stays inconclusive" not in claims_summary_markdown(claims, powered.assign(n_seeds=80), per_policy)


def test_the_comparisons_table_lists_every_comparison_of_every_source():
    from cqb.analysis.claims.kinds import check_claim
    from cqb.analysis.claims.tables import comparisons_table

    runs = ordered_runs({("eps", "3"): [1] * 20, ("eps", "5"): list(range(10, 30)), ("opt", "3"): [5] * 20,
                         ("opt", "5"): [4, 6] * 10})
    powered = {"looks": [20, 40, 160], "comparisons": [record("eps 3→5", "eps", (0.7, 0.9), HOLDS, 20, look=0),
                                                       record("opt 3→5", "opt", (0.34, 0.55), INCONCLUSIVE, 160, None)]}
    confirmatory = {"dim__opt": {"looks": [217], "comparisons": [record("opt 3→5", "opt", (0.40, 0.49), FAILS, 217)]}}
    table = comparisons_table([DIM_CLAIM], {"synthetic_dim": runs}, {"ordered": 0.15}, {"dim": powered}, confirmatory)
    figures = table[table["source"] == "figures"]
    # both comparisons, not only the decisive one: the claim's verdict combines them
    assert [(c.key, c.verdict, c.n) for c in check_claim(runs, DIM_CLAIM, margin=0.15).comparisons] == \
        list(zip(figures["comparison"], figures["verdict"], figures["n"]))
    assert list(figures["policies"]) == ["eps", "opt"] and len(figures) == 2
    powered_rows = table[table["source"] == "powered"].set_index("comparison")
    assert powered_rows.loc["eps 3→5", "decided_at_n"] == 20  # the look's sample size, not its index
    assert pd.isna(powered_rows.loc["opt 3→5", "decided_at_n"]) and powered_rows.loc["opt 3→5", "ci_high"] == 0.55
    (row,) = table[table["source"] == "confirmatory"].itertuples()
    assert (row.claim, row.comparison, row.verdict, row.n, row.decided_at_n) == ("dim__opt", "opt 3→5", FAILS, 217, 217)
