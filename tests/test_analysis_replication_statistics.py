"""The replication study (cqb.analysis.replication_statistics, cqb.studies.replication):
the mean comparison's power against simulating the rule, the shrunken
effect, the result rule, the published tables read back, and the
registration (config.yaml's replication block) against the analysis's output."""

from __future__ import annotations

import functools
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import REPO
from test_analysis_sample_size import _same_to_rounding
from cqb.analysis.sample_size import mean_power, smallest_size, spread_from_interval
from cqb.analysis.replication_statistics import (CONTRADICTED, NOT_REPLICATED, REPLICATED, Observed, parse_comparison,
                                      replication_result, shrunken)
from cqb.analysis.verdict_rules import (BEYOND_MARGIN, FAILS, HOLDS, INCONCLUSIVE, TIE, WITHIN_NOT_EXCLUDED,
                                        comparison_verdicts, correct_verdicts, procedure_levels)

CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def simulated_mean_power(mean, sd, n, alpha, margin, m, replications=40000, seed=3):
    """The same power by simulating the study with the known-sd t interval the analysis assumes."""
    from scipy.stats import t as student

    rng = np.random.default_rng(seed)
    estimate = rng.normal(mean, sd / np.sqrt(n), replications)
    confidence, fail_confidence = procedure_levels(alpha, 1, m)
    half = student.ppf(1 - (1 - confidence) / 2, n - 1) * sd / np.sqrt(n)
    wide = student.ppf(1 - (1 - fail_confidence) / 2, n - 1) * sd / np.sqrt(n)
    verdicts = comparison_verdicts(estimate - half, estimate + half, estimate - wide, estimate + wide, 0.0,
                                   margin, True)
    return np.isin(verdicts.astype(str), list(correct_verdicts(mean, margin, 0.0, True))).mean()


@pytest.mark.parametrize("mean, sd, n", [(0.0333, 0.23, 275), (0.0, 0.25, 330), (0.08, 0.3, 60),
                                         (-0.02, 0.2, 150)])
def test_mean_power_equals_the_simulated_rule(mean, sd, n):
    exact = mean_power(mean, sd, [n], 0.05, 0.05, 6)[0]
    assert exact == pytest.approx(simulated_mean_power(mean, sd, n, 0.05, 0.05, 6), abs=4 * np.sqrt(0.25 / 40000))


def test_the_spread_read_off_an_interval_gives_back_its_width():
    from scipy.stats import t as student

    sd = spread_from_interval(0.0333, 0.222, 40, 0.9875)
    half = student.ppf(1 - 0.0125 / 2, 39) * sd / np.sqrt(40)
    assert 2 * half == pytest.approx(0.222 - 0.0333)


def test_smallest_size_needs_the_power_to_stay():
    power = np.zeros(200)
    power[50:] = 0.95
    power[60] = 0.5  # a dip: N = 50 does not stay above for the next 25 sizes
    assert smallest_size(lambda seeds: power[seeds], 0.9, 150, stay=25) == 61
    assert smallest_size(lambda seeds: power[seeds], 0.9, 60, stay=25) is None


def test_parse_the_published_comparisons():
    share = parse_comparison("cqb_opt 10→20: 65/141 [0.36, 0.57] tie within δ (n=160)", 0.9875)
    assert (share.key, share.verdict, share.n, share.moved, share.counted) == ("cqb_opt 10→20", TIE, 160, 65, 141)
    mean = parse_comparison("cqb_eps_opt − cqb_eps: 0.109 [0.0333, 0.222] holds (n=40)", 0.9875)
    assert (mean.key, mean.verdict, mean.n, mean.ci_low, mean.value) == ("cqb_eps_opt − cqb_eps", HOLDS, 40,
                                                                         0.0333, 0.109)
    stall = parse_comparison("cqb_opt: 20/2000 [0.006, 0.016] holds; stalled seeds: 60006 (n=2000)", 0.975)
    assert (stall.moved, stall.counted, stall.verdict) == (20, 2000, HOLDS)
    fails = parse_comparison("cqb_opt 10→20: 68/174 [0.32, 0.47] does not hold (n=217)", 0.95)
    assert fails.verdict == FAILS


def test_the_shrunken_effect_is_the_bound_nearest_the_threshold():
    held = Observed("x", HOLDS, 40, 0.9875, 0.109, 0.0333, 0.222)
    assert shrunken(held, 0.0, True) == 0.0333
    failed = Observed("x", FAILS, 217, 0.95, 68 / 174, 0.32, 0.47, 68, 174)
    assert 0.46 < shrunken(failed, 0.5, True) < 0.47  # the exact bound recomputed from the counts
    assert shrunken(Observed("x", TIE, 160, 0.9875, 0.46, 0.36, 0.57, 65, 141), 0.5, True) == 0.5
    below = Observed("x", HOLDS, 2000, 0.975, 0.01, 0.0057, 0.0162)  # a rate below its bound
    assert shrunken(below, 0.02, False) == 0.0162


