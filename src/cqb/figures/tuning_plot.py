"""The tuning figure (table from :func:`cqb.analysis.tuning.tuning_table`)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def plot_tuning(table: pd.DataFrame, display_names: dict | None = None, title: str = ""):
    """Two panels per tuned parameter: mean time-averaged regret (with
    intervals, log scale) and stalled tuning runs, against the grid value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parameters = list(dict.fromkeys(table["parameter"]))
    figure, axes = plt.subplots(2, len(parameters), figsize=(5.0 * len(parameters), 6.4),
                                squeeze=False, constrained_layout=True, sharex="col")
    for column, parameter in enumerate(parameters):
        regret_axis, stall_axis = axes[0, column], axes[1, column]
        own = table[table["parameter"] == parameter]
        for policy, group in own.groupby("policy", sort=False):
            x = group["value"].astype(float).to_numpy()
            order = np.argsort(x)
            x = x[order]
            mean = group["mean_regret"].to_numpy()[order]
            low = group["mean_regret_ci_low"].to_numpy()[order]
            high = group["mean_regret_ci_high"].to_numpy()[order]
            name = (display_names or {}).get(policy, policy)
            line = regret_axis.errorbar(x, mean, yerr=[mean - low, high - mean], marker="o",
                                        markersize=4, capsize=3, label=name)
            colour = line[0].get_color()
            stall_axis.plot(x, group["n_stalled"].to_numpy()[order], marker="o", markersize=4,
                            color=colour, label=name)
            chosen = group[group["chosen"]]
            regret_axis.plot(chosen["value"].astype(float), chosen["mean_regret"], marker="*",
                             markersize=14, color=colour, linestyle="none")
        n_runs = int(own["n_runs"].max())
        regret_axis.set_xscale("log")
        regret_axis.set_yscale("symlog", linthresh=1.0)
        # symlog autoscaling reaches far below zero; the regrets are rarely negative
        regret_axis.set_ylim(bottom=min(0.0, float(own["mean_regret_ci_low"].min())))
        regret_axis.set_ylabel("mean of (1/T) Σ (Q − Q*) over tuning seeds")
        regret_axis.set_title(f"{parameter}: regret (★ = chosen)", fontsize=10)
        regret_axis.legend(fontsize=7, loc="upper left")
        stall_axis.set_xscale("log")
        stall_axis.set_ylim(-0.5, n_runs + 0.5)
        stall_axis.set_ylabel(f"stalled runs (of {n_runs})")
        stall_axis.set_xlabel(parameter)
    if title:
        figure.suptitle(title, fontsize=11)
    return figure
