"""cqb.figures.plotting from aggregate tables alone (fabricated run files, no simulation)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import curve_of, fabricate_run
from cqb.analysis.aggregate import aggregate_curves, read_table, write_table
from cqb.config.panels import FigureSpec, Panel, PanelCurve
from cqb.figures.plotting import figure_table, make_figure


@pytest.fixture
def tables(tmp_path):
    """Two experiments: one without a sweep (three policies), one swept over slack."""
    rng = np.random.default_rng(3)

    def curve(policy, sweep_param="", sweep_value="", n_seeds=3, horizon=40):
        files = []
        for seed in range(n_seeds):
            queue = np.cumsum(rng.integers(0, 2, horizon))
            oracle = rng.integers(0, 2, horizon)
            path = tmp_path / "runs" / f"{policy}{sweep_value}" / f"seed{seed}.npz"
            files.append(fabricate_run(path, queue, oracle, seed, policy))
        return curve_of(policy, files, sweep_param, sweep_value)

    base = aggregate_curves([curve("cqb_eps"), curve("random"), curve("oracle")])
    slack = aggregate_curves([curve(p, "slack", v) for p in ("cqb_eps", "cqb_opt") for v in ("0.05", "0.1")])
    for name, table in (("base", base), ("slack", slack)):
        write_table(table, tmp_path / f"{name}.tsv")
    # the figure code sees the tables as read back from disk, like the figure rule
    return {name: read_table(tmp_path / f"{name}.tsv") for name in ("base", "slack")}


def figure_spec(slack_value="0.05"):
    def curves(*items):
        return tuple(PanelCurve(p, v, d, legend) for p, v, d, legend in items)

    return FigureSpec(
        name="figX", title="test figure", band="sd", panel_width=3.0, panel_height=2.5, dpi=60,
        panels=(
            Panel("all", "base", "", curves(("cqb_eps", "", "CQB-ε", "CQB-ε"), ("random", "", "Random", "Random"),
                                            ("oracle", "", "Optimal", "Optimal"))),
            Panel("slack", "slack", "slack", curves(("cqb_opt", slack_value, "CQB-Opt", f"ϵ = {slack_value}"),
                                                    ("cqb_opt", "0.1", "CQB-Opt", "ϵ = 0.1"))),
        ),
    )


def test_figure_files_and_table(tables, tmp_path):
    out = tmp_path / "fig"
    table = make_figure(figure_spec(), tables, pdf=out / "f.pdf", png=out / "f.png", tsv=out / "f.tsv")
    assert (out / "f.pdf").read_bytes().startswith(b"%PDF")
    assert (out / "f.png").read_bytes().startswith(b"\x89PNG")
    written = read_table(out / "f.tsv")
    assert len(written) == len(table) == 5 * 40
    assert written["panel"].drop_duplicates().tolist() == [1, 2]
    assert written[written["panel"] == 1]["policy"].drop_duplicates().tolist() == ["cqb_eps", "random", "oracle"]
    slack_panel = written[written["panel"] == 2]
    assert slack_panel["policy"].eq("cqb_opt").all()
    assert slack_panel["legend"].drop_duplicates().tolist() == ["ϵ = 0.05", "ϵ = 0.1"]
    # the figure table carries the aggregate's numbers unchanged
    source = tables["slack"]
    source = source[(source["policy"] == "cqb_opt") & (source["sweep_value"] == "0.1")]
    np.testing.assert_allclose(slack_panel[slack_panel["sweep_value"] == "0.1"]["queue_mean"],
                               source["queue_mean"])
    assert not list(out.glob(".*")), "no temporary files left behind"


def test_figure_files_are_reproducible(tables, tmp_path):
    for name in ("a", "b"):
        make_figure(figure_spec(), tables, pdf=tmp_path / f"{name}.pdf", png=tmp_path / f"{name}.png",
                    tsv=tmp_path / f"{name}.tsv")
    for ext in ("pdf", "png", "tsv"):
        assert (tmp_path / f"a.{ext}").read_bytes() == (tmp_path / f"b.{ext}").read_bytes(), ext


def test_missing_curve_is_named(tables):
    spec = figure_spec(slack_value="0.2")
    with pytest.raises(ValueError, match=r"cqb_opt.*0\.2"):
        figure_table(spec, tables)


@pytest.mark.parametrize("band", ["se", "none"])
def test_other_bands(tables, tmp_path, band):
    spec = dataclasses.replace(figure_spec(), band=band)
    make_figure(spec, tables, png=tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0


def _drawn_lines(figure, panel=0):
    return {line.get_label(): line for line in figure.axes[panel].get_lines()}


def test_median_centre_draws_the_median_with_the_interquartile_band(tables):
    from matplotlib.collections import PolyCollection

    from cqb.figures.plotting import plot_figure

    spec = dataclasses.replace(figure_spec(), center="median", band="iqr")
    table = figure_table(spec, tables)
    figure = plot_figure(spec, table)
    line = _drawn_lines(figure)["CQB-ε"]
    rows = table[(table["panel"] == 1) & (table["policy"] == "cqb_eps")]
    np.testing.assert_allclose(line.get_ydata(), rows["queue_median"])
    band = [c for c in figure.axes[0].collections if isinstance(c, PolyCollection)][0]
    vertices = band.get_paths()[0].vertices
    assert vertices[:, 1].min() == pytest.approx(rows["queue_q25"].min())
    assert vertices[:, 1].max() == pytest.approx(rows["queue_q75"].max())


def test_legends_carry_stall_counts_and_sit_below_the_axes(tables):
    import pandas as pd

    from cqb.figures.plotting import plot_figure

    spec = figure_spec()
    summaries = {"base": pd.DataFrame({"policy": ["cqb_eps", "random", "oracle"], "sweep_value": ["", "", ""],
                                       "n_stalled": [1, 3, 0], "n_runs": [3, 3, 3]})}
    figure = plot_figure(spec, figure_table(spec, tables), summaries)
    labels = list(_drawn_lines(figure))
    assert labels == ["CQB-ε (1/3 stalled)", "Random (3/3 stalled)", "Optimal"]
    figure.canvas.draw()
    for axis in figure.axes:
        legend_box = axis.get_legend().get_window_extent()
        assert legend_box.y1 <= axis.get_window_extent().y0  # entirely below the plotting area


def test_long_curves_are_thinned_in_the_drawing_not_in_the_table(tmp_path):
    from cqb.figures.plotting import MAX_POINTS, thin

    assert thin(10) == list(range(10))
    index = thin(5000)
    assert index[0] == 0 and index[-1] == 4999 and len(index) <= MAX_POINTS + 1
    # a T = 5000 figure of eight curves stays light
    rng = np.random.default_rng(0)
    curves = []
    for p in ("a", "b", "c", "d", "e", "f", "g", "h"):
        files = [fabricate_run(tmp_path / p / f"seed{s}.npz", np.cumsum(rng.integers(0, 2, 5000)),
                               rng.integers(0, 3, 5000), s, p) for s in range(3)]
        curves.append(curve_of(p, files))
    table = aggregate_curves(curves)
    spec = FigureSpec("big", "big", (Panel("all", "e", "", tuple(PanelCurve(p, "", p, p) for p in "abcdefgh")),))
    written = make_figure(spec, {"e": table}, pdf=tmp_path / "big.pdf", tsv=tmp_path / "big.tsv")
    assert len(written) == 8 * 5000  # the table keeps every round
    assert (tmp_path / "big.pdf").stat().st_size < 300_000
