"""The Snakemake pipeline end to end, in a throw-away copy of the workflow.

Slow (about two minutes): `pytest -m "not slow"` skips it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import (CAN_RUN_REAL_DATA, REPO, SMOKE_CONFIG, copy_workflow, shared_smoke_run,
                      smoke_args, smoke_targets, snakemake)
from cqb.analysis.aggregate import read_table
from cqb.analysis.claims.tables import NO_ALTERNATIVE_READING, UNDECIDED_BY_READINGS

pytestmark = pytest.mark.slow

SMOKE_RESULTS = Path("results/smoke")
# 8 policies × 2 seeds on the base instance + CQB-ε and CQB-Opt × 2 seeds at ϵ = 0.15
# (ϵ = 0.1 is shared with the base instance)
FIG2_SMOKE_RUNS = 16 + 4
ALL_POLICIES = {"cqb_eps", "cqb_opt", "random", "oracle", "cqb_eps_opt", "cqb_ts", "q_ucb", "q_ths"}


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """The session's one end-to-end run of config/smoke.yaml (conftest.shared_smoke_run)."""
    return shared_smoke_run(tmp_path_factory)


def test_lint_is_clean():
    process = snakemake(REPO, "--lint", check=False)
    output = process.stdout + process.stderr
    assert process.returncode == 0 and "Lints for" not in output, output[-6000:]


def test_a_plain_snakemake_uses_the_projects_profile(workflow_copy):
    # `snakemake --cores N` as users type it, from the root: Snakemake finds
    # profiles/default/ by itself (and says so), so its settings apply
    process = snakemake(workflow_copy, "-n", "fig2", *SMOKE_CONFIG)
    assert ("Using workflow specific profile profiles/default for setting default command line arguments"
            in process.stderr), process.stderr[-2000:]
    # and its settings apply: its logger's dry run counts the jobs per rule and
    # reason instead of listing them; -p lists them with their commands
    assert f"{FIG2_SMOKE_RUNS} simulate: missing output" in process.stdout and "run --instance-spec" not in process.stdout
    listed = snakemake(workflow_copy, "-n", "-p", "fig2", *SMOKE_CONFIG)
    assert listed.stdout.count(" run --instance-spec ") == FIG2_SMOKE_RUNS
    plain = snakemake(workflow_copy, "-n", "fig2", *SMOKE_CONFIG, "--workflow-profile", "none")
    assert "Using workflow specific profile" not in plain.stderr and "simulate: missing output" not in plain.stdout


def test_the_profiles_progress_display_is_short_and_the_commands_go_to_the_log(workflow_copy):
    # a real run through profiles/default, its output piped: the display's
    # fixed lines only, while Snakemake's log keeps every job's command
    process = snakemake(workflow_copy, "fig2", *SMOKE_CONFIG)
    output = process.stdout + process.stderr
    assert "Workflow Finished" in output and "run --instance-spec" not in output, output[-3000:]
    assert len(output.encode()) < 3000, len(output.encode())  # each job's command alone is ~1.75 KB
    (log,) = (workflow_copy / ".snakemake" / "log").glob("*.snakemake.log")
    lines = log.read_text().splitlines()
    commands = [line for line in lines if line.startswith("Shell command:") and " run --instance-spec " in line]
    assert len(commands) == FIG2_SMOKE_RUNS
    # every simulate job ran its command in sh (execution.simulate_in_sh), and ran it well
    assert simulate_job_shells(lines) == [f"shell_exec={shutil.which('sh')}"] * FIG2_SMOKE_RUNS
    # switched off, the jobs get Snakemake's own shell (a dry run lists what they would get)
    listing = snakemake(workflow_copy, "fig2", "-n", "-p", "--forcerun", "simulate", *SMOKE_CONFIG,
                        "--config", "execution={simulate_in_sh: false}")
    assert simulate_job_shells((listing.stdout + listing.stderr).splitlines()) == ["default"] * FIG2_SMOKE_RUNS


def simulate_job_shells(lines) -> list[str]:
    """Per simulate job of a Snakemake log or listing, the shell its resources
    name (shell_exec=...), or "default" where they name none."""
    shells, in_simulate = [], False
    for line in lines:
        if line.strip().endswith("rule simulate:"):
            in_simulate = True
        elif in_simulate and line.strip().startswith("resources:"):
            named = [part for part in line.replace(",", " ").split() if part.startswith("shell_exec=")]
            shells.append(named[0] if named else "default")
            in_simulate = False
    return shells