@pytest.mark.parametrize("original, replication, original_size, replication_size, result", [
    (HOLDS, HOLDS, WITHIN_NOT_EXCLUDED, BEYOND_MARGIN, REPLICATED),
    (FAILS, FAILS, WITHIN_NOT_EXCLUDED, WITHIN_NOT_EXCLUDED, REPLICATED),
    (HOLDS, FAILS, BEYOND_MARGIN, BEYOND_MARGIN, CONTRADICTED),
    (FAILS, HOLDS, WITHIN_NOT_EXCLUDED, WITHIN_NOT_EXCLUDED, CONTRADICTED),
    (HOLDS, TIE, BEYOND_MARGIN, "", CONTRADICTED),  # it excluded every effect within δ; the replication puts it there
    (HOLDS, TIE, WITHIN_NOT_EXCLUDED, "", NOT_REPLICATED),  # both admit a small effect on the claim's side
    (HOLDS, INCONCLUSIVE, BEYOND_MARGIN, "", NOT_REPLICATED),
    (TIE, TIE, "", "", REPLICATED),
    (TIE, HOLDS, "", BEYOND_MARGIN, CONTRADICTED),
    (TIE, HOLDS, "", WITHIN_NOT_EXCLUDED, NOT_REPLICATED),
])
def test_the_result_rule(original, replication, original_size, replication_size, result):
    assert replication_result(original, replication, original_size, replication_size) == result


def test_every_decided_verdict_of_the_published_tables_is_registered():
    from cqb.studies.replication import entry_name, source_targets, sourced_targets

    targets = source_targets(CONFIG, REPO)
    names = [t.name for t in targets]
    registered = [entry_name(e) for e in CONFIG["replication"]["claims"]]
    assert names == registered
    powered = pd.read_csv(REPO / "docs/results/claims_powered.tsv", sep="\t")
    by_construction = {e["name"] for e in CONFIG["claims"] if e.get("by_construction")}
    decided = set(powered.loc[powered["verdict"].isin([HOLDS, FAILS, TIE]), "claim"]) - by_construction
    assert {t.claim for t in targets if not t.policy} == decided
    # the adversarial study's verdicts, decided after the first registration, come from the second
    sources = {t.claim: source for source, t in sourced_targets(CONFIG, REPO) if not t.policy}
    assert {c for c, s in sources.items() if s.endswith("_adversarial")} == {
        "opt_log2_subspace", "opt_log2_switch", "eps_worse_subspace", "opt_near_control"}
    heart = next(t for t in targets if t.name == "eps_best_heart__replication")
    assert heart.size == WITHIN_NOT_EXCLUDED and len(heart.comparisons) == 6
    # a mean's spread: the larger of the powered interval's and the multiverse default cell's (fig8.tsv)
    from cqb.analysis.replication_statistics import default_cells, spread

    decisive = heart.comparisons[0]
    cell = default_cells(pd.read_csv(REPO / "docs/results/fig8.tsv", sep="\t"))["eps_best_heart"][decisive.key]
    assert decisive.sd == max(spread(decisive), spread(cell)) and spread(cell) > spread(decisive)


@functools.lru_cache(maxsize=None)
def _power_analysis(sources: tuple[str, ...]):
    """The replication's power analysis of the tables in ``sources`` (slow: computed once per worker)."""
    from cqb.studies.replication import registered_analysis

    return registered_analysis({**CONFIG, "replication": {**CONFIG["replication"], "sources": list(sources)}}, REPO)


@pytest.mark.slow
def test_the_registration_is_the_power_analysis_output():
    """config.yaml's replication sizes are the analysis of the published tables, not typed numbers."""
    from cqb.studies.replication import POWER_FILE, entry_name

    study = CONFIG["replication"]
    assert "docs/results" not in study["sources"]  # the tables it was registered from, kept
    analyses = _power_analysis(tuple(study["sources"]))
    recorded = json.loads((REPO / "config" / POWER_FILE).read_text())
    assert _same_to_rounding(recorded, json.loads(json.dumps(analyses)))
    for entry in study["claims"]:
        analysis = analyses[entry_name(entry)]
        assert entry["seeds"] == analysis["seeds"]  # not a hand-typed number
        assert study["min_seeds"] <= entry["seeds"] <= study["max_seeds"]
        if analysis["reached"]:
            assert analysis["power_bound"] >= study["power"]
    # Heart and Coupon decide: a correct verdict (a tie or holds) from no effect to the shrunken one, ≥ power
    for name in ("eps_best_heart__replication", "eps_best_coupon__replication"):
        assert analyses[name]["reached"] and analyses[name]["band_power"] >= study["power"]


