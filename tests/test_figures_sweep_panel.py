"""Figure panels drawn against the sweep value (cqb.figures.sweep_plot), and the
line styles that tell one policy's sweep values apart in a round panel."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student

from cqb.analysis.aggregate import read_table
from cqb.config.panels import FigureSpec, Panel, PanelCurve, SweepReference
from cqb.figures.plotting import make_figure, plot_figure

# per (policy, σ) the tail regrets of seeds 0–4; cqb_eps at 0.3 is skewed (one bad seed)
REGRETS = {("cqb_opt", "0"): [1.0, 2.0, 3.0, 4.0, 5.0], ("cqb_opt", "0.3"): [0.5, 0.7, 0.9, 1.1, 1.3],
           ("cqb_eps", "0"): [2.0, 4.0, 6.0, 8.0, 10.0], ("cqb_eps", "0.3"): [0.2, 0.3, 0.2, 0.4, 9.0]}
STALLED = {("cqb_eps", "0.3"): 1}
CONTROL = {"cqb_opt": [0.1, 0.2, 0.3, 0.4, 0.5], "cqb_eps": [0.3, 0.6, 0.9, 1.2, 1.5]}


def runs_table(regrets, sweep_param):
    rows = []
    for (policy, value), values in regrets.items():
        for seed, regret in enumerate(values):
            rows.append({"policy": policy, "sweep_param": sweep_param, "sweep_value": value, "seed": seed,
                         "tail_regret": regret, "final_regret": 2 * regret,
                         "stalled": seed < STALLED.get((policy, value), 0)})
    return pd.DataFrame(rows)


@pytest.fixture
def runs():
    return {"smoothing": runs_table(REGRETS, "noise_scale"),
            "streams": runs_table({(p, k): v for p, values in CONTROL.items()
                                   for k, v in (("synthetic", values), ("subspace_shift", [9.0] * 5))}, "kind")}


def sweep_spec(metric="tail_regret", reference=True):
    curves = tuple(PanelCurve(p, v, {"cqb_opt": "CQB-Opt", "cqb_eps": "CQB-ε"}[p], f"{p}, σ = {v}")
                   for p in ("cqb_opt", "cqb_eps") for v in ("0", "0.3"))
    control = SweepReference("streams", "synthetic", "i.i.d. control", (("cqb_opt", "cqb_opt"), ("cqb_eps", "cqb_eps")))
    panel = Panel("against σ", "smoothing", "noise_scale", curves, x="sweep", metric=metric,
                  reference=control if reference else None)
    return FigureSpec("figS", "sweep figure", (panel,), panel_width=3.0, panel_height=2.5, dpi=60)


def from_scratch(values, confidence=0.95):
    """Mean and Hall's skewness-corrected t interval, written out here: with
    γ the sample skewness, the bounds are x̄ − s·g⁻¹(±c), c = t_(n−1)/√n and
    g⁻¹(x) = (3/γ)(cbrt(1 + γ(x − γ/(6n))) − 1), the t interval at γ = 0."""
    x = np.asarray(values, dtype=float)
    n, mean, sd = len(x), x.mean(), x.std(ddof=1)
    gamma = ((x - mean) ** 3).mean() / sd ** 3
    c = student.ppf(1 - (1 - confidence) / 2, n - 1) / math.sqrt(n)

    def inverse(y):
        y = y - gamma / (6 * n)
        return y if abs(gamma) < 1e-12 else 3 / gamma * (np.cbrt(1 + gamma * y) - 1)

    return mean, mean - sd * inverse(c), mean - sd * inverse(-c)


def test_sweep_panel_table_is_the_mean_and_interval_per_policy_and_value(runs, tmp_path):
    table = make_figure(sweep_spec(), {}, png=tmp_path / "f.png", tsv=tmp_path / "f.tsv", runs=runs)
    written = read_table(tmp_path / "f.tsv")
    assert len(written) == len(table) == 4 + 2
    swept = written[~written["reference"].astype(str).str.lower().eq("true")]
    assert list(zip(swept["policy"], swept["sweep_value"].astype(str))) == list(REGRETS)
    for row in swept.itertuples():
        values = REGRETS[(row.policy, str(row.sweep_value))]
        mean, low, high = from_scratch(values)
        assert (row.mean, row.ci_low, row.ci_high) == pytest.approx((mean, low, high), abs=1e-6)
        assert row.n == 5 and row.n_stalled == STALLED.get((row.policy, str(row.sweep_value)), 0)
        assert row.metric == "tail_regret" and row.experiment == "smoothing"
    # the symmetric groups: the plain t interval; the skewed one is not symmetric about its mean
    t = student.ppf(0.975, 4) * np.std(REGRETS[("cqb_opt", "0")], ddof=1) / math.sqrt(5)
    first = swept.iloc[0]
    assert (first.ci_low, first.ci_high) == pytest.approx((3 - t, 3 + t), abs=1e-6)
    skewed = swept[(swept["policy"] == "cqb_eps") & (swept["sweep_value"].astype(str) == "0.3")].iloc[0]
    assert skewed["ci_high"] - skewed["mean"] > skewed["mean"] - skewed["ci_low"]
    reference = written[written["reference"].astype(str).str.lower().eq("true")]
    assert reference["experiment"].eq("streams").all() and reference["sweep_value"].eq("synthetic").all()
    for row in reference.itertuples():
        assert (row.mean, row.ci_low, row.ci_high) == pytest.approx(from_scratch(CONTROL[row.policy]), abs=1e-6)
    assert (tmp_path / "f.png").read_bytes().startswith(b"\x89PNG")


def test_sweep_panel_draws_the_table_with_stalls_in_the_legend_and_the_sweep_symbol(runs):
    from cqb.figures.plotting import figure_table

    spec = sweep_spec(metric="final_regret")
    table = figure_table(spec, {}, runs)
    axis = plot_figure(spec, table).axes[0]
    assert axis.get_xlabel() == "σ" and axis.get_ylabel() == "final regret"
    labels = [text.get_text() for text in axis.get_legend().get_texts()]
    assert labels[:2] == ["CQB-Opt (0/10 stalled)", "CQB-ε (1/10 stalled)"]
    assert labels[2:] == ["CQB-Opt: i.i.d. control (0/5 stalled)", "CQB-ε: i.i.d. control (0/5 stalled)"]
    # each policy's markers sit at its means (dodged a little along x), in its own colour
    opt = table[(table["policy"] == "cqb_opt") & ~table["reference"]]
    np.testing.assert_allclose(opt["mean"], [2 * 3.0, 2 * 0.9])
    drawn = [line for line in axis.get_lines() if line.get_marker() == "o"]
    np.testing.assert_allclose(drawn[0].get_ydata(), opt["mean"])
    assert drawn[0].get_color() != drawn[1].get_color()


@pytest.mark.parametrize("panel_values, styles", [
    # two policies, each at two sweep values: the policy's colour, one style per value
    ((("cqb_eps", "0.05"), ("cqb_eps", "0.1"), ("cqb_opt", "0.05"), ("cqb_opt", "0.1")), ["-", "--", "-", "--"]),
    # one policy: a sequential colour map, solid lines (as before)
    ((("cqb_opt", "0.05"), ("cqb_opt", "0.1")), ["-", "-"]),
])
def test_round_panel_line_styles_tell_sweep_values_apart(panel_values, styles):
    from cqb.figures.plotting import curve_styles

    curves = tuple(PanelCurve(p, v, p, f"{p} {v}") for p, v in panel_values)
    oracle = PanelCurve("oracle", "0.05", "Optimal", "Optimal", swept=False)
    found = curve_styles(Panel("slack", "slack", "slack", curves + (oracle,)))
    assert [style for _, style in found[:-1]] == styles
    colours = [colour for colour, _ in found[:-1]]
    if len(curves) == 4:
        assert colours[0] == colours[1] != colours[2] == colours[3]
    else:
        assert colours[0] != colours[1]
    assert found[-1][1] == "-"  # the oracle: drawn black and dashed by plot_figure (below)


def test_round_panel_draws_each_sweep_value_in_its_style_and_the_oracle_black_dashed(tmp_path):
    from conftest import curve_of, fabricate_run

    from cqb.analysis.aggregate import aggregate_curves

    rng = np.random.default_rng(5)
    curves = []
    for policy in ("cqb_eps", "cqb_opt", "oracle"):
        for value in ("pool", "sorted_pool"):
            files = [fabricate_run(tmp_path / policy / value / f"seed{s}.npz", np.cumsum(rng.integers(0, 2, 30)),
                                   rng.integers(0, 2, 30), s, policy) for s in range(2)]
            curves.append(curve_of(policy, files, "kind", value))
    table = aggregate_curves(curves)
    panel_curves = tuple(PanelCurve(p, v, p, f"{p}, {v}") for p in ("cqb_eps", "cqb_opt") for v in ("pool", "sorted_pool"))
    panel_curves += (PanelCurve("oracle", "pool", "Optimal", "Optimal", swept=False),)
    spec = FigureSpec("figP", "pools", (Panel("heart", "e", "kind", panel_curves),), dpi=60)
    from cqb.figures.plotting import figure_table

    lines = {line.get_label(): line for line in plot_figure(spec, figure_table(spec, {"e": table})).axes[0].get_lines()}
    assert lines["cqb_eps, pool"].get_linestyle() == "-" and lines["cqb_eps, sorted_pool"].get_linestyle() == "--"
    assert lines["cqb_opt, pool"].get_linestyle() == "-" and lines["cqb_opt, sorted_pool"].get_linestyle() == "--"
    assert lines["cqb_eps, pool"].get_color() == lines["cqb_eps, sorted_pool"].get_color()
    assert lines["Optimal"].get_color() == "black" and lines["Optimal"].get_linestyle() == "--"
    assert lines["Optimal"].get_linewidth() < lines["cqb_eps, sorted_pool"].get_linewidth()