@pytest.mark.skipif(not CAN_RUN_REAL_DATA, reason="the claims need the real-data experiments (mirror, torchvision)")
def test_smoke_run_builds_the_claims_table_with_provenance(smoke_run):
    import json

    import pandas as pd

    from cqb.analysis.verdict_rules import HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE, TIE
    from cqb.sim.code_hash import simulation_code_hash

    workdir, _ = smoke_run
    figures = workdir / SMOKE_RESULTS / "figures"
    config = yaml.safe_load((workdir / "config" / "config.yaml").read_text())
    claims = pd.read_csv(figures / "claims.tsv", sep="\t", keep_default_na=False)
    names = claims["claim"].tolist()
    registry = [c["name"] for c in config["claims"]]
    assert names[:len(registry)] == registry and names[-1] == "tuned_values_used"
    assert all(name.startswith("eps_best_") for name in names[len(registry):-1])  # Figure 7's, generated
    assert set(claims["verdict"]) <= {HOLDS, FAILS, INCONCLUSIVE, TIE, NOT_TESTABLE}
    marks = dict(zip(claims["claim"], claims["mark"]))
    assert marks["slack_longer_exploration"] == marks["tuned_values_used"] == "by construction"
    assert set(marks.values()) <= {"robust", "reading-dependent", "by construction", UNDECIDED_BY_READINGS,
                                   NO_ALTERNATIVE_READING}
    readings = pd.read_csv(figures / "claims_readings.tsv", sep="\t", keep_default_na=False)
    primary = readings[readings["primary"].astype(str) == "True"]
    assert primary["claim"].tolist() == names[:-1]  # one primary reading per claim, in order
    assert len(readings[readings["claim"] == "eps_best_mnist"]) == 3  # primary and two alternatives
    assert (figures / "claims_readings.md").read_text().count("(primary)") == len(primary)
    calibration = pd.read_csv(figures / "calibration.tsv", sep="\t", keep_default_na=False)
    replication = {"replication null", "replication within δ", "replication shrunken"}  # the replication study's
    assert {"null", "effect"} <= set(calibration["scenario"]) <= {"null", "effect", "edge of δ"} | replication
    sequential = calibration[calibration["scenario"].isin(["null", "effect"])]
    assert (sequential.groupby("claim").size() == 2).all()
    smoke_powered = [c["name"] for c in yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())["powered"]["claims"]]
    assert claims.loc[claims["claim"].isin(smoke_powered), "powered_verdict"].notna().all()
    assert "powered verdict" in (figures / "claims.md").read_text()
    assert "| claim |" in (figures / "claims.md").read_text()
    record = json.loads((figures / "provenance.json").read_text())
    assert record["code_hash"] == simulation_code_hash() and len(record["claims_registry_hash"]) == 16
    # the processed pools the runs played on, each with its checksum
    assert any("mnist" in path for path in record["pool_files"])
    assert all(len(checksum) == 16 for checksum in record["pool_files"].values())
    results = (figures / "results.md").read_text()
    assert "**synthetic_base**" in results and "Instances of **synthetic_slack**" in results
    tuning = pd.read_csv(figures / "tuning.tsv", sep="\t")
    assert tuning.groupby("policy")["chosen"].sum().eq(1).all()  # one choice per tuned policy
    runs = pd.read_csv(workdir / SMOKE_RESULTS / "aggregate" / "stall_check.runs.tsv", sep="\t")
    assert set(runs["seed"]) == {100, 101, 102}  # evaluation seeds disjoint from tuning's 1000+


@pytest.mark.skipif(not CAN_RUN_REAL_DATA, reason="the claims need the real datasets' mirror and torchvision")
def test_smoke_runs_claims_markdown_is_what_publishing_renders_from_its_tables(smoke_run, tmp_path):
    # `cqb publish` renders claims.md and claims_readings.md from the published
    # TSVs (cqb.publishing.republish.render_claims_pages): the pipeline's own
    # pages must be those bytes, not a rendering of the unrounded floats
    import json

    from cqb.publishing.republish import render_claims_pages

    workdir, _ = smoke_run
    figures = workdir / SMOKE_RESULTS / "figures"
    for name in ("claims.tsv", "claims_design.tsv", "claims_readings.tsv"):
        shutil.copy2(figures / name, tmp_path / name)
    render_claims_pages(tmp_path, json.loads((figures / "provenance.json").read_text()))
    for name in ("claims.md", "claims_readings.md"):
        assert (tmp_path / name).read_bytes() == (figures / name).read_bytes(), name


