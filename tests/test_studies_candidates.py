"""The candidate-policy benchmark (cqb.studies.candidates): setup from the config,
the paired comparison, the leaderboard, the figure and publishing, without
Snakemake. The workflow end to end, with the example plugin installed into a
scratch folder: tests/test_workflow_candidates.py."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from cqb.presentation import policy_styles
import yaml

from conftest import REPO
from cqb.figures.candidates_plot import plot_leaderboard
from cqb.studies.candidates import (Benchmark, add_runs, benchmark_setup, candidate_claims, candidate_list,
                                     leaderboard, summary_markdown)
from cqb.publishing.published_results import publish_candidates
from cqb.analysis.verdict_rules import FAILS, HOLDS, INCONCLUSIVE
from cqb.analysis.claims.statistics import mean_interval
from cqb.errors import ConfigError
from cqb.config.schema import validate_config
from cqb.config.experiments import build_plan
from cqb.policies import register_policy
from cqb.analysis.summaries import RUN_COLUMNS

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
PAPER = ["synthetic_base", "synthetic_slack", "synthetic_servers", "synthetic_dim", "mnist", "heart_disease",
         "coupon"]


@dataclass(frozen=True)
class PriorParams:
    prior: float = 1.0


@pytest.fixture(autouse=True, scope="module")
def plugin_policy():
    """A plugin's policy, unregistered after this module."""
    from cqb.sim.policies import registry

    register_policy("test_candidate", "Test candidate", PriorParams)(lambda env, contexts, rng, params: None)
    yield "test_candidate"
    registry._specs.pop("test_candidate", None)
    policy_styles._styles.pop("test_candidate", None)


def setup(candidates, **override):
    config = copy.deepcopy(CONFIG)
    config["candidates"] = candidates
    config.update(override)
    validate_config(config, SCHEMA)
    plan = build_plan(config)
    return plan, benchmark_setup(config, plan)


# ---------------------------------------------------------------- setup from the config


def test_no_candidates_no_benchmark_and_the_default_experiments_are_the_papers():
    config = copy.deepcopy(CONFIG)
    validate_config(config, SCHEMA)
    assert config["candidates"] == [] and benchmark_setup(config, build_plan(config)) is None
    del config["candidate_benchmark"]
    validate_config(config, SCHEMA)  # the schema's default is the same list
    assert config["candidate_benchmark"]["experiments"] == PAPER == CONFIG["candidate_benchmark"]["experiments"]


@pytest.mark.parametrize("candidates, needle", [
    (["no_such_policy"], "invalid config value candidates = 'no_such_policy': not a registered policy "
                         "or a policy_variants label"),
    (["oracle"], "invalid config value candidates = 'oracle': the oracle"),
    (["cqb_eps"], "invalid config value candidates = 'cqb_eps': is a baseline"),
])
def test_a_bad_candidate_is_one_line_naming_it(candidates, needle):
    with pytest.raises(ConfigError) as error:
        setup(candidates)
    assert str(error.value).startswith(needle) and "\n" not in str(error.value)


def test_a_baseline_the_experiment_does_not_run_is_named():
    with pytest.raises(ConfigError, match=r"^invalid config value candidate_benchmark.baselines = 'cqb_ts': "
                                          r"not run in experiment synthetic_slack"):
        setup(["test_candidate"], candidate_benchmark={"baselines": ["cqb_ts"]})


def test_the_candidate_runs_on_every_papers_cell_with_its_instance_horizon_and_seeds():
    plan, benchmark = setup(["test_candidate"])
    assert benchmark.experiments == tuple(PAPER)
    for experiment in PAPER:
        reference = {c.sweep_text: c for c in plan.curves[experiment] if c.base_label == "cqb_eps"}
        mine = {c.sweep_text: c for c in benchmark.curves[experiment]}
        assert set(mine) == set(reference), experiment
        for value, curve in mine.items():
            assert curve.label == "test_candidate" and curve.params == {"prior": 1.0}
            assert (curve.instance_id, curve.horizon, curve.seeds, curve.instance) == (
                reference[value].instance_id, reference[value].horizon, reference[value].seeds,
                reference[value].instance), (experiment, value)
    # 12 distinct instances (the base one shared by the four synthetic experiments) × 10 seeds
    assert len(benchmark.runs) == 12 and sum(len(r.seeds) for r in benchmark.runs.values()) == 120
    assert not set(benchmark.runs) & set(plan.runs)  # new run files only: the paper's are reused
    before = dict(plan.runs)
    add_runs(plan.runs, benchmark.runs)
    assert all(plan.runs[key] is run for key, run in before.items())
    assert all(plan.runs[key] == run for key, run in benchmark.runs.items())


