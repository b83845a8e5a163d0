"""The tuning criterion: fewest stalled runs first, then the smallest mean regret."""

import pandas as pd
import pytest

from cqb.analysis.tuning import base_label, choices, mismatches, tuning_table
from cqb.figures.tuning_plot import plot_tuning


def runs(grid: dict, parameter="bonus_scale"):
    """{(label, value): [(mean_regret, stalled) per seed]} → a runs table."""
    rows = []
    for (label, value), per_seed in grid.items():
        for seed, (regret, stalled) in enumerate(per_seed, start=1000):
            rows.append({"policy": label, "sweep_param": parameter, "sweep_value": value, "seed": seed,
                         "mean_regret": regret, "tail_regret": 100.0 if stalled else 0.1,
                         "stalled": stalled})
    return pd.DataFrame(rows)


def test_a_value_without_stalls_beats_a_lower_mean_with_one_stall():
    table = tuning_table(runs({
        ("cqb_opt.bonus_scale0.01", "0.01"): [(0.5, False), (0.4, False), (60.0, True)],
        ("cqb_opt", "0.03"): [(0.6, False), (0.5, False), (0.2, False)],
        ("cqb_opt.bonus_scale0.1", "0.1"): [(0.9, False), (1.0, False), (0.8, False)],
    }))
    chosen = choices(table)
    assert chosen.to_dict("records") == [{"policy": "cqb_opt", "parameter": "bonus_scale", "value": "0.03",
                                          "n_runs": 3, "n_stalled": 0, "mean_regret": pytest.approx(1.3 / 3)}]
    stalled_row = table[table["value"] == "0.01"].iloc[0]
    assert (stalled_row["n_stalled"], stalled_row["stalled_seeds"]) == (1, "1002")


def test_when_every_value_stalls_the_fewest_stalls_win():
    table = tuning_table(runs({
        ("q_ucb.explore_constant1", "1"): [(5.0, True), (6.0, True), (0.1, False)],
        ("q_ucb", "3"): [(50.0, True), (0.2, False), (0.3, False)],
    }, parameter="explore_constant"))
    assert choices(table)["value"].tolist() == ["3"]


def test_each_policy_is_tuned_on_its_own_and_budgets_must_match():
    grid = {("cqb_opt", "0.03"): [(1.0, False)] * 2, ("cqb_opt.bonus_scale0.1", "0.1"): [(2.0, False)] * 2,
            ("cqb_ts", "0.03"): [(3.0, False)] * 2, ("cqb_ts.bonus_scale0.1", "0.1"): [(0.5, False)] * 2}
    chosen = choices(tuning_table(runs(grid)))
    assert dict(zip(chosen["policy"], chosen["value"])) == {"cqb_opt": "0.03", "cqb_ts": "0.1"}
    grid[("cqb_ts.bonus_scale0.1", "0.1")] = [(0.5, False)]
    with pytest.raises(ValueError, match="cqb_ts.*different numbers"):
        tuning_table(runs(grid))


def test_mismatches_name_the_policy_and_both_values():
    chosen = pd.DataFrame([{"policy": "cqb_opt", "parameter": "bonus_scale", "value": "0.1",
                            "n_runs": 30, "n_stalled": 0, "mean_regret": 0.4}])
    assert mismatches(chosen, {"cqb_opt": {"bonus_scale": 0.1}}) == []
    (problem,) = mismatches(chosen, {"cqb_opt": {"bonus_scale": 0.03}})
    assert "cqb_opt" in problem and "0.03" in problem and "0.1" in problem
    assert len(mismatches(chosen, {})) == 1


def test_base_label_strips_the_sweep_suffix():
    assert base_label("cqb_opt.bonus_scale0.1") == "cqb_opt"
    assert base_label("q_ths") == "q_ths"


def test_tuning_figure_has_a_regret_and_a_stall_panel_per_parameter():
    table = tuning_table(runs({("cqb_opt", "0.03"): [(1.0, False)] * 2,
                               ("cqb_opt.bonus_scale0.1", "0.1"): [(2.0, True)] * 2}))
    figure = plot_tuning(table, {"cqb_opt": "CQB-Opt"})
    assert len(figure.axes) == 2


# ---------------------------------------------------------------- the second stage from its run files


def stage2_files(tmp_path, per_label):
    """Fabricated stage-2 run files under …/<label>/seed<N>.npz: {label: [(seed, regret level)]}."""
    from conftest import fabricate_run

    files = []
    for label, seeds in per_label.items():
        for seed, level in seeds:
            queue = [level + 1] * 20
            files.append(str(fabricate_run(tmp_path / "runs" / "inst" / "T20" / label / f"seed{seed}.npz",
                                           queue, [1] * 20, seed, label)))
    return files


STAGE1 = runs({("cqb_opt.bonus_scale0.01", "0.01"): [(0.5, False)], ("cqb_opt", "0.03"): [(0.6, False)],
               ("cqb_opt.bonus_scale0.1", "0.1"): [(0.9, False)]})


def test_stage2_files_go_to_their_contender_whatever_their_order(tmp_path):
    from cqb.analysis.summaries import SummarySettings
    from cqb.analysis.tuning import stage2_curves, stage2_table

    files = stage2_files(tmp_path, {"cqb_opt": [(40000, 0), (40001, 0), (40002, 0)],
                                    "cqb_opt.bonus_scale0.01": [(40000, 3), (40001, 3), (40002, 3)]})
    labels = ["cqb_opt.bonus_scale0.01", "cqb_opt"]
    curves = stage2_curves(labels, STAGE1, files[::-1])  # interleaved or reversed: the same curves
    assert [(c.label, c.sweep_text, c.seeds) for c in curves] == [
        ("cqb_opt.bonus_scale0.01", "0.01", (40000, 40001, 40002)), ("cqb_opt", "0.03", (40000, 40001, 40002))]
    assert all(f"/{c.label}/" in path for c in curves for path in c.files)
    settings = SummarySettings(stall_threshold=5.0)
    table = stage2_table(labels, STAGE1, files[::-1], settings, stall_bound=0.5)
    assert table.equals(stage2_table(labels, STAGE1, files, settings, stall_bound=0.5))
    # the contender with no regret wins, though an unequal split by position would have mixed them
    assert table.loc[table["chosen"], "value"].tolist() == ["0.03"]
    assert table["n_runs"].tolist() == [3, 3]
    assert stage2_table(None, STAGE1, [], settings, 0.5).empty


def test_a_stage2_file_of_no_contender_or_a_contender_without_files_is_refused(tmp_path):
    from cqb.analysis.tuning import stage2_curves

    files = stage2_files(tmp_path, {"cqb_opt": [(40000, 0)], "cqb_opt.bonus_scale0.1": [(40000, 0)]})
    with pytest.raises(ValueError, match="not …/<contender label>/seed<N>.npz of a contender"):
        stage2_curves(["cqb_opt"], STAGE1, files)
    with pytest.raises(ValueError, match="contender cqb_opt.bonus_scale0.01 has no stage-2 run files"):
        stage2_curves(["cqb_opt", "cqb_opt.bonus_scale0.1", "cqb_opt.bonus_scale0.01"], STAGE1, files)