def test_smoke_run_builds_the_powered_reading_look_by_look(smoke_run):
    import json

    import pandas as pd

    workdir, _ = smoke_run
    smoke = yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())["powered"]
    table = pd.read_csv(workdir / SMOKE_RESULTS / "figures" / "claims_powered.tsv", sep="\t", keep_default_na=False)
    assert table["claim"].tolist() == [c["name"] for c in smoke["claims"]]
    for entry in smoke["claims"]:
        looks = entry.get("looks", smoke["looks"])
        states = sorted((workdir / SMOKE_RESULTS / "powered" / entry["name"]).glob("look*.json"))
        state = json.loads(states[-1].read_text())
        assert [h["n"] for h in state["history"]] == looks[:len(states)]  # looks in order, none skipped
        assert state["continue"] is False
        row = table[table["claim"] == entry["name"]].iloc[0]
        assert row["n_seeds"] == state["n"] and row["cap"] == looks[-1]
    # the powered runs are on their own seeds, from powered.first_seed on
    powered_runs = list((workdir / SMOKE_RESULTS / "runs").glob("*/T*/*/seed6????.npz"))
    assert powered_runs and all(60000 <= int(p.stem[4:]) < 60000 + 5 for p in powered_runs)
    assert not list((workdir / SMOKE_RESULTS / "runs").glob("*/T*/*/seed2????.npz"))  # retired seeds
    stage2 = pd.read_csv(workdir / SMOKE_RESULTS / "figures" / "tuning_stage2.tsv", sep="\t")
    assert (stage2["n_runs"] == 3).all() and stage2.groupby("policy")["chosen"].sum().eq(1).all()


@pytest.mark.skipif(not CAN_RUN_REAL_DATA, reason="the claims need the real-data experiments (mirror, torchvision)")
def test_smoke_run_builds_the_confirmatory_study_and_the_per_policy_readings(smoke_run):
    import pandas as pd

    workdir, _ = smoke_run
    figures = workdir / SMOKE_RESULTS / "figures"
    smoke = yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())["confirmatory"]
    registered = yaml.safe_load((workdir / "config" / "config.yaml").read_text())["confirmatory"]
    (entry,) = smoke["claims"]
    name = f"{entry['name']}__{entry['policy']}"
    table = pd.read_csv(figures / "claims_confirmatory.tsv", sep="\t", keep_default_na=False)
    assert table["claim"].tolist() == [name] and table["n_seeds"].tolist() == [entry["seeds"]]
    assert table["cap"].tolist() == [entry["seeds"]] and table["looks"].str.count(";").tolist() == [0]  # one look
    # its runs: the one policy, on the smoke study's seeds; none on the registered seeds
    runs = list((workdir / SMOKE_RESULTS / "runs").glob(f"*/T*/*/seed{str(smoke['first_seed'])[:3]}???.npz"))
    assert len(runs) == len(entry["sweep_values"]) * entry["seeds"]
    assert {p.parent.name for p in runs} == {entry["policy"]}
    assert all(smoke["first_seed"] <= int(p.stem[4:]) < smoke["first_seed"] + entry["seeds"] for p in runs)
    assert not list((workdir / SMOKE_RESULTS / "runs").glob(f"*/T*/*/seed{registered['first_seed']}.npz"))
    per_policy = pd.read_csv(figures / "claims_per_policy.tsv", sep="\t", keep_default_na=False)
    assert per_policy.groupby("claim", sort=False)["policy"].apply(list).to_dict() == {
        "servers_slower": ["cqb_eps", "cqb_opt"], "dim_slower": ["cqb_eps", "cqb_opt"]}
    by = {(r.claim, r.policy): r for r in per_policy.itertuples()}
    assert by[("dim_slower", "cqb_opt")].source == "confirmatory"
    assert by[("dim_slower", "cqb_opt")].confirmatory_verdict == table["verdict"].iloc[0]
    assert by[("dim_slower", "cqb_eps")].by_construction and not by[("servers_slower", "cqb_eps")].by_construction
    # every comparison of every source, one row each (what cqb compare sets side by side)
    comparisons = pd.read_csv(figures / "claims_comparisons.tsv", sep="\t", keep_default_na=False)
    assert set(comparisons["source"]) == {"figures", "powered", "confirmatory"}
    assert comparisons.loc[comparisons["source"] == "confirmatory", "claim"].unique().tolist() == [name]
    assert not comparisons.duplicated(["claim", "source", "comparison"]).any()


