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
