"""Figure 7's verdict grid (cells from :mod:`cqb.analysis.sensitivity`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..analysis.verdict_rules import FAILS, HOLDS, INCONCLUSIVE
from ..analysis.sensitivity import NOT_RUN, cell_summary, norm_bound_text
from ..datasets.registry import dataset_display_name
from .plotting import save_figure


VERDICT_COLOURS = {HOLDS: "#5aae61", FAILS: "#d6604d", INCONCLUSIVE: "#f4c542", NOT_RUN: "#ffffff"}


def plot_grid(table: pd.DataFrame, datasets: Sequence[str], columns: Sequence[Mapping], title: str,
              pdf_path, png_path) -> None:
    """Datasets × columns; colour = verdict; text = CQB-ε's rank, the decisive
    difference, the slack and S."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    cells = cell_summary(table).set_index(["dataset", "column"])
    fig, ax = plt.subplots(figsize=(1.35 * len(columns) + 1.6, 1.45 * len(datasets) + 1.6))
    for i, dataset in enumerate(datasets):
        for j, column in enumerate(columns):
            key = (dataset, column["name"])
            verdict = cells.loc[key, "verdict"] if key in cells.index else NOT_RUN
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=VERDICT_COLOURS[verdict],
                                       edgecolor="#444444", hatch="//" if verdict == NOT_RUN else None,
                                       linewidth=0.6))
            if key in cells.index:
                c = cells.loc[key]
                text = (f"rank {c['eps_rank']}/{c['n_policies']}\n"
                        f"Δ {c['value']:.2g}\n[{c['ci_low']:.2g}, {c['ci_high']:.2g}]\n"
                        f"slack {c['slack']:.3f}\nS {norm_bound_text(c)}")
                ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=6.5)
            else:
                ax.text(j + 0.5, i + 0.5, "not run", ha="center", va="center", fontsize=6.5,
                        color="#777777", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    ax.set_xlim(0, len(columns))
    ax.set_ylim(len(datasets), 0)
    ax.set_xticks(np.arange(len(columns)) + 0.5)
    ax.set_xticklabels([f"{c['label']}\n({c['choice']})" for c in columns], rotation=40, ha="right",
                       fontsize=7)
    ax.set_yticks(np.arange(len(datasets)) + 0.5)
    ax.set_yticklabels([dataset_display_name(d) for d in datasets], fontsize=8)
    ax.tick_params(length=0)
    ax.set_title(title + "\nΔ: paired mean regret of the decisive other policy − CQB-ε "
                 "(> 0: CQB-ε better), bootstrap 95% interval", fontsize=8.5)
    ax.legend(handles=[Patch(facecolor=VERDICT_COLOURS[v], edgecolor="#444444", label=v,
                             hatch="//" if v == NOT_RUN else None) for v in VERDICT_COLOURS],
              loc="upper center", bbox_to_anchor=(0.5, -0.32 if len(columns) > 1 else -0.2), ncol=4,
              fontsize=7, frameon=False)
    fig.tight_layout()
    save_figure(fig, pdf_path, png_path, dpi=150)