@pytest.mark.skipif(not CAN_RUN_REAL_DATA, reason="the per-policy readings need the real-data claims")
def test_smoke_run_builds_the_replication_study(smoke_run):
    import pandas as pd

    from cqb.analysis.replication_statistics import REPLICATION_COLUMNS

    workdir, _ = smoke_run
    smoke = yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())["replication"]
    table = pd.read_csv(workdir / SMOKE_RESULTS / "figures" / "claims_replication.tsv", sep="\t",
                        keep_default_na=False)
    assert tuple(table.columns) == REPLICATION_COLUMNS
    assert table[["claim", "policy"]].values.tolist() == [[e["name"], e.get("policy", "")] for e in smoke["claims"]]
    assert table["replication_n"].tolist() == [e["seeds"] for e in smoke["claims"]]
    assert set(table["result"]) <= {"replicated", "not replicated", "contradicted"}
    assert (table["replication_level"] == 0.95).all()  # one look at its own α
    runs = list((workdir / SMOKE_RESULTS / "runs").glob(f"*/T*/*/seed{str(smoke['first_seed'])[:3]}???.npz"))
    assert runs and all(smoke["first_seed"] <= int(p.stem[4:]) < smoke["first_seed"] + 3 for p in runs)


def test_smoke_run_builds_figures_and_tables(smoke_run):
    workdir, seconds = smoke_run
    figures = workdir / SMOKE_RESULTS / "figures"
    for figure in [t for t in smoke_targets() if t.startswith("fig")]:
        for ext in ("pdf", "png", "tsv"):
            assert (figures / f"{figure}.{ext}").stat().st_size > 0, f"{figure}.{ext}"
    smoke = yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())

    fig2 = read_table(figures / "fig2.tsv")
    assert sorted(fig2["panel"].unique()) == [1, 2, 3]
    left = fig2[fig2["panel"] == 1]
    assert set(left["policy"]) == ALL_POLICIES
    assert set(fig2[fig2["panel"] == 2]["policy"]) == {"cqb_eps"}
    slack_values = {str(v) for v in smoke["experiments"]["synthetic_slack"]["sweep"]["slack"]}
    assert set(fig2[fig2["panel"] == 2]["sweep_value"]) == slack_values
    horizon = smoke["experiments"]["synthetic_base"]["horizon"]
    assert len(left) == len(ALL_POLICIES) * horizon

    fig3 = read_table(figures / "fig3.tsv")
    assert sorted(fig3["panel"].unique()) == [1, 2, 3, 4]
    assert set(fig3[fig3["panel"] == 1]["sweep_param"]) == {"n_servers"}
    assert set(fig3[fig3["panel"] == 4]["sweep_param"]) == {"dim"}

    for table in (fig2, fig3):
        n = table["n_seeds"].to_numpy()
        assert (n == smoke["experiments"]["synthetic_base"]["seeds"]).all()
        for column in ("queue_mean", "oracle_mean"):
            values = table[column].to_numpy()
            assert (values >= 0).all()
            # a mean of integers over n seeds is a multiple of 1/n
            np.testing.assert_allclose(values * n, np.round(values * n), atol=1e-4)
        np.testing.assert_allclose(table["regret_mean"], table["queue_mean"] - table["oracle_mean"], atol=2e-6)
        assert (table["queue_sd"] >= 0).all()
        # the oracle curve's regret is zero
        oracle = table[table["policy"] == "oracle"]
        assert (oracle["regret_mean"] == 0).all()
    print(f"smoke run: {seconds:.1f} s")


