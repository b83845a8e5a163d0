"""cqb compare: two trees of run files paired by path, and two claims tables."""

import numpy as np
import pandas as pd
import pytest

from cqb.cli import main
from cqb.analysis.compare import compare_claims, compare_readings, compare_run_trees, comparison_markdown, paired_interval
from cqb.sim.runfile import save_run
from cqb.sim.simulate import RunResult

SPEC = {"kind": "synthetic", "n_servers": 3, "dim": 2, "arrival_rate": 0.5, "slack": 0.1}


def write(root, policy, seed, queue, oracle, label=None, **params):
    queue, oracle = np.asarray(queue), np.asarray(oracle)
    metadata = {"seed": seed, "policy": policy, "policy_params": params}
    result = RunResult(queue, oracle, np.zeros(queue.shape), np.zeros(queue.shape, dtype=bool), metadata)
    save_run(root / "inst" / "T10" / (label or policy) / f"seed{seed}.npz", result)


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

    result = simulate(SPEC, policy, None, 200, 3)
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
