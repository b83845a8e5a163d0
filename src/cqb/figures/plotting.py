"""The figures, drawn from aggregate tables only (never from run files).

A figure is described by a :class:`cqb.config.panels.FigureSpec` (built from the
config by :func:`cqb.config.experiments.build_plan`): panels, each with the curves it
draws (policy label and sweep value as in the experiment's table, legend).
Each curve is the mean queue length Q(t) over the seeds with a ±1 sd band
(or the median with the interquartile range); with the experiments' curve
summaries at hand, each legend entry also says how many runs stalled. Curves
of one policy at several sweep values share its colour and differ in line
style. A panel with ``x: sweep`` is drawn from the runs tables instead
(:mod:`cqb.figures.sweep_plot`).

Files stay light: bands are rasterised and lines drawn through at most
``MAX_POINTS`` rounds (the data table keeps every round); legends sit below
the axes, so they never cover a curve.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ..analysis.aggregate import write_table  # noqa: E402
from ..config.panels import FigureSpec, Panel  # noqa: E402
from ..presentation import policy_colour  # noqa: E402
from ..sim.runfile import atomic_write  # noqa: E402
from .sweep_plot import curve_rows, draw_sweep_panel, sweep_panel_table  # noqa: E402

# One colour per policy, the same in every figure (cqb.presentation);
# sweep curves use a sequential map.
SWEEP_COLOURMAP = "viridis"
# one line style per sweep value where curves share a policy's colour (the
# oracle reference stays black and dashed, thinner)
SWEEP_LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)))
MAX_POINTS = 1000  # drawn points per curve
TITLE_CHARS_PER_INCH = 12  # of the 10-point title
LEGEND_CHARS_PER_INCH = 20  # of the 6.5-point legends
PDF_BAND_DPI = 100


def thin(n_rounds: int, max_points: int = MAX_POINTS):
    """Indices of the rounds drawn: every k-th, plus the last."""
    step = max(1, -(-n_rounds // max_points))
    index = list(range(0, n_rounds, step))
    if index[-1] != n_rounds - 1:
        index.append(n_rounds - 1)
    return index


def stall_counts(curve_summaries: Mapping[str, pd.DataFrame] | None, experiment: str) -> dict:
    """(policy label, sweep value) → (stalled runs, runs) of an experiment."""
    if not curve_summaries or experiment not in curve_summaries:
        return {}
    table = curve_summaries[experiment]
    return {(row.policy, str(row.sweep_value)): (int(row.n_stalled), int(row.n_runs))
            for row in table.itertuples()}


def panel_table(panel: Panel, table: pd.DataFrame, index: int) -> pd.DataFrame:
    """The rows of an experiment table that a panel draws, in curve order."""
    parts = []
    for curve in panel.curves:
        rows = curve_rows(table, curve.policy, curve.sweep_value, panel.title, panel.experiment).copy()
        rows.insert(0, "legend", curve.legend)
        rows.insert(0, "experiment", panel.experiment)
        rows.insert(0, "panel_title", panel.title)
        rows.insert(0, "panel", index + 1)
        parts.append(rows)
    return pd.concat(parts, ignore_index=True)


def figure_table(spec: FigureSpec, tables: Mapping[str, pd.DataFrame],
                 runs: Mapping[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """Every curve the figure draws (its data table), panel by panel: a row
    per round of a round panel's curves (from ``tables``), a row per policy
    and sweep value of a sweep panel's (from the runs tables ``runs``)."""
    return pd.concat([sweep_panel_table(panel, runs, i) if panel.x == "sweep"
                      else panel_table(panel, tables[panel.experiment], i)
                      for i, panel in enumerate(spec.panels)], ignore_index=True)


def policy_colours(panel: Panel) -> list:
    """Each curve's policy colour (tab10 for a policy without one)."""
    fallback = plt.get_cmap("tab10")
    return [policy_colour(c.policy.split(".")[0]) or fallback(i % 10) for i, c in enumerate(panel.curves)]


def curve_styles(panel: Panel) -> list[tuple]:
    """(colour, line style) per curve. Sweep curves of one policy: a
    sequential map, solid; otherwise the policy's colour, and where a policy
    is drawn at several sweep values, one line style per value (solid for the
    first). Curves with ``swept`` False (a reference such as the oracle,
    which does not take the swept parameter) keep their policy colour."""
    curves = panel.curves
    colours = policy_colours(panel)
    styles = ["-"] * len(curves)
    swept = [i for i, c in enumerate(curves) if c.swept]
    if panel.sweep_param and swept and len(set(curves[i].display for i in swept)) == 1:
        cmap = plt.get_cmap(SWEEP_COLOURMAP)
        n = len(swept)
        for rank, i in enumerate(swept):
            colours[i] = cmap(0.85 * rank / max(n - 1, 1))
    elif panel.sweep_param:
        values = list(dict.fromkeys(curves[i].sweep_value for i in swept))
        for i in swept:
            styles[i] = SWEEP_LINESTYLES[values.index(curves[i].sweep_value) % len(SWEEP_LINESTYLES)]
    return list(zip(colours, styles))