def test_a_candidate_the_experiment_runs_reuses_its_runs_and_a_variant_gets_its_own_label():
    plan, benchmark = setup(["cqb_ts", "greedy_p10"],
                            policy_variants={**CONFIG["policy_variants"],
                                             "greedy_p10": {"policy": "test_candidate", "display": "Greedy p10",
                                                            "params": {"prior": 10.0}}})
    assert [c.display for c in benchmark.candidates] == ["CQB-TS", "Greedy p10"]
    base = [c for c in benchmark.curves["synthetic_base"] if c.label == "cqb_ts"]
    assert base == [c for c in plan.curves["synthetic_base"] if c.label == "cqb_ts"]
    assert ("synth_K5_d5_lam0.7_eps0.1_acc0.005", "5000", "cqb_ts") not in benchmark.runs  # Figure 2's
    assert ("synth_K3_d5_lam0.7_eps0.1_acc0.005", "5000", "cqb_ts") in benchmark.runs  # not run by the paper
    variant = [run for key, run in benchmark.runs.items() if key[2] == "greedy_p10"]
    assert len(variant) == 12 and all(run.params == {"prior": 10.0} for run in variant)


def test_a_candidate_value_the_policy_refuses_is_named():
    with pytest.raises(ConfigError, match="candidates: parameters of bad_variant"):
        setup(["bad_variant"], policy_variants={**CONFIG["policy_variants"], "bad_variant": {
            "policy": "q_ucb", "params": {"explore_constant": -1.0}}})


def test_candidate_list_accepts_registered_plugins_and_variants():
    config = {"candidates": ["test_candidate", "v"], "policy_variants": {"v": {"policy": "cqb_opt"}}}
    assert [(c.label, c.policy, c.display) for c in candidate_list(config)] == [
        ("test_candidate", "test_candidate", "Test candidate"), ("v", "cqb_opt", "v")]


# ---------------------------------------------------------------- the paired comparison


def runs_table(values: dict, sweep: dict | None = None, stalled: dict | None = None) -> pd.DataFrame:
    """Per-run summaries: {policy: {seed: mean_regret}} (at sweep value ''), or
    {sweep value: {policy: {seed: value}}} with ``sweep`` = {"param": name}."""
    cells = values if sweep else {"": values}
    rows = []
    for value, policies in cells.items():
        for policy, by_seed in policies.items():
            for seed, metric in by_seed.items():
                row = dict.fromkeys(RUN_COLUMNS, 0.0)
                row.update(policy=policy, sweep_param=sweep["param"] if sweep else "", sweep_value=value,
                           seed=seed, mean_regret=metric, tail_regret=metric, code_hash="h",
                           stalled=seed in (stalled or {}).get(policy, ()))
                rows.append(row)
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


RNG = np.random.default_rng(3)
SEEDS = list(range(10))
CANDIDATE = dict(zip(SEEDS, RNG.uniform(0, 5, 10)))
GAPS = RNG.normal(0.5, 0.2, 10)  # baseline − candidate per seed


def table_with_shuffled_seeds():
    """The candidate's rows in another seed order than the others': pairing
    by row position instead of by seed gives other differences."""
    shuffled = dict(sorted(CANDIDATE.items(), key=lambda item: -item[0]))
    return runs_table({"cqb_eps": {s: CANDIDATE[s] + GAPS[s] for s in SEEDS},
                       "cqb_opt": {s: CANDIDATE[s] - 2.0 for s in SEEDS},
                       "random": {s: 100.0 + s for s in SEEDS},
                       "oracle": {s: 0.0 for s in SEEDS},
                       "cand": shuffled}, stalled={"cand": (3, 7), "random": tuple(SEEDS)})


def test_claims_pair_by_seed_against_the_named_baseline():
    claims = candidate_claims({"synthetic_base": table_with_shuffled_seeds()}, ["cand"], ["cqb_eps", "cqb_opt"],
                              display_names={"cand": "Mine", "cqb_eps": "CQB-ε", "cqb_opt": "CQB-Opt"})
    eps, opt = claims.itertuples()
    assert eps.statement == "Mine has lower mean regret than CQB-ε on synthetic_base"
    assert eps.value == pytest.approx(GAPS.mean())
    assert (eps.ci_low, eps.ci_high) == pytest.approx(mean_interval(GAPS))
    assert eps.verdict == HOLDS and eps.n_seeds == 10
    assert (opt.baseline, opt.value, opt.verdict) == ("cqb_opt", pytest.approx(-2.0), FAILS)


