"""The candidate benchmark's figure (cqb.studies.candidates), drawn from its leaderboard table only."""

from __future__ import annotations

import math
from pathlib import Path


def plot_leaderboard(board, pdf: str | Path, png: str | Path, title: str = "Candidate benchmark",
                     dpi: int = 150) -> None:
    """Dot-and-interval plot from the leaderboard table only: one panel per
    (candidate, experiment), one row per (sweep value, other policy) with its
    paired Δ (policy − candidate) and interval; right of 0, the candidate is lower."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..presentation import policy_colour
    from ..sim.runfile import atomic_write
    from ..studies.candidates import INTERVAL_METHOD, sweep_text

    panels = list(dict.fromkeys(zip(board["candidate"], board["experiment"])))
    n_cols = min(4, len(panels))
    n_rows = -(-len(panels) // n_cols)
    heights = [int(((board["candidate"] == c) & (board["experiment"] == e) & ~board["is_candidate"]).sum())
               for c, e in panels]
    panel_height = 0.8 + 0.22 * max(heights)
    figure, axes = plt.subplots(n_rows, n_cols, figsize=(4.6 * n_cols, panel_height * n_rows + 0.8),
                                squeeze=False)
    for axis in axes.flat[len(panels):]:
        axis.set_visible(False)
    for axis, (candidate, experiment) in zip(axes.flat, panels):
        cell = board[(board["candidate"] == candidate) & (board["experiment"] == experiment)]
        own = cell[cell["is_candidate"]]
        others = cell[~cell["is_candidate"]].iloc[::-1]
        y = list(range(len(others)))
        for position, row in zip(y, others.itertuples()):
            colour = policy_colour(row.policy) or "#444444"
            if math.isfinite(row.delta_ci_low):
                axis.plot([row.delta_ci_low, row.delta_ci_high], [position, position], color=colour, lw=1.5)
            axis.plot([row.delta], [position], "o", color=colour,
                      markerfacecolor=colour if row.delta_verdict != "inconclusive" else "white")
        labels = [f"{row.display}" + (f", {sweep_text(row.sweep_param, row.sweep_value)}" if row.sweep_value else "")
                  + (f" ({row.n_stalled}/{row.n_seeds} stalled)" if row.n_stalled else "")
                  for row in others.itertuples()]
        axis.set_yticks(y, labels, fontsize=7)
        axis.axvline(0.0, color="black", lw=0.8)
        axis.set_xscale("symlog", linthresh=0.1)
        stalled = int(own["n_stalled"].sum())
        runs = int(own["n_seeds"].sum())
        axis.set_title(f"{experiment}: {own['display'].iloc[0]} ({stalled}/{runs} stalled)", fontsize=8)
        axis.set_xlabel(f"Δ {cell['metric'].iloc[0]} (policy − candidate)", fontsize=7)
        axis.tick_params(axis="x", labelsize=7)
    figure.suptitle(f"{title}: Δ with its {INTERVAL_METHOD}; right of 0, the candidate is lower "
                    "(filled: interval clear of 0)", fontsize=9)
    figure.tight_layout()
    for path in (pdf, png):
        with atomic_write(path) as temporary:
            figure.savefig(temporary, format=Path(path).suffix[1:], dpi=dpi)
    plt.close(figure)
