"""A figure panel drawn against the sweep value (``x: sweep``): per policy,
the mean of one per-run number (``metric``, a column of the runs table) over
the seeds at each sweep value, with the interval the claims give a mean
(:func:`cqb.analysis.claims.statistics.mean_interval`); optionally a
reference (another experiment at one sweep value, e.g. an i.i.d. control)
drawn across the panel per policy. Read from the runs tables only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..analysis.claims.statistics import mean_interval
from ..config.panels import SWEEP_SYMBOLS, Panel

CONFIDENCE = 0.95  # the claims' level
SWEEP_COLUMNS = ("panel", "panel_title", "experiment", "legend", "policy", "sweep_param", "sweep_value",
                 "reference", "metric", "mean", "ci_low", "ci_high", "n", "n_stalled")
DODGE = 0.012  # share of the x range between the policies' markers at one value, so intervals do not overlap


def _summary(rows: pd.DataFrame, metric: str) -> dict:
    values = rows[metric].to_numpy(dtype=np.float64)
    low, high = mean_interval(values, CONFIDENCE)
    return {"metric": metric, "mean": float(np.mean(values)), "ci_low": low, "ci_high": high,
            "n": len(values), "n_stalled": int(rows["stalled"].sum())}


def curve_rows(table: pd.DataFrame, policy: str, sweep_value: str, title: str, experiment: str) -> pd.DataFrame:
    """The rows of one run label at one sweep value (per round or per run); a
    missing curve is named."""
    rows = table[(table["policy"] == policy) & (table["sweep_value"] == sweep_value)]
    if rows.empty:
        raise ValueError(f"panel {title!r}: no rows for policy {policy!r} at sweep value {sweep_value!r} "
                         f"in experiment {experiment}")
    return rows


def sweep_panel_table(panel: Panel, runs: Mapping[str, pd.DataFrame], index: int) -> pd.DataFrame:
    """What a sweep panel draws: per curve (policy and sweep value) the mean of
    its metric over the seeds, its interval, the runs and the stalled runs;
    then the reference's row per policy (``reference`` True)."""
    table = runs[panel.experiment]
    rows = []
    for curve in panel.curves:
        group = curve_rows(table, curve.policy, curve.sweep_value, panel.title, panel.experiment)
        rows.append({"experiment": panel.experiment, "legend": curve.display, "policy": curve.policy,
                     "sweep_param": panel.sweep_param, "sweep_value": curve.sweep_value, "reference": False,
                     **_summary(group, panel.metric)})
    reference = panel.reference
    if reference is not None:
        table = runs[reference.experiment]
        display = {curve.policy: curve.display for curve in panel.curves}
        for policy, label in reference.runs:
            group = curve_rows(table, label, reference.sweep_value, panel.title, reference.experiment)
            rows.append({"experiment": reference.experiment, "legend": f"{display[policy]}: {reference.label}",
                         "policy": policy, "sweep_param": str(group["sweep_param"].iloc[0]),
                         "sweep_value": reference.sweep_value, "reference": True, **_summary(group, panel.metric)})
    frame = pd.DataFrame(rows)
    frame.insert(0, "panel_title", panel.title)
    frame.insert(0, "panel", index + 1)
    return frame[list(SWEEP_COLUMNS)]


def _positions(values: list[str]) -> tuple[np.ndarray, bool]:
    """x of each sweep value: the number itself, or its rank for text values (a stream kind)."""
    try:
        return np.array([float(v) for v in values]), True
    except ValueError:
        return np.arange(len(values), dtype=np.float64), False


def draw_sweep_panel(ax, panel: Panel, rows: pd.DataFrame, colours: Mapping[str, object]) -> None:
    """One marker+line per policy (its colour, ``colours`` by run label) with
    interval bars; the reference per policy as a dashed line with its band.
    Legends count the stalled runs of what each entry drew."""
    values = list(dict.fromkeys(curve.sweep_value for curve in panel.curves))
    x_of, numeric = _positions(values)
    x_of = dict(zip(values, x_of))
    span = (max(x_of.values()) - min(x_of.values())) or 1.0
    swept = rows[~rows["reference"].astype(bool)]
    policies = list(dict.fromkeys(swept["policy"]))
    handles = []  # the policies, then the references, in the legend
    for rank, policy in enumerate(policies):
        line = swept[swept["policy"] == policy]
        x = np.array([x_of[v] for v in line["sweep_value"]]) + (rank - (len(policies) - 1) / 2) * DODGE * span
        mean = line["mean"].to_numpy(dtype=np.float64)
        error = np.vstack([mean - line["ci_low"].to_numpy(dtype=np.float64),
                           line["ci_high"].to_numpy(dtype=np.float64) - mean])
        stalled, n = int(line["n_stalled"].sum()), int(line["n"].sum())
        label = f"{line['legend'].iloc[0]} ({stalled}/{n} stalled)"
        handles.append(ax.errorbar(x, mean, yerr=np.nan_to_num(error), color=colours[policy], marker="o", markersize=4,
                    linewidth=1.2, capsize=3, label=label))
    for row in rows[rows["reference"].astype(bool)].itertuples():
        label = f"{row.legend} ({row.n_stalled}/{row.n} stalled)"
        handles.append(ax.axhline(row.mean, color=colours[row.policy], linestyle="--", linewidth=1.0, label=label))
        if np.isfinite(row.ci_low):
            ax.axhspan(row.ci_low, row.ci_high, color=colours[row.policy], alpha=0.12, linewidth=0)
    ax.set_xticks(list(x_of.values()), values if not numeric else [f"{float(v):g}" for v in values])
    ax.set_xlabel(SWEEP_SYMBOLS.get(panel.sweep_param, panel.sweep_param))
    ax.set_ylabel(panel.metric.replace("_", " "))
    ax.set_yscale(panel.yscale)
    if panel.ylim:
        ax.set_ylim(*panel.ylim)
    ax.set_title(panel.title, fontsize=10)
    ax.grid(True, linewidth=0.4, alpha=0.5)
    ax.legend(handles=handles, fontsize=6.5, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2))