def test_smoke_run_builds_fig5_rate_tables(smoke_run):
    workdir, _ = smoke_run
    smoke = yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())
    config = yaml.safe_load((workdir / "config" / "config.yaml").read_text())
    experiment = config["experiments"][config["rates"]["experiment"]]
    policies = experiment["policies"]
    horizons = smoke["experiments"][config["rates"]["experiment"]]["sweep"]["horizon"]
    by_horizon = {int(k): v for k, v in smoke["experiments"][config["rates"]["experiment"]]
                  ["seeds_by_horizon"].items()}
    aggregate = workdir / SMOKE_RESULTS / "aggregate"
    summary = read_table(aggregate / "regret_rates.tsv")
    summary = summary[summary["experiment"] == config["rates"]["experiment"]]  # the base panel
    assert len(summary) == len(policies) * len(horizons)
    assert list(summary["policy"].unique()) == policies
    for policy in policies:
        assert sorted(summary[summary["policy"] == policy]["horizon"]) == sorted(horizons)
    for _, row in summary.iterrows():  # seeds per horizon as configured
        expected = by_horizon.get(row["horizon"], smoke["experiments"][config["rates"]["experiment"]]["seeds"])
        assert row["n_runs"] == expected
    summary = summary.dropna(subset=["ci_low"])
    assert (summary["ci_low"] <= summary["estimate"] + 1e-6).all()
    assert (summary["estimate"] <= summary["ci_high"] + 1e-6).all()
    np.testing.assert_allclose(summary["final_regret_mean"],
                               summary["final_queue_mean"] - summary["final_oracle_mean"], atol=2e-6)
    slopes = read_table(aggregate / "regret_slopes.tsv")
    assert set(slopes["experiment"]) == {config["rates"]["experiment"], *config["rates"]["extra_experiments"]}
    slopes = slopes[slopes["experiment"] == config["rates"]["experiment"]]
    assert list(slopes["policy"]) == policies
    assert {"slope", "ci_low", "ci_high", "horizons_used", "horizons_dropped"} <= set(slopes.columns)
    fig5 = read_table(workdir / SMOKE_RESULTS / "figures" / "fig5.tsv")
    assert len(fig5[fig5["experiment"] == config["rates"]["experiment"]]) == len(policies) * len(horizons)
    assert {"slope", "slope_ci_low", "slope_ci_high", "in_fit"} <= set(fig5.columns)
    figures = workdir / SMOKE_RESULTS / "figures"
    assert len(read_table(figures / "fig5_slopes.tsv")) == len(read_table(aggregate / "regret_slopes.tsv"))
    assert "Figure 5" in (figures / "fig5_summary.md").read_text()
    # one run file per (policy, T, seed), keyed by T
    runs = workdir / SMOKE_RESULTS / "runs"
    for horizon in horizons:
        n = by_horizon.get(horizon, smoke["experiments"][config["rates"]["experiment"]]["seeds"])
        # (other smoke experiments also run T = 300 on other instances)
        # (the stall check runs the same instance and T on seeds from 100 on)
        files = [f for f in runs.glob(f"synth_K5_d5_lam0.7_eps0.1_acc0.005/T{horizon}/{policies[0]}/seed*.npz")
                 if int(f.stem.removeprefix("seed")) < 100]
        assert len(files) == n, horizon
        with np.load(files[0]) as run:
            assert run["queue"].shape == (horizon,)


def test_smoke_run_builds_fig6_bonus_panels(smoke_run):
    workdir, _ = smoke_run
    smoke = yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())
    scales = [str(v) if v != 1.0 else "1" for v in smoke["experiments"]["bonus_sensitivity"]["sweep"]["bonus_scale"]]
    fig6 = read_table(workdir / SMOKE_RESULTS / "figures" / "fig6.tsv")
    assert sorted(fig6["panel"].unique()) == [1, 2, 3, 4]
    for panel, policy in ((1, "cqb_opt"), (2, "cqb_eps")):
        rows = fig6[fig6["panel"] == panel]
        assert {p.split(".")[0] for p in rows["policy"]} == {policy, "oracle"}
        swept = rows[rows["policy"] != "oracle"]
        assert sorted(set(swept["sweep_value"])) == sorted(scales)
        # the oracle does not take c_β: drawn once per panel
        assert rows[rows["policy"] == "oracle"]["sweep_value"].nunique() == 1
    assert (fig6["queue_mean"] >= 0).all()


