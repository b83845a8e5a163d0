"""cqb compare: two trees of run files paired by path, and two claims tables."""

import numpy as np
import pandas as pd
import pytest

from cqb.cli import main
from cqb.analysis.compare import (compare_claims, compare_comparisons, compare_readings, compare_run_trees,
                                  comparison_markdown, instance_family, paired_interval)
from cqb.sim.runfile import save_run
from cqb.sim.simulate import RunResult

INSTANCE = {"kind": "synthetic", "n_servers": 3, "dim": 2, "arrival_rate": 0.5, "slack": 0.1}


def write(root, policy, seed, queue, oracle, label=None, instance="inst", **params):
    queue, oracle = np.asarray(queue), np.asarray(oracle)
    metadata = {"seed": seed, "policy": policy, "policy_params": params}
    result = RunResult(queue, oracle, np.zeros(queue.shape), np.zeros(queue.shape, dtype=bool), metadata)
    save_run(root / instance / "T10" / (label or policy) / f"seed{seed}.npz", result)


def trees(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    oracle = [0, 1, 1, 0, 0, 1, 0, 0, 1, 0]
    same = [0, 1, 2, 1, 1, 2, 1, 1, 2, 1]
    for root in (old, new):
        write(root, "cqb_opt", 0, same, oracle)
    write(old, "cqb_opt", 1, same, oracle)
    write(new, "cqb_opt", 1, same[:6] + [3, 3, 4, 9], oracle)  # parts at round 7, stalls (tail 9 > 5)
    write(old, "q_ucb", 0, same, oracle)
    # a changed default moves a run to another label: paired by what it ran, kernel aside
    write(old, "cqb_ts", 0, same, oracle, label="cqb_ts.bonus_scale0.03", bonus_scale=0.03)
    write(new, "cqb_ts", 0, same, oracle, label="cqb_ts", bonus_scale=0.03, kernel="compiled")
    write(old, "cqb_ts", 0, same, oracle, label="cqb_ts", bonus_scale=0.1)
    return old, new


def test_runs_are_paired_by_path_and_partings_found(tmp_path):
    old, new = trees(tmp_path)
    runs, extra = compare_run_trees(old, new)
    opt = runs.set_index("policy").loc["cqb_opt"]
    assert (opt["runs"], opt["identical_paths"], opt["median_first_difference"]) == (2, 1, 7)
    # tail: the last 10 % of 10 rounds is the last round: Q − Q* = 1 − 0, and 9 − 0 on the changed run
    assert opt["tail_regret_old"] == 1.0 and opt["tail_regret_new"] == 5.0
    assert extra["stall_changes"] == [{"run": "inst/T10/cqb_opt/seed1.npz", "first_difference": 7,
                                       "tail_regret_old": 1.0, "tail_regret_new": 9.0}]
    assert extra["only_old"] == ["inst/T10/cqb_ts/seed0.npz", "inst/T10/q_ucb/seed0.npz"]
    assert extra["only_new"] == []
    assert runs.set_index("policy").loc["cqb_ts", "identical_paths"] == 1
    assert len(extra["hashes"]["old"]) == 1
    text = comparison_markdown(runs, extra)
    assert "The same queue path in 2 of 3 runs (66.7 %)" in text
    # mean regret: seed 0 the same (0.8); seed 1's rises from 0.8 to 2.2 (+14 jobs over 10 rounds);
    # tail: +0 and +8 → mean +4, t interval 4 ± 12.706·4 (two seeds)
    assert opt["mean_difference"] == pytest.approx(0.7)
    assert (opt["tail_difference_low"], opt["tail_difference_high"]) == pytest.approx((4 - 12.7062 * 4, 4 + 12.7062 * 4),
                                                                                      rel=1e-4)
    assert "| inst | 10 | cqb_opt | 2 | 1 | 7 | 0.8 → 1.5 | +0.7 [-8.19, +9.59] | 1 → 5 | +4 [-46.8, +54.8] |" in text
    assert "| inst | 10 | cqb_ts | 1 | 1 |  | 0.8 → 0.8 | +0 [+0, +0] |" in text
    assert "Runs stalled on one side only (tail regret above 5.0 jobs): 1." in text
    assert "| inst/T10/cqb_opt/seed1.npz | 7 | 1 | 9 |" in text


def test_a_leftover_that_ran_the_same_is_superseded_by_the_newer_file(tmp_path):
    import os

    old, new = trees(tmp_path)
    write(new, "cqb_ts", 0, [0] * 10, [0] * 10, label="cqb_ts.bonus_scale0.03", bonus_scale=0.03)
    leftover = new / "inst" / "T10" / "cqb_ts.bonus_scale0.03" / "seed0.npz"
    os.utime(leftover, (1, 1))  # older than new/inst/T10/cqb_ts/seed0.npz
    runs, extra = compare_run_trees(old, new)
    assert extra["superseded"] == {"old": [], "new": ["inst/T10/cqb_ts.bonus_scale0.03/seed0.npz"]}
    assert runs.set_index("policy").loc["cqb_ts", "identical_paths"] == 1  # the newer file was paired
    assert "Superseded (an older file that ran the same as a newer one, left out): 0 in the old tree, 1 in the new." \
        in comparison_markdown(runs, extra)


def test_claims_with_a_changed_verdict_are_listed(tmp_path):
    columns = ["claim", "value", "verdict"]
    pd.DataFrame([["a", 0.1, "holds"], ["b", 0.5, "inconclusive"]], columns=columns).to_csv(
        tmp_path / "old.tsv", sep="\t", index=False)
    pd.DataFrame([["a", 0.12, "holds"], ["b", 1.5, "does not hold"], ["c", 2.0, "holds"]], columns=columns).to_csv(
        tmp_path / "new.tsv", sep="\t", index=False)
    claims = compare_claims(tmp_path / "old.tsv", tmp_path / "new.tsv")
    changed = claims[claims.verdict_old != claims.verdict_new]
    assert list(changed.claim) == ["b", "c"] and list(changed.verdict_old) == ["inconclusive", "absent"]
    old, new = trees(tmp_path)
    text = comparison_markdown(*compare_run_trees(old, new), claims)
    assert "Claims: 3 in either table; 2 changed verdict." in text
    assert "| b | inconclusive | does not hold | 0.5 | 1.5 | **yes** |" in text
    assert "| a | holds | holds | 0.1 | 0.12 |  |" in text  # every verdict, changed or not


def test_readings_are_listed_old_against_new(tmp_path):
    columns = ["claim", "reading", "value", "verdict"]
    pd.DataFrame([["a", "r1", 0.1, "holds"], ["a", "r2", 0.2, "holds"]], columns=columns).to_csv(
        tmp_path / "old.tsv", sep="\t", index=False)
    pd.DataFrame([["a", "r1", 0.1, "holds"], ["a", "r2", -0.2, "does not hold"]], columns=columns).to_csv(
        tmp_path / "new.tsv", sep="\t", index=False)
    readings = compare_readings(tmp_path / "old.tsv", tmp_path / "new.tsv")
    old, new = trees(tmp_path)
    text = comparison_markdown(*compare_run_trees(old, new), None, readings)
    assert "Registered readings: 2 in either table; 1 changed verdict." in text
    assert "| a | r2 | holds | does not hold | 0.2 | -0.2 | **yes** |" in text


def test_paired_interval_is_the_t_interval_of_the_differences():
    from scipy import stats

    differences = np.array([0.5, -0.25, 1.0, 0.0])
    half = stats.t.ppf(0.975, 3) * differences.std(ddof=1) / 2
    assert paired_interval(differences) == pytest.approx((0.3125 - half, 0.3125 + half))
    assert paired_interval(np.array([2.0, 2.0])) == (2.0, 2.0)


def test_command_writes_the_report_and_refuses_half_the_claims(tmp_path, capsys):
    old, new = trees(tmp_path)
    out = tmp_path / "report.md"
    assert main(["compare", str(old), str(new), "--out", str(out)]) == 0
    assert out.read_text().startswith("Run files compared: 3")
    assert main(["compare", str(old), str(new), "--old-claims", "x.tsv"]) == 2
    assert "give both --old-claims and --new-claims" in capsys.readouterr().err
    assert main(["compare", str(old), str(tmp_path / "nothing")]) == 2
    assert "no run below" in capsys.readouterr().err


@pytest.mark.parametrize("policy", ["cqb_opt"])
def test_a_real_run_compared_with_itself_is_identical(tmp_path, policy):
    from cqb.sim.simulate import simulate

    result = simulate(INSTANCE, policy, None, 200, 3)
    for root in ("old", "new"):
        save_run(tmp_path / root / "x" / "T200" / policy / "seed3.npz", result)
    runs, _ = compare_run_trees(tmp_path / "old", tmp_path / "new")
    assert int(runs["identical_paths"].sum()) == 1


def test_tail_regret_is_the_pipelines_own_window_for_a_policy_with_a_cutoff(tmp_path):
    """CQB-η-2's tail lies inside its final phase (rounds after the cutoff), as in
    cqb.analysis.summaries.run_summary: here the last round only, not the last two."""
    oracle = [0] * 20
    queue = [0] * 18 + [20, 0]
    for root in ("old", "new"):
        write(tmp_path / root, "cqb_eta2", 0, queue, oracle, cutoff=19)
    runs, _ = compare_run_trees(tmp_path / "old", tmp_path / "new")
    assert runs.loc[0, "tail_regret_old"] == runs.loc[0, "tail_regret_new"] == 0.0


COMPARISON_COLUMNS = ["claim", "source", "comparison", "policies", "value", "ci_low", "ci_high", "n", "verdict",
                      "decided_at_n"]


def comparison_tables(tmp_path):
    """dim_slower stays inconclusive while its 5→10 comparison turns from inconclusive to a tie."""
    old = [["dim_slower", "figures", "cqb_opt 5→10", "cqb_opt", 0.6, 0.26, 0.88, 10, "inconclusive", None],
           ["dim_slower", "figures", "cqb_opt 10→20", "cqb_opt", 0.33, 0.07, 0.7, 10, "inconclusive", None],
           ["dim_slower", "powered", "cqb_opt 5→10", "cqb_opt", 0.68, 0.61, 0.75, 217, "holds", 217],
           ["dim_slower", "powered", "cqb_opt 3→5", "cqb_opt", 0.8, 0.6, 0.9, 20, "holds", 20]]
    new = [["dim_slower", "figures", "cqb_opt 5→10", "cqb_opt", 0.5, 0.4, 0.6, 10, "tie within δ", None],
           ["dim_slower", "figures", "cqb_opt 10→20", "cqb_opt", 0.35, 0.09, 0.72, 10, "inconclusive", None],
           ["dim_slower", "powered", "cqb_opt 5→10", "cqb_opt", 0.68, 0.61, 0.75, 217, "holds", 217],
           ["dim_slower", "confirmatory", "cqb_opt 10→20", "cqb_opt", 0.39, 0.32, 0.47, 217, "does not hold", 217]]
    for name, rows in (("old", old), ("new", new)):
        pd.DataFrame(rows, columns=COMPARISON_COLUMNS).to_csv(tmp_path / f"{name}_comparisons.tsv", sep="\t",
                                                             index=False)
        pd.DataFrame([["dim_slower", 0.33, "inconclusive"]], columns=["claim", "value", "verdict"]).to_csv(
            tmp_path / f"{name}_claims.tsv", sep="\t", index=False)
    return tmp_path / "old_comparisons.tsv", tmp_path / "new_comparisons.tsv"


def test_a_comparison_that_changed_under_an_unchanged_claim_is_listed_and_counted(tmp_path):
    old_tsv, new_tsv = comparison_tables(tmp_path)
    comparisons = compare_comparisons(old_tsv, new_tsv)
    assert list(comparisons["verdict_old"]) == ["inconclusive", "inconclusive", "holds", "holds", "absent"]
    assert list(comparisons["verdict_new"]) == ["tie within δ", "inconclusive", "holds", "absent", "does not hold"]
    claims = compare_claims(tmp_path / "old_claims.tsv", tmp_path / "new_claims.tsv")
    old, new = trees(tmp_path)
    text = comparison_markdown(*compare_run_trees(old, new), claims, None, comparisons)
    assert "Changed verdicts: 0 of 1 claims, 3 of 5 comparisons." in text
    assert ("changed verdict: `dim_slower` (figures) cqb_opt 5→10: inconclusive → tie within δ; "
            "`dim_slower` (powered) cqb_opt 3→5: holds → absent; "
            "`dim_slower` (confirmatory) cqb_opt 10→20: absent → does not hold.") in text
    assert ("| dim_slower | figures | cqb_opt 5→10 | inconclusive | tie within δ | 0.6 [0.26, 0.88] n=10 | "
            "0.5 [0.4, 0.6] n=10 | **yes** |") in text
    assert ("| dim_slower | powered | cqb_opt 5→10 | holds | holds | 0.68 [0.61, 0.75] n=217 | "
            "0.68 [0.61, 0.75] n=217 |  |") in text  # every comparison, changed or not
    assert ("| dim_slower | figures | cqb_opt 10→20 | inconclusive | inconclusive | 0.33 [0.07, 0.7] n=10 | "
            "0.35 [0.09, 0.72] n=10 |  |") in text  # a new value under the same verdict is no change
    assert "| dim_slower | confirmatory | cqb_opt 10→20 | absent | does not hold |  | 0.39 [0.32, 0.47] n=217 |" in text


def test_command_takes_both_comparisons_tables_and_a_mechanism_file(tmp_path, capsys):
    old_tsv, new_tsv = comparison_tables(tmp_path)
    old, new = trees(tmp_path)
    why = tmp_path / "why.md"
    why.write_text("At the first differing round the new projection's objective is lower by 1e-12.\n")
    out = tmp_path / "report.md"
    assert main(["compare", str(old), str(new), "--old-comparisons", str(old_tsv), "--new-comparisons", str(new_tsv),
                 "--mechanism", str(why), "--out", str(out)]) == 0
    text = out.read_text()
    assert "Changed verdicts: 3 of 5 comparisons." in text
    assert text.endswith("## Why the paths changed\n\nAt the first differing round the new projection's objective "
                         "is lower by 1e-12.\n")
    # the powered readings' table is a claims table (claim, value, verdict) of its own
    assert main(["compare", str(old), str(new), "--old-powered", str(tmp_path / "old_claims.tsv"),
                 "--new-powered", str(tmp_path / "new_claims.tsv"), "--out", str(out)]) == 0
    assert "Changed verdicts: 0 of 1 powered readings." in out.read_text()
    assert "Powered readings (fresh seeds, sequential looks): 1 in either table; 0 changed verdict." in out.read_text()
    assert main(["compare", str(old), str(new), "--new-comparisons", str(new_tsv)]) == 2
    assert "give both --old-comparisons and --new-comparisons" in capsys.readouterr().err
    assert main(["compare", str(old), str(new), "--mechanism", str(tmp_path / "none.md")]) == 2
    assert "none.md" in capsys.readouterr().err
    assert main(["compare", str(old), str(new), "--old-comparisons", str(tmp_path / "old_claims.tsv"),
                 "--new-comparisons", str(new_tsv)]) == 2
    assert "is not a comparisons table" in capsys.readouterr().err.strip()


def test_changed_paths_are_counted_per_policy_and_instance_family(tmp_path):
    assert instance_family("synth_K5_d10_lam0.7_eps0.1_acc0.005") == "synth_K5_d10"
    assert instance_family("pool_mnist-C10_lam0.15") == instance_family("pool_mnist_lam0.15") == "pool_mnist"
    assert instance_family("pool_heart_disease_lam0.2") == "pool_heart_disease"
    old, new = tmp_path / "old", tmp_path / "new"
    same, oracle = [0, 1, 2, 1, 1, 2, 1, 1, 2, 1], [0] * 10
    other = same[:4] + [2] * 6
    d10, d5 = "synth_K5_d10_lam0.7_eps0.1_acc0.005", "synth_K5_d5_lam0.7_eps0.1_acc0.005"
    for instance, label, seed, changed in [(d10, "cqb_opt", 0, True), (d10, "cqb_opt", 1, True),
                                           (d10, "cqb_opt.bonus_scale0.1", 0, True), (d5, "cqb_opt", 0, False),
                                           ("pool_mnist-C10_lam0.15", "cqb_eps", 0, True),
                                           ("pool_mnist_lam0.15", "cqb_eps", 0, False)]:
        policy = label.split(".")[0]
        write(old, policy, seed, same, oracle, label=label, instance=instance, bonus_scale=label)
        write(new, policy, seed, other if changed else same, oracle, label=label, instance=instance, bonus_scale=label)
    text = comparison_markdown(*compare_run_trees(old, new))
    assert "| policy | pool_mnist | synth_K5_d10 | synth_K5_d5 | all |" in text
    assert "| cqb_opt |  | 3/3 | 0/1 | 3/4 |" in text  # both labels of CQB-Opt together, none of it on MNIST
    assert "| cqb_eps | 1/2 |  |  | 1/2 |" in text  # a pool's variants together
    assert "| all | 1/2 | 3/3 | 0/1 | 4/6 |" in text