def subtitle(spec: FigureSpec, table: pd.DataFrame, stalls_shown: bool) -> str:
    """What the lines and bands are, over how many seeds."""
    seeds = set(table["n_seeds"].dropna().astype(int)) if "n_seeds" in table else set()
    seeds |= set(table["n"].dropna().astype(int)) if "n" in table else set()
    over = f"over {', '.join(map(str, sorted(seeds)))} seeds"
    parts = []
    if any(panel.x == "round" for panel in spec.panels):
        band_text = {"sd": "±1 sd", "se": "±1 se", "iqr": "interquartile range", "none": "no band"}[spec.band]
        parts.append(f"{spec.center} {over}, {band_text}")
    if any(panel.x == "sweep" for panel in spec.panels):
        parts.append(("against the sweep value: " if parts else f"{over}: ")
                     + "mean with the claims' 95 % interval (skew-corrected t)")
    stalled_text = "; stalled: tail regret above the threshold (docs/verdicts.md)" if stalls_shown else ""
    # wrapped to the figure's width (a one-panel figure is narrower than its title)
    width = int(TITLE_CHARS_PER_INCH * spec.panel_width * len(spec.panels))
    return "\n".join(textwrap.fill(line, width) for line in (spec.title, f"({'; '.join(parts)}{stalled_text})"))


def plot_figure(spec: FigureSpec, table: pd.DataFrame, curve_summaries: Mapping[str, pd.DataFrame] | None = None):
    """A row of panels: per curve the mean Q(t) with ±1 sd (or se), or the
    median with the interquartile range; legends below the axes, with the
    stalled runs of each curve when ``curve_summaries`` are given."""
    panels = spec.panels
    figure, axes = plt.subplots(1, len(panels), squeeze=False,
                                figsize=(spec.panel_width * len(panels), spec.panel_height + 1.4))
    band, center = spec.band, spec.center
    for index, (panel, ax) in enumerate(zip(panels, axes[0])):
        rows = table[table["panel"] == index + 1]
        if panel.x == "sweep":
            draw_sweep_panel(ax, panel, rows, dict(zip((c.policy for c in panel.curves), policy_colours(panel))))
            continue
        stalls = stall_counts(curve_summaries, panel.experiment)
        for curve, (colour, style) in zip(panel.curves, curve_styles(panel)):
            line = rows[(rows["policy"] == curve.policy) & (rows["sweep_value"] == curve.sweep_value)]
            drawn = line.iloc[thin(len(line))]
            t, middle = drawn["t"].to_numpy(), drawn[f"{spec.quantity}_{center}"].to_numpy()
            # a reference curve that does not take the swept parameter (the oracle): black, dashed
            reference = panel.sweep_param and not curve.swept
            if reference:
                colour = "black"
            label = curve.legend
            if (curve.policy, curve.sweep_value) in stalls and curve.policy != "oracle":
                stalled, runs = stalls[(curve.policy, curve.sweep_value)]
                label += f" ({stalled}/{runs} stalled)"
            ax.plot(t, middle, color=colour, linewidth=1.0 if reference else 1.2, label=label,
                    linestyle="--" if reference else style)
            if band == "iqr":
                low, high = drawn["queue_q25"].to_numpy(), drawn["queue_q75"].to_numpy()
            elif band != "none":
                half = drawn[f"{spec.quantity}_{band}"].fillna(0.0).to_numpy()
                low, high = middle - half, middle + half
            if band != "none":
                ax.fill_between(t, low, high, color=colour, alpha=0.18, linewidth=0, rasterized=True)
        for mark in panel.marks:  # where the context stream changes (T0)
            ax.axvline(mark, color="0.35", linewidth=0.8, linestyle=":")
        ax.set_title(panel.title + (f" (T0 = {', '.join(map(str, panel.marks))}: dotted)" if panel.marks else ""),
                     fontsize=10)
        ax.set_xlabel("round t")
        yscale = panel.yscale
        if yscale == "symlog":  # linear up to 10 jobs, logarithmic above: small and linear growth both visible
            ax.set_yscale("symlog", linthresh=10, linscale=1.0)
        else:
            ax.set_yscale(yscale)
        if panel.ylim:
            ax.set_ylim(*panel.ylim)
        elif yscale in ("linear", "symlog") and spec.quantity == "queue":
            ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
        ax.grid(True, linewidth=0.4, alpha=0.5)
        # two columns where more than three entries fit side by side under the panel
        longest = max(len(line.get_label()) for line in ax.get_lines())
        two = len(panel.curves) > 3 and 2 * (longest / LEGEND_CHARS_PER_INCH + 0.5) <= spec.panel_width
        ax.legend(fontsize=6.5, ncol=2 if two else 1, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    if panels[0].x == "round":
        axes[0][0].set_ylabel({"queue": "queue length Q(t)", "regret": "regret Q(t) − Q*(t)"}[spec.quantity])
    stalls_shown = bool(curve_summaries) or any(panel.x == "sweep" for panel in panels)
    figure.suptitle(subtitle(spec, table, stalls_shown), fontsize=10)
    figure.tight_layout()
    return figure


def save_figure(figure, pdf: str | Path | None = None, png: str | Path | None = None, dpi: int = 150) -> None:
    """Write the figure atomically; no timestamps in the files, so they are reproducible."""
    if pdf is not None:
        with atomic_write(pdf, suffix=".pdf") as temporary:
            # the bands are rasterised at 100 dpi at most: they are most of a PDF's bytes
            figure.savefig(temporary, format="pdf", dpi=min(dpi, PDF_BAND_DPI),
                           metadata={"CreationDate": None, "ModDate": None})
    if png is not None:
        with atomic_write(png, suffix=".png") as temporary:
            figure.savefig(temporary, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(figure)


def make_figure(spec: FigureSpec, tables: Mapping[str, pd.DataFrame], pdf=None, png=None, tsv=None,
                float_format: str = "%.6f", curve_summaries: Mapping[str, pd.DataFrame] | None = None,
                runs: Mapping[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """Draw a figure from experiment tables (and the runs tables its sweep
    panels read) and write its files and data table."""
    table = figure_table(spec, tables, runs)
    if tsv is not None:
        write_table(table, tsv, float_format)
    save_figure(plot_figure(spec, table, curve_summaries), pdf, png, spec.dpi)
    return table