@pytest.mark.skipif(not CAN_RUN_REAL_DATA, reason="needs workflow/rules/data.smk, ../shared/datasets and torchvision")
def test_smoke_run_builds_fig4(smoke_run):
    workdir, _ = smoke_run
    fig4 = read_table(workdir / SMOKE_RESULTS / "figures" / "fig4.tsv")
    assert sorted(fig4["panel"].unique()) == [1, 2, 3]
    for panel in (1, 2, 3):
        assert set(fig4[fig4["panel"] == panel]["policy"]) == ALL_POLICIES
    assert (fig4["queue_mean"] >= 0).all()


@pytest.mark.skipif(not CAN_RUN_REAL_DATA, reason="the claims need the real-data experiments (mirror, torchvision)")
def test_snakemakes_own_report_describes_the_workflow_and_files_each_output_under_its_heading(smoke_run):
    """`snakemake --report report.zip`: the workflow's description, every
    figure and claims table flagged for the report with its caption, under
    the headings of the project's own report (cqb.publishing.report.SECTIONS)."""
    import json
    import re
    import zipfile

    from cqb.publishing.report import SECTIONS

    workdir, _ = smoke_run
    snakemake(workdir, "--report", "report.zip", *smoke_args(*smoke_targets()))
    with zipfile.ZipFile(workdir / "report.zip") as archive:
        files = {Path(name).name for name in archive.namelist() if "/data/raw/" in name}
        page = archive.read("report/report.html").decode()
    titles = dict(SECTIONS)
    paper, beyond, verdicts = "The paper's figures", "Beyond the paper", "Verdicts"
    headings = {f"{name}.png": (paper, titles[name]) for name in ("fig2", "fig3", "fig4")}
    headings |= {f"{name}.png": (beyond, titles[name].removeprefix("Beyond the paper — ")) for name in ("fig5", "fig6")}
    headings |= {"tuning.png": (verdicts, titles["tuning"]), "claims.md": (verdicts, "Claims"),
                 "claims_readings.md": (verdicts, "Claims"),
                 "calibration.png": (verdicts, "Error rates of the powered reading, simulated")}
    assert files == set(headings), files
    for name, (category, subcategory) in headings.items():
        block = re.search(re.escape(json.dumps(category)) + r": \{(.*?)\}", page)
        assert block, category
        listed = re.search(re.escape(json.dumps(subcategory)) + r": \[([^\]]*)\]", block.group(1))
        assert listed and f'"{SMOKE_RESULTS}/figures/{name}"' in listed.group(1), (name, category, subcategory)
    assert "Queue Length Regret Bounds for Contextual Queueing Bandits" in page  # workflow/report/workflow.rst
    for caption in ("Figure 2 (synthetic, base instance).", "Every registered reading of every claim"):
        assert caption in page, caption


def test_second_run_has_nothing_to_do(smoke_run):
    workdir, _ = smoke_run
    process = snakemake(workdir, "-n", *smoke_args(*smoke_targets()))
    assert "Nothing to be done" in process.stdout + process.stderr, process.stdout[-3000:]


def test_restyling_does_not_rerun_simulations(smoke_run):
    workdir, _ = smoke_run
    restyled = ["--config", "figures={fig2: {dpi: 60, panels: [{experiment: synthetic_base}]}}"]
    process = snakemake(workdir, "-n", *smoke_args("fig2"), *restyled)
    assert "simulate" not in process.stdout.split("Job stats:")[1].split("Reasons")[0]


def test_aggregates_are_identical_with_one_and_two_cores(smoke_run, tmp_path):
    workdir, _ = smoke_run
    serial = copy_workflow(tmp_path / "repo")
    snakemake(serial, *smoke_args("fig2", "fig3", cores=1))
    tables = sorted((workdir / SMOKE_RESULTS / "aggregate").glob("synthetic_*.tsv"))
    assert len(tables) == 4 * 3  # per experiment: the per-round, per-run and per-curve tables
    for table in tables:
        assert (serial / SMOKE_RESULTS / "aggregate" / table.name).read_bytes() == table.read_bytes(), table.name
    for name in ("fig2.tsv", "fig3.tsv"):
        assert (serial / SMOKE_RESULTS / "figures" / name).read_bytes() == \
            (workdir / SMOKE_RESULTS / "figures" / name).read_bytes(), name