def test_leaderboard_ranks_counts_stalls_and_gives_the_paired_delta():
    board = leaderboard({"synthetic_base": table_with_shuffled_seeds()}, ["cand"])
    assert list(board["policy"]) == ["cqb_opt", "cand", "cqb_eps", "random"]  # no oracle; by mean
    assert list(board["rank"]) == [1, 2, 3, 4] and set(board["n_policies"]) == {4}
    row = board.set_index("policy")
    assert row.loc["cand", "n_stalled"] == 2 and row.loc["cand", "stalled_seeds"] == "3 7"
    assert row.loc["random", "n_stalled"] == 10 and row.loc["cqb_eps", "stalled_seeds"] == "-"
    assert row.loc["cqb_eps", "delta"] == pytest.approx(GAPS.mean())
    assert row.loc["random", "delta"] == pytest.approx(np.mean([100.0 + s - CANDIDATE[s] for s in SEEDS]))
    assert row.loc["cqb_opt", "delta_verdict"] == FAILS and row.loc["cqb_eps", "delta_verdict"] == HOLDS
    assert np.isnan(row.loc["cand", "delta"]) and row.loc["cand", "is_candidate"]
    assert row.loc["cand", "mean"] == pytest.approx(np.mean(list(CANDIDATE.values())))


def test_every_interval_is_labelled_by_the_method_that_computed_it():
    # the claims' interval for the paired Δ and for each policy's mean alike
    # (the percentile bootstrap under-covers at ten seeds), and the label says so
    import re

    from cqb.studies.candidates import INTERVAL_METHOD, paired_comparison

    table = table_with_shuffled_seeds()
    board = leaderboard({"synthetic_base": table}, ["cand"]).set_index("policy")
    for policy in ("cand", "cqb_eps", "random"):
        values = table.loc[table["policy"] == policy, "mean_regret"].to_numpy()
        assert (board.loc[policy, "ci_low"], board.loc[policy, "ci_high"]) == pytest.approx(mean_interval(values))
    result = paired_comparison(table, "cand", "cqb_eps", "mean_regret", "x", "synthetic_base", "")
    assert INTERVAL_METHOD in result.statistic  # the check's own account of its interval
    claims = candidate_claims({"synthetic_base": table}, ["cand"], ["cqb_eps"])
    assert claims["statistic"].str.contains(INTERVAL_METHOD, regex=False).all()
    text = summary_markdown(leaderboard({"synthetic_base": table}, ["cand"]), claims)
    assert "bootstrap" not in text and text.count(f"[{INTERVAL_METHOD}]") == 3  # Δ, mean, Δ vs candidate
    pointed = re.findall(r"docs/[\w/]+\.md", text)
    assert pointed and all((REPO / path).exists() for path in pointed), pointed


def test_sweep_values_are_separate_cells_and_a_shared_cell_is_claimed_once():
    values = {"0.1": {"cand": {0: 1.0, 1: 2.0}, "cqb_eps": {0: 1.5, 1: 2.5}, "cqb_opt": {0: 1.0, 1: 2.0}},
              "0.15": {"cand": {0: 5.0, 1: 6.0}, "cqb_eps": {0: 1.0, 1: 1.5}, "cqb_opt": {0: 4.0, 1: 6.0}}}
    runs = {"synthetic_base": runs_table({p: v for p, v in values["0.1"].items()}),
            "synthetic_slack": runs_table(values, sweep={"param": "slack"})}
    same = ("synth_base", 5000, (0, 1))
    keys = {("synthetic_base", ""): same, ("synthetic_slack", "0.1"): same,
            ("synthetic_slack", "0.15"): ("synth_eps0.15", 5000, (0, 1))}
    claims = candidate_claims(runs, ["cand"], ["cqb_eps"], cell_keys=keys)
    assert list(claims["claim"]) == ["cand_below_cqb_eps_synthetic_base", "cand_below_cqb_eps_synthetic_slack_slack0.15"]
    assert claims["statement"].iloc[1].endswith("on synthetic_slack (ϵ = 0.15)")
    assert list(claims["value"]) == pytest.approx([0.5, -4.25])
    board = leaderboard(runs, ["cand"])
    assert len(board) == 3 + 3 + 3  # the leaderboard keeps every experiment's cell
    assert list(board.loc[board["sweep_value"] == "0.15", "policy"]) == ["cqb_eps", "cqb_opt", "cand"]


def test_runs_on_other_seeds_are_refused():
    table = runs_table({"cand": {0: 1.0, 1: 2.0}, "cqb_eps": {1: 1.0, 2: 2.0}})
    with pytest.raises(ValueError, match=r"cand ran on seeds \[0, 1\], cqb_eps on \[1, 2\]"):
        candidate_claims({"x": table}, ["cand"], ["cqb_eps"])
    with pytest.raises(ValueError, match="paired by seed"):
        leaderboard({"x": table}, ["cand"])


