"""The figures, drawn from aggregate tables only (never from run files).

A figure is described by a :class:`cqb.experiments.FigureSpec` (built from the
config by :func:`cqb.experiments.build_plan`): panels, each with the curves it
draws (policy label and sweep value as in the experiment's table, legend).
Each curve is the mean queue length Q(t) over the seeds with a ±1 sd band.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from .aggregate import write_table  # noqa: E402
from .experiments import FigureSpec, Panel  # noqa: E402
from .io import atomic_write  # noqa: E402

# One colour per policy, the same in every figure; sweep curves use a sequential map.
POLICY_COLOURS = {
    "cqb_eps": "#d62728",
    "cqb_opt": "#1f77b4",
    "cqb_eps_opt": "#9467bd",
    "cqb_ts": "#8c564b",
    "q_ucb": "#e377c2",
    "q_ths": "#bcbd22",
    "random": "#7f7f7f",
    "oracle": "#2ca02c",
    "cqb_eta2": "#17becf",
}
SWEEP_COLOURMAP = "viridis"


def panel_table(panel: Panel, table: pd.DataFrame, index: int) -> pd.DataFrame:
    """The rows of an experiment table that a panel draws, in curve order."""
    parts = []
    for curve in panel.curves:
        rows = table[(table["policy"] == curve.policy) & (table["sweep_value"] == curve.sweep_value)]
        if rows.empty:
            raise ValueError(f"panel {panel.title!r}: no rows for policy {curve.policy!r} "
                             f"at sweep value {curve.sweep_value!r} in experiment {panel.experiment}")
        rows = rows.copy()
        rows.insert(0, "legend", curve.legend)
        rows.insert(0, "experiment", panel.experiment)
        rows.insert(0, "panel_title", panel.title)
        rows.insert(0, "panel", index + 1)
        parts.append(rows)
    return pd.concat(parts, ignore_index=True)


def figure_table(spec: FigureSpec, tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Every curve the figure draws (its data table), panel by panel."""
    return pd.concat([panel_table(panel, tables[panel.experiment], i)
                      for i, panel in enumerate(spec.panels)], ignore_index=True)


def curve_colours(panel: Panel) -> list:
    """Sweep curves of one policy: a sequential map; otherwise one colour per
    policy. Curves with ``swept`` False (a reference such as the oracle,
    which does not take the swept parameter) keep their policy colour."""
    curves = panel.curves
    policies = [c.policy for c in curves]
    fallback = plt.get_cmap("tab10")
    fixed = [POLICY_COLOURS.get(p.split(".")[0], fallback(i % 10)) for i, p in enumerate(policies)]
    swept = [i for i, c in enumerate(curves) if c.swept]
    if panel.sweep_param and swept and len(set(curves[i].display for i in swept)) == 1:
        cmap = plt.get_cmap(SWEEP_COLOURMAP)
        n = len(swept)
        for rank, i in enumerate(swept):
            fixed[i] = cmap(0.85 * rank / max(n - 1, 1))
    return fixed


def plot_figure(spec: FigureSpec, table: pd.DataFrame):
    """A row of panels: mean Q(t) per curve with a band of ±1 sd (or se)."""
    panels = spec.panels
    figure, axes = plt.subplots(1, len(panels), squeeze=False,
                                figsize=(spec.panel_width * len(panels), spec.panel_height))
    band = spec.band
    for index, (panel, ax) in enumerate(zip(panels, axes[0])):
        rows = table[table["panel"] == index + 1]
        for curve, colour in zip(panel.curves, curve_colours(panel)):
            line = rows[(rows["policy"] == curve.policy) & (rows["sweep_value"] == curve.sweep_value)]
            t, mean = line["t"].to_numpy(), line["queue_mean"].to_numpy()
            # a reference curve that does not take the swept parameter (the oracle): black, dashed
            reference = panel.sweep_param and not curve.swept
            if reference:
                colour = "black"
            ax.plot(t, mean, color=colour, linewidth=1.0 if reference else 1.2, label=curve.legend,
                    linestyle="--" if reference else "-")
            if band != "none":
                half = line[f"queue_{band}"].fillna(0.0).to_numpy()
                ax.fill_between(t, mean - half, mean + half, color=colour, alpha=0.18, linewidth=0)
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel("round t")
        yscale = panel.yscale
        if yscale == "symlog":  # linear up to 10 jobs, logarithmic above: small and linear growth both visible
            ax.set_yscale("symlog", linthresh=10, linscale=1.0)
        else:
            ax.set_yscale(yscale)
        if panel.ylim:
            ax.set_ylim(*panel.ylim)
        elif yscale in ("linear", "symlog"):
            ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
        ax.grid(True, linewidth=0.4, alpha=0.5)
        # two columns on a half-opaque frame keep eight curves' legend readable over the bands
        ax.legend(fontsize=6.5, ncol=2 if len(panel.curves) > 4 else 1, frameon=True, framealpha=0.85,
                  edgecolor="none")
    axes[0][0].set_ylabel("queue length Q(t)")
    n_seeds = sorted(set(table["n_seeds"]))
    band_text = {"sd": "±1 sd", "se": "±1 se", "none": "no band"}[band]
    figure.suptitle(f"{spec.title}  (mean over {', '.join(map(str, n_seeds))} seeds, {band_text})",
                    fontsize=11)
    figure.tight_layout()
    return figure


def save_figure(figure, pdf: str | Path | None = None, png: str | Path | None = None, dpi: int = 150) -> None:
    """Write the figure atomically; no timestamps in the files, so they are reproducible."""
    if pdf is not None:
        with atomic_write(pdf, suffix=".pdf") as temporary:
            figure.savefig(temporary, format="pdf", metadata={"CreationDate": None, "ModDate": None})
    if png is not None:
        with atomic_write(png, suffix=".png") as temporary:
            figure.savefig(temporary, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(figure)


def make_figure(spec: FigureSpec, tables: Mapping[str, pd.DataFrame], pdf=None, png=None, tsv=None,
                float_format: str = "%.6f") -> pd.DataFrame:
    """Draw a figure from experiment tables and write its files and data table."""
    table = figure_table(spec, tables)
    if tsv is not None:
        write_table(table, tsv, float_format)
    save_figure(plot_figure(spec, table), pdf, png, spec.dpi)
    return table
