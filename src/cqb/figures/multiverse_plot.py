"""Figure 8's grid: claims × alternatives, coloured by verdict (cells from
:mod:`cqb.analysis.multiverse`)."""

from __future__ import annotations

import math

import pandas as pd

from ..analysis.verdict_rules import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, TIE
from .plotting import save_figure

VERDICT_COLOURS = {HOLDS: "#5aae61", FAILS: "#d6604d", INCONCLUSIVE: "#f4c542", TIE: "#92c5de",
                   NOT_TESTABLE: "#dddddd"}
NOTE = ("Each cell: the claim's primary reading under one alternative, the others at their defaults, "
        "on the multiverse's own seeds; hatched = the alternative changes none of the claim's runs "
        "(the default's verdict). Tuned constants stay tuned: c_β = 1 is the formula as written, "
        "run at that value, not retuned.")


def _short(value, low, high) -> str:
    if not (isinstance(value, (int, float)) and math.isfinite(value)):
        return ""
    if isinstance(low, (int, float)) and math.isfinite(low) and math.isfinite(high):
        return f"{value:.2g}\n[{low:.2g}, {high:.2g}]"
    return f"{value:.2g}"


def plot_multiverse(multiverse, cells: pd.DataFrame, marks: pd.DataFrame, pdf_path, png_path, title: str) -> None:
    """Rows: the claims with their mark; columns: the default, then each
    alternative; colour = verdict; text = value [interval]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    claims = list(dict.fromkeys(cells["claim"]))
    alternatives = list(multiverse.alternatives)
    by_cell = cells.set_index(["claim", "alternative"])
    mark_of = dict(zip(marks["claim"], marks["mark"]))
    statement = dict(zip(cells["claim"], cells["statement"]))
    fig, ax = plt.subplots(figsize=(0.95 * len(alternatives) + 4.2, 0.62 * len(claims) + 3.0))
    for i, claim in enumerate(claims):
        for j, alternative in enumerate(alternatives):
            row = by_cell.loc[(claim, alternative.name)]
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=VERDICT_COLOURS.get(row["verdict"], "#ffffff"),
                                       edgecolor="#444444", linewidth=0.5,
                                       hatch=None if bool(row["affected"]) or j == 0 else "//", alpha=0.95))
            ax.text(j + 0.5, i + 0.5, _short(row["value"], row["ci_low"], row["ci_high"]), ha="center",
                    va="center", fontsize=5.2)
    ax.set_xlim(0, len(alternatives))
    ax.set_ylim(len(claims), 0)
    ax.set_xticks([j + 0.5 for j in range(len(alternatives))])
    ax.set_xticklabels([a.label for a in alternatives], rotation=60, ha="right", fontsize=7)
    ax.set_yticks([i + 0.5 for i in range(len(claims))])
    ax.set_yticklabels([f"{statement[c][:48]}\n({mark_of.get(c, '')})" for c in claims], fontsize=6.5)
    ax.tick_params(length=0)
    seeds = multiverse.seeds
    ax.set_title(f"{title}\n(n = {len(seeds)} seeds {seeds[0]}–{seeds[-1]} per cell, "
                 f"{100 * multiverse.confidence:.4g}% intervals)", fontsize=9)
    ax.legend(handles=[Patch(facecolor=c, edgecolor="#444444", label=v) for v, c in VERDICT_COLOURS.items()],
              loc="upper center", bbox_to_anchor=(0.5, -0.32), ncol=5, fontsize=7, frameon=False)
    fig.text(0.01, 0.005, NOTE, fontsize=6, wrap=True, va="bottom")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    save_figure(fig, pdf_path, png_path)
    plt.close(fig)


def redraw_published(multiverse, cells: pd.DataFrame, marks: pd.DataFrame, folder, title: str) -> str:
    """Figure 8 drawn again into ``folder`` (its rows carry the marks), shrunk
    as published (``cqb publish --rebuild``); returns its path."""
    import tempfile
    from pathlib import Path

    from ..publishing.published_figures import shrink_png

    with tempfile.TemporaryDirectory() as scratch:
        png = Path(scratch) / "fig8.png"
        plot_multiverse(multiverse, cells, marks, Path(scratch) / "fig8.pdf", png, title)
        shrink_png(png, Path(folder) / "fig8.png")
    return str(Path(folder) / "fig8.png")