def test_an_inconclusive_difference_is_called_so():
    table = runs_table({"cand": {0: 1.0, 1: 2.0, 2: 3.0}, "cqb_eps": {0: 2.0, 1: 1.0, 2: 3.5}})
    (claim,) = candidate_claims({"x": table}, ["cand"], ["cqb_eps"]).itertuples()
    assert claim.verdict == INCONCLUSIVE and claim.ci_low < 0 < claim.ci_high


def test_markdown_figure_and_publishing_from_the_tables(tmp_path):
    runs = {"synthetic_base": table_with_shuffled_seeds()}
    board = leaderboard(runs, ["cand"], display_names={"cand": "Mine"})
    claims = candidate_claims(runs, ["cand"], ["cqb_eps", "cqb_opt"])
    text = summary_markdown(board, claims, "Generated by the pipeline …")
    assert "- cand against cqb_eps: lower in **1** of 1 cells, higher in **0**" in text
    assert "| cand | synthetic_base | – | 2/4 | **Mine** |" in text and "| 2/10 |" in text
    source = tmp_path / "figures"
    source.mkdir()
    board.to_csv(source / "candidates.tsv", sep="\t", index=False)
    # the figure reads the written table back: it needs nothing else
    plot_leaderboard(pd.read_csv(source / "candidates.tsv", sep="\t", keep_default_na=False,
                                 na_values={c: ["nan", ""] for c in ("delta", "delta_ci_low", "delta_ci_high")}),
                     source / "candidates.pdf", source / "candidates.png")
    assert (source / "candidates.png").stat().st_size > 0 and (source / "candidates.pdf").stat().st_size > 0
    (source / "candidates.md").write_text(text)
    written = publish_candidates(source, tmp_path / "docs" / "results")
    assert (tmp_path / "docs" / "results" / "candidates.md").read_text() == text
    assert str(tmp_path / "docs" / "results" / "candidates.md") in written
    assert publish_candidates(tmp_path / "nothing", tmp_path / "out") == []


def test_the_published_benchmark_is_the_current_codes_and_the_docs_link_it():
    from cqb.sim.code_hash import simulation_code_hash

    assert "(results/candidates.md)" in (REPO / "docs" / "extending.md").read_text()
    published = REPO / "docs" / "results" / "candidates.md"
    if published.exists():  # published by `cqb publish` after the candidates' run
        assert published.read_text().startswith(
            f"Generated by the pipeline from simulation code `{simulation_code_hash()}`"), (
            "docs/results/candidates.md was generated by other simulation code: rerun the candidates and `cqb publish`")


# ---------------------------------------------------------------- the example plugin


def test_the_example_plugin_is_greedy_on_rates_with_an_optimistic_prior():
    """In a subprocess: registering the plugin here would show it to every later test."""
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import numpy as np
        import greedy_rate
        from cqb.policies import PolicyEnv, make_policy, resolve_params
        env = PolicyEnv(n_servers=3, dim=2, horizon=50, arrival_rate=0.5, slack=0.1)
        policy, params = make_policy("greedy_rate", env, np.zeros((50, 2)), np.random.default_rng(0), {"prior": 2.0})
        assert params.prior == 2.0
        assert policy.choose(1, np.array([4, 7]), True) == (0, 0, False)  # untried: all rates 1, lowest index
        policy.observe(1, 4, 0, False)        # server 0: (0 + 2)/(1 + 2) = 2/3 < 1
        assert policy.choose(2, np.array([7]), False) == (0, 1, False)
        for t in range(3, 9):
            policy.observe(t, 7, 1, t % 2 == 0)   # server 1: 3 of 6 → (3 + 2)/(6 + 2) = 0.625 < 2/3
        assert policy.choose(9, np.array([7]), False)[1] == 2
        policy.observe(9, 7, 2, False); policy.observe(10, 7, 2, False)  # server 2: 2/4 = 0.5
        assert policy.choose(11, np.array([7]), False)[1] == 0
        np.testing.assert_allclose(policy.rates(), [2 / 3, 0.625, 0.5])
        for bad in (0.0, -1.0, float("inf")):
            try:
                resolve_params("greedy_rate", {"prior": bad}, env)
            except ValueError as error:
                assert "prior must be a positive number" in str(error), error
            else:
                raise AssertionError(bad)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script, str(REPO / "examples" / "greedy_rate" / "src")],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
