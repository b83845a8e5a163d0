"""Figure 8, the multiverse (cqb.analysis.multiverse): the registered design
on the repository's config, the runs each alternative redoes, the cells'
verdicts (the claims' own rule) and the marking rule."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cqb.analysis.verdict_rules import FAILS, HOLDS, INCONCLUSIVE, TIE
from cqb.analysis.claims.registry import ClaimSpec
from cqb.analysis.claims.kinds import check_claim
from cqb.analysis.multiverse import (CHOICE_DEPENDENT, DEFAULT, NO_CELL, ROBUST, UNDECIDED, Alternative, claim_mark,
                                     claim_marks, evaluate_cells, mark_text, render_markdown, run_curve)
from cqb.config.experiments import instance_id
from cqb.studies.multiverse_plan import multiverse_design, multiverse_runs
from cqb.analysis.powered_reading import powered_claims, powered_seeds
from cqb.datasets.registry import datasets_schema
from cqb.config.schema import validate_config, validate_with_defaults
from cqb.config.experiments import build_plan
from cqb.studies.claim_specs import claim_specs, evaluation_seeds, retired_seeds, tuning_setup

REPO = Path(__file__).resolve().parent.parent
RUN_FILE = "runs/{instance_id}/T{horizon}/{policy}/seed{seed}.npz"


def repo_config():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config.update(yaml.safe_load((REPO / "config" / "datasets.yaml").read_text()))
    validate_config(config, yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text()))
    validate_with_defaults(config, datasets_schema(yaml.safe_load((REPO / "workflow" / "schemas" / "datasets.schema.yaml").read_text())))
    return config


@pytest.fixture(scope="module")
def design():
    config = repo_config()
    plan = build_plan(config)
    specs = claim_specs(config, plan)
    return config, plan, specs, multiverse_design(config, plan, specs)


# ---------------------------------------------------------------- the marking rule


def test_mark_says_what_the_affected_cells_decided():
    assert claim_mark(HOLDS, {"a": HOLDS, "b": INCONCLUSIVE}) == (ROBUST, [], 1, 2)
    assert claim_mark(HOLDS, {"a": FAILS, "b": INCONCLUSIVE, "c": FAILS}) == (CHOICE_DEPENDENT, ["a", "c"], 2, 3)
    assert claim_mark(FAILS, {"a": HOLDS}) == (CHOICE_DEPENDENT, ["a"], 1, 1)
    assert claim_mark(HOLDS, {"a": TIE}) == (CHOICE_DEPENDENT, ["a"], 1, 1)  # a tie against a direction
    # an undecided default decides nothing, whatever the cells say
    assert claim_mark(INCONCLUSIVE, {"a": HOLDS, "b": HOLDS})[0] == UNDECIDED
    assert claim_mark(INCONCLUSIVE, {"a": HOLDS, "b": FAILS, "c": HOLDS})[0] == UNDECIDED
    # most affected cells inconclusive: undecided, not robust; exactly half deciding is robust
    assert claim_mark(HOLDS, {"a": HOLDS, "b": INCONCLUSIVE, "c": INCONCLUSIVE}) == (UNDECIDED, [], 1, 3)
    assert claim_mark(HOLDS, {"a": HOLDS, "b": INCONCLUSIVE})[0] == ROBUST
    assert claim_mark(HOLDS, {}) == (NO_CELL, [], 0, 0)
    assert mark_text(ROBUST, "", 7, 9) == "robust (7/9 affected cells decide)"


ALL_VERDICTS = st.sampled_from([HOLDS, FAILS, TIE, INCONCLUSIVE, "not testable at this T"])


@settings(max_examples=300, deadline=None)
@given(default=ALL_VERDICTS, cells=st.dictionaries(st.text("abcdef", min_size=1, max_size=3), ALL_VERDICTS,
                                                   max_size=8))
def test_no_claim_is_marked_robust_from_inconclusive_cells(default, cells):
    mark, named, deciding, affected = claim_mark(default, cells)
    decided = [v for v in cells.values() if v in (HOLDS, FAILS, TIE)]
    if mark == ROBUST:  # the default decided, at least half the affected cells decided, all alike
        assert default in (HOLDS, FAILS, TIE) and 2 * len(decided) >= len(cells) > 0
        assert all(v == default for v in decided)
    if default not in (HOLDS, FAILS, TIE):
        assert mark == UNDECIDED
    assert deciding == len(decided) and affected == len(cells)
    assert (mark == CHOICE_DEPENDENT) == bool(named) == (
        default in (HOLDS, FAILS, TIE) and any(v != default for v in decided))


def test_the_published_grid_marks_no_claim_robust_from_an_undecided_default():
    marks = pd.read_csv(REPO / "docs" / "results" / "fig8_marks.tsv", sep="\t", keep_default_na=False)
    for row in marks.itertuples():
        if row.default_verdict == INCONCLUSIVE:
            assert row.mark == UNDECIDED, row.claim
        if row.mark == ROBUST:
            assert 2 * int(row.deciding) >= int(row.affected) > 0, row.claim


# ---------------------------------------------------------------- the registered design


PAPER_CLAIMS = ["random_linear", "cqb_converge", "slack_longer_exploration", "slack_sharp_drop", "slack_faster",
                "servers_slower", "dim_slower", "eps_best_mnist", "eps_best_heart", "eps_best_coupon"]


def test_registered_design_covers_the_papers_claims_on_fresh_seeds(design):
    config, plan, specs, multiverse = design
    assert [spec.name for spec in multiverse.specs] == PAPER_CLAIMS
    assert all(spec.source == "paper" for spec in multiverse.specs)
    assert multiverse.n_seeds >= 20 and multiverse.confidence == pytest.approx(0.95)
    tuning, _ = tuning_setup(config, plan)
    stage2 = config["tuning"]["stage2"]
    others = (evaluation_seeds(plan, tuning)
              | {s for e in tuning for c in plan.curves[e] for s in c.seeds}
              | set(range(stage2["first_seed"], stage2["first_seed"] + stage2["seeds"]))
              | powered_seeds(powered_claims(config, plan, specs)) | retired_seeds(config))
    assert not set(multiverse.seeds) & others
    smoke = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())["multiverse"]
    smoke_seeds = set(range(smoke["first_seed"], smoke["first_seed"] + smoke["seeds"]))
    assert not smoke_seeds & (set(multiverse.seeds) | others)


def test_each_alternative_reruns_only_what_it_changes(design):
    _, plan, _, multiverse = design
    by_name = {a.name: a for a in multiverse.alternatives}
    curves = [c for spec in multiverse.specs for c in multiverse.unit_curves(spec)]
    # the baselines' constant touches only the baselines; CQB-TS's mode only CQB-TS
    for name, policies in (("explore_3", {"q_ucb", "q_ths"}), ("ts_parameter", {"cqb_ts"})):
        assert {c.policy for c in curves if by_name[name].affects(c)} == policies
    # S = √d only on the pools; τ's constant only where τ comes from the formula
    assert {c.experiment for c in curves if by_name["S_sqrt_d"].affects(c)} == {"mnist", "heart_disease", "coupon"}
    assert all(c.instance["kind"] == "synthetic" for c in curves if by_name["tau_c1e3"].affects(c))
    # the sampler's threshold: every policy of a synthetic instance, another instance id, the label kept
    changed = [c for c in curves if by_name["accept_0p01"].affects(c)]
    assert {c.policy for c in changed} >= {"random", "cqb_eps", "cqb_opt"}
    assert all(run_curve(c, by_name["accept_0p01"], instance_id).label == c.label
               and run_curve(c, by_name["accept_0p01"], instance_id).instance_id != c.instance_id for c in changed)
    # CQB-η-2 is in no paper claim: its cutoff changes nothing
    assert not any(multiverse.affected(spec, by_name["cutoff_32"]) for spec in multiverse.specs)
    # an unaffected run set is the default's run (same key), an affected one has its own
    ts = by_name["ts_parameter"]
    for curve in curves:
        run = run_curve(curve, ts, instance_id)
        assert (run.run_key == curve.run_key) == (curve.policy != "cqb_ts")


def test_formula_as_written_runs_at_the_formulas_value_not_retuned(design):
    _, _, _, multiverse = design
    runs = multiverse_runs(multiverse)
    formula = [run for run in runs.values() if run.label.endswith(".mv_bonus_formula")]
    assert formula and all(run.params["bonus_scale"] == 1.0 for run in formula)
    assert {run.policy for run in formula} == {"cqb_eps", "cqb_opt", "cqb_eps_opt", "cqb_ts"}
    assert all(run.seeds == multiverse.seeds for run in runs.values())


# ---------------------------------------------------------------- the cells


def runs_table(policies, means, seeds, experiment="e", spread=1.0, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for policy, mean in zip(policies, means):
        for s in seeds:
            rows.append({"experiment": experiment, "policy": policy, "sweep_param": "", "sweep_value": "",
                         "seed": s, "horizon": 100, "tail_regret": mean + spread * rng.standard_normal(),
                         "stalled": False, "explore_rounds": np.nan})
    return pd.DataFrame(rows)


class _Curve:  # the parts of a plan Curve the design reads
    pass


def small_multiverse(monkeypatch_seeds=20):
    from cqb.analysis.curves import Curve
    from cqb.analysis.multiverse import Multiverse, NO_CHANGE

    curves = {"e": [Curve(label=p, policy=p, experiment="e", instance={"kind": "synthetic"}, instance_id="i",
                          horizon=100, params={"c": 0}) for p in ("a", "b", "c")]}
    spec = ClaimSpec(name="a_best", statement="a is best", kind="best", experiment="e", policies=("a",))
    moves_b = Alternative("moves_b", "choice", "b moved", policies=("b",), params={"c": 1})
    moves_none = Alternative("moves_none", "choice", "nothing", policies=("zzz",), params={"c": 1})
    return Multiverse(1000, monkeypatch_seeds, 0.05, (spec,), (NO_CHANGE, moves_b, moves_none), {"best": 0.05},
                      {"a_best": (("a", ""), ("b", ""), ("c", ""))}, curves), spec


def test_cells_use_the_claims_rule_and_unaffected_cells_are_the_defaults():
    multiverse, spec = small_multiverse()
    seeds = multiverse.seeds
    default = runs_table(["a", "b", "c"], [0.0, 2.0, 2.0], seeds, seed=1)
    moved = runs_table(["a", "b", "c"], [0.0, -2.0, 2.0], seeds, seed=2)
    cells = evaluate_cells(multiverse, {DEFAULT: default, "moves_b": moved})
    by = cells.set_index("alternative")
    for name, table in ((DEFAULT, default), ("moves_b", moved)):
        expected = check_claim(table, spec, 0.95, 0.05)
        assert (by.loc[name, "verdict"], by.loc[name, "value"], by.loc[name, "n"]) == (
            expected.verdict, expected.value, expected.n_seeds)
    assert by.loc[DEFAULT, "verdict"] == HOLDS and by.loc["moves_b", "verdict"] == FAILS
    assert not by.loc["moves_none", "affected"] and by.loc["moves_none", "verdict"] == HOLDS
    assert by.loc["moves_b", "rerun"] == "b" and bool(by.loc["moves_b", "opposite"])
    marks = claim_marks(cells, multiverse.specs)
    assert marks.iloc[0]["mark"] == CHOICE_DEPENDENT and marks.iloc[0]["opposite"] == "b moved"
    text = render_markdown(multiverse, cells, marks)
    assert "seeds 1000–1019 (n = 20)" in text and "| `a_best` | b moved | choice | b |" in text


def test_cell_level_follows_alpha():
    multiverse, spec = small_multiverse()
    wide = replace(multiverse, alpha=0.001)
    table = runs_table(["a", "b", "c"], [0.0, 0.9, 2.0], multiverse.seeds, seed=3)
    cells = evaluate_cells(wide, {DEFAULT: table, "moves_b": table})
    assert cells["confidence"].iloc[0] == pytest.approx(0.999)
    assert cells["ci_low"].iloc[0] == pytest.approx(check_claim(table, spec, 0.999, 0.05).ci_low)


def test_cell_files_point_at_the_alternatives_runs_under_the_default_label():
    multiverse, spec = small_multiverse()
    moves_b = multiverse.alternative("moves_b")
    curves = multiverse.cell_curves(spec, moves_b, RUN_FILE)
    assert [c.label for c in curves] == ["a", "b", "c"]
    assert curves[1].files[0] == "runs/i/T100/b.mv_moves_b/seed1000.npz"
    assert curves[0].files[-1] == "runs/i/T100/a/seed1019.npz"


def test_readme_table_carries_the_multiverse_mark_beside_the_readings_mark():
    from cqb.publishing.claims_summary import claims_summary_markdown

    claims = pd.DataFrame([{"claim": "c1", "figure": "fig2", "statement": "Claim one", "statistic": "s",
                            "value": 1.0, "ci_low": 0.5, "ci_high": 1.5, "verdict": HOLDS, "n_seeds": 10,
                            "mark": "robust"}])
    marks = pd.DataFrame([{"claim": "c1", "mark": CHOICE_DEPENDENT, "opposite": "κ = 40", "deciding": 3,
                           "affected": 4}])
    text = claims_summary_markdown(claims, None, multiverse=marks)
    assert "| readings mark | multiverse (Figure 8) mark |" in text
    assert "| not registered | robust | choice-dependent (κ = 40) |" in text
    assert "multiverse" not in claims_summary_markdown(claims, None)


def test_an_excluded_seed_leaves_every_cell_and_is_named(design):
    """A seed on which some claim's instance cannot be drawn leaves every
    column alike (default included), and the summary says which and why."""
    config, plan, specs, _ = design
    excluded = dict(config, multiverse={**config["multiverse"], "excluded_seeds": {90039: "no instance at ϵ = 0.15"}})
    multiverse = multiverse_design(excluded, plan, specs)
    assert multiverse.seeds == tuple(range(90000, 90039))
    spec = multiverse.specs[0]
    for alternative in multiverse.alternatives:
        for curve in multiverse.cell_curves(spec, alternative, RUN_FILE):
            assert curve.seeds == multiverse.seeds and not any("seed90039" in f for f in curve.files)
    assert all(90039 not in run.seeds for run in multiverse_runs(multiverse).values())
    text = render_markdown(multiverse, pd.DataFrame(columns=["claim"]), pd.DataFrame(columns=["statement"]))
    assert "Seed 90039 is left out of every cell: no instance at ϵ = 0.15." in text
    from cqb.analysis.multiverse import excluded_text
    assert excluded_text({7: "b", 3: "a", 5: "a"}) == (" Seeds 3, 5 are left out of every cell: a."
                                                       " Seed 7 is left out of every cell: b.")
    # a layered config drawing other seeds (smoke.yaml) keeps all of its own
    other = dict(config, multiverse={**config["multiverse"], "first_seed": 95000, "seeds": 3,
                                     "excluded_seeds": {90039: "x"}})
    assert multiverse_design(other, plan, specs).seeds == (95000, 95001, 95002)
    from cqb.errors import ConfigError
    with pytest.raises(ConfigError, match="multiverse.excluded_seeds"):
        multiverse_design(dict(config, multiverse={**config["multiverse"], "excluded_seeds": {"x1": "y"}}),
                          plan, specs)