@pytest.mark.slow
def test_the_registered_sizes_still_reach_the_power_on_the_tables_published_now():
    """A republish moves the published tables (other last bits, other paths);
    the registration stays as registered, before its runs. It still stands if
    the tables published now ask for no more seeds than registered, for the
    same verdicts, with the same power everywhere it was reached."""
    from cqb.studies.replication import entry_name

    study = CONFIG["replication"]
    registered, now = _power_analysis(tuple(study["sources"])), _power_analysis(("docs/results",))
    assert set(now) == set(registered)  # the same decided verdicts
    for entry in study["claims"]:
        name = entry_name(entry)
        assert now[name]["original_verdict"] == registered[name]["original_verdict"], name
        assert now[name]["seeds"] <= entry["seeds"], (name, now[name]["seeds"], entry["seeds"])
        if registered[name]["reached"]:  # within the cap today too
            assert now[name]["reached"], name


def test_the_replication_simulated_whole_has_the_registered_power_and_rarely_replicates_a_null():
    # an ordered claim's decisive comparison (signs, a fifth of the seeds tied): the calibration's
    # powered-then-replicated procedure, at the null and at the shrunken effect, against the exact
    # power of the one-look study (cqb.analysis.sample_size) at the registered size
    from cqb.analysis.calibration import Shape, calibrate_replication
    from cqb.analysis.sample_size import Effect, comparison_power

    signs = np.array([1.0] * 6 + [-1.0] * 2 + [0.0] * 2)
    shape = Shape("c", "ordered", "p 3→5", signs, 0.5, 0.15, True, 3)
    design = {"seeds": 120, "alpha": 0.1, "effect": 0.56}  # the study's own α, not the powered design's
    rows = {r["scenario"]: r for r in calibrate_replication(shape, (20, 40, 80, 160), 0.05, design, 4000, 11)}
    null, shrunk = rows["replication null"], rows["replication shrunken"]
    assert null["type1_ok"] and null["type1_error"] <= 0.1 + 2 * null["type1_se"]
    assert null["looks"] == "20 40 80 160 + 120" and shrunk["mean_seeds"] == 120
    exact = comparison_power(Effect("p 3→5", 6, 8, 10), [120], 0.1, 0.15, 3, share=0.56)[0]
    assert shrunk["power"] == pytest.approx(exact, abs=4 * np.sqrt(0.25 / 4000))
    assert 0 < rows["replication within δ"]["type1_error"] < 1  # a small true effect: sometimes replicated as holding


def test_the_calibration_reads_the_registered_designs():
    from cqb.studies.replication import POWER_FILE, calibration_designs

    designs = calibration_designs(CONFIG, REPO / "config" / POWER_FILE)
    entries = {e["name"]: e["seeds"] for e in CONFIG["replication"]["claims"] if not e.get("policy")}
    assert {name: d["seeds"] for name, d in designs.items()} == entries
    assert designs["eps_best_heart"]["effect"] < 0.05  # the shrunken effect lies within δ


def test_the_table_sets_each_original_against_its_replication(tmp_path):
    from cqb.analysis.replication_statistics import REPLICATION_COLUMNS
    from cqb.studies.replication import replication_table

    config = {"claims": [{"name": "heart", "kind": "best"}, {"name": "dim", "kind": "ordered"}],
              "claim_margins": {"best": 0.05, "ordered": 0.15},
              "replication": {"claims": [{"name": "heart", "seeds": 5}, {"name": "dim", "policy": "p", "seeds": 4}]}}
    (tmp_path / "claims_powered.tsv").write_text(
        "claim\tverdict\tn_seeds\tci_low\tci_high\nheart\tholds\t40\t0.03\t0.22\ndim\tinconclusive\t160\t0.46\t0.68\n")
    (tmp_path / "claims_per_policy.tsv").write_text(
        "claim\tpolicy\tverdict\tn_seeds\tci_low\tci_high\ndim\tp\tdoes not hold\t217\t0.32\t0.47\n")
    states = {"heart__replication": {"verdict": TIE, "value": 0.01, "ci_low": -0.03, "ci_high": 0.04,
                                     "confidence": 0.95, "n": 5},
              "dim__p__replication": {"verdict": HOLDS, "value": 0.7, "ci_low": 0.6, "ci_high": 0.8,
                                      "confidence": 0.95, "n": 4}}
    table = replication_table(config, tmp_path, states)
    assert tuple(table.columns) == REPLICATION_COLUMNS
    assert table[["claim", "policy", "original_verdict", "original_n", "replication_n", "result"]].values.tolist() == [
        ["heart", "", HOLDS, 40, 5, NOT_REPLICATED],  # a tie against a holds that left sizes within δ open
        ["dim", "p", FAILS, 217, 4, CONTRADICTED]]