# Each refusal and its message: tests/test_config_experiments.py, without
# Snakemake; here one of each kind (an instance value, a policy name, a
# parameter's type) through the workflow, to its exit code and output.
@pytest.mark.parametrize("override, key, value", [
    ("experiments: {synthetic_base: {instance: {arrival_rate: 1.5}}}", "arrival_rate", "1.5"),
    ("experiments: {synthetic_base: {policies: [cqb_eps, cqb_magic]}}", "policies", "cqb_magic"),
    ("defaults: {policy_params: {bonus_scale: abc}}", "bonus_scale", "abc"),
])
def test_bad_config_value_is_named(workflow_copy, override, key, value):
    (workflow_copy / "config" / "bad.yaml").write_text(override + "\n")
    process = snakemake(workflow_copy, "-n", "fig2", "--configfile", "config/bad.yaml", check=False)
    output = process.stdout + process.stderr
    assert process.returncode != 0
    assert key in output and value in output, output[-3000:]


def test_unknown_top_level_key_is_refused_in_one_line(workflow_copy):
    process = snakemake(workflow_copy, "-n", "--config", "experimentz={}", check=False)
    output = process.stdout + process.stderr
    named = [line for line in output.splitlines() if "experimentz" in line]
    assert process.returncode != 0 and "Traceback" not in output, output[-3000:]
    assert len(named) == 1 and named[0].startswith("config error: unknown config key experimentz"), output


def test_horizon_sweep_expands_to_one_run_set_per_horizon(workflow_copy):
    """sweep: {horizon: [...]} gives run files under T{horizon}, with per-horizon seeds."""
    (workflow_copy / "config" / "sweep.yaml").write_text(
        "experiments: {rates_horizons: {seeds: 4, seeds_by_horizon: {500: 2},"
        " policies: [cqb_opt], sweep: {horizon: [250, 500, 750]}}}\n")
    process = snakemake(workflow_copy, "-n", "-p", "regret_rates", "--configfile", "config/smoke.yaml",
                        "config/sweep.yaml")
    outputs = [line.split("output: ", 1)[1] for line in process.stdout.splitlines() if "output: " in line]
    runs = [o for o in outputs if "/runs/synth_K5_" in o]  # (not the K = 9 panel's runs)
    counts = {h: sum(f"/T{h}/cqb_opt/" in o for o in runs) for h in (250, 500, 750)}
    assert counts == {250: 4, 500: 2, 750: 4}, counts
    assert len(runs) == 10


def test_horizon_sweep_rejects_a_bad_horizon(workflow_copy):
    (workflow_copy / "config" / "bad.yaml").write_text(
        "experiments: {rates_horizons: {sweep: {horizon: [300, 2.5]}}}\n")
    process = snakemake(workflow_copy, "-n", "fig5", "--configfile", "config/smoke.yaml", "config/bad.yaml",
                        check=False)
    output = process.stdout + process.stderr
    assert process.returncode != 0 and "horizon" in output and "2.5" in output, output[-3000:]


def test_interrupted_run_resumes_without_partial_files(workflow_copy):
    """SIGKILL the whole run (Snakemake and its jobs) mid-way, then resume."""
    runs = workflow_copy / SMOKE_RESULTS / "runs"
    process = subprocess.Popen([sys.executable, "-m", "snakemake", *smoke_args("fig2")],
                               cwd=workflow_copy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(runs.rglob("seed*.npz"))) < 3:
            assert process.poll() is None, "the run ended before it could be interrupted"
            assert time.monotonic() < deadline, "no run files after two minutes"
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    finished = list(runs.rglob("seed*.npz"))
    assert finished and len(finished) < FIG2_SMOKE_RUNS, "interrupt came too late to test anything"
    for path in finished:  # every visible run file is complete
        with np.load(path) as data:
            assert data["queue"].shape == data["oracle_queue"].shape

    # a hard kill leaves Snakemake's lock, and a job killed after its file was
    # renamed into place but before Snakemake noted it counts as incomplete
    snakemake(workflow_copy, "--unlock", *SMOKE_CONFIG)
    snakemake(workflow_copy, *smoke_args("fig2"), "--rerun-incomplete")
    assert len(list(runs.rglob("seed*.npz"))) == FIG2_SMOKE_RUNS
    leftovers = [p for p in runs.rglob("*") if p.is_file() and p.name.startswith(".")]
    assert not leftovers, f"temporary files left behind: {leftovers}"
