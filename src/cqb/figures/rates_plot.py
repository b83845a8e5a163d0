"""Figure 5 and its rendered summary, from the tables of :mod:`cqb.analysis.rates` only."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..analysis.rates import RESOLVED_HALF_WIDTH, reference_curve, reference_label


def _fmt(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}".replace("-", "−") if math.isfinite(value) else "n/a"


def plot_rates(summary, slopes, panel_titles: Mapping[str, str], display_names: Mapping[str, str],
               colours: Mapping[str, str] | None = None, title: str = "", slopes_file: str = "fig5_slopes.tsv"):
    """One log–log panel per experiment: the converged mean tail regret per T
    with its 95 % bootstrap interval, the fitted line (solid) and the theorem's
    rate (dotted) anchored at the fitted line's first horizon; the legend
    below the panels. Horizons with a non-positive estimate are listed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    experiments = list(panel_titles)
    figure, axes = plt.subplots(1, len(experiments), figsize=(5.2 * len(experiments), 5.0),
                                squeeze=False, constrained_layout=True)
    handles = {}
    for axis, experiment in zip(axes[0], experiments):
        rows_e = summary[summary["experiment"] == experiment]
        horizons = np.array(sorted(rows_e["horizon"].unique()), dtype=float)
        policies = list(dict.fromkeys(rows_e["policy"]))
        offsets = np.linspace(-0.04, 0.04, len(policies)) if len(policies) > 1 else [0.0]
        notes, fitted = [], []
        for policy, offset in zip(policies, offsets):
            rows = rows_e[rows_e["policy"] == policy].sort_values("horizon")
            fit = slopes[(slopes["experiment"] == experiment) & (slopes["policy"] == policy)].iloc[0]
            colour = (colours or {}).get(policy)
            shown = (rows["estimate"] > 0).to_numpy()
            x = rows["horizon"].to_numpy(float)
            y = rows["estimate"].to_numpy(float)
            low = np.where(rows["ci_low"].to_numpy(float) > 0, rows["ci_low"].to_numpy(float), y * 1e-3)
            high = rows["ci_high"].to_numpy(float)
            stalls = rows["n_stalled"].to_numpy(int)
            label = display_names.get(policy, policy)
            points = axis.errorbar(x[shown] * np.exp(offset), y[shown],
                                   yerr=[y[shown] - low[shown], high[shown] - y[shown]],
                                   fmt="o", markersize=4, capsize=3, color=colour, linewidth=1.1)
            for xi, yi, s in zip(x[shown], y[shown], stalls[shown]):
                if s:  # stalled runs are a finding: mark them on the point
                    axis.annotate(f"{s} stalled", (xi * np.exp(offset), yi), textcoords="offset points",
                                  xytext=(4, 4), fontsize=6, color=colour)
            if not shown.all():
                notes.append(f"{label}: estimate ≤ 0 at T = {', '.join(str(int(h)) for h in x[~shown])}")
            fitted.append(f"{label}: {_fmt(fit['slope'])} [{_fmt(fit['ci_low'])}, {_fmt(fit['ci_high'])}]"
                          f" (theorem {_fmt(fit['reference_slope'])})" if math.isfinite(fit["slope"])
                          else f"{label}: no slope (< 2 positive estimates)")
            if math.isfinite(fit["slope"]):
                used = np.array([float(h) for h in str(fit["horizons_used"]).split()])
                centre = np.log(used).mean()
                level = np.log(rows.set_index("horizon").loc[used.astype(int), "estimate"].to_numpy(float)).mean()
                line = np.exp(level + fit["slope"] * (np.log(used) - centre))
                axis.plot(used, line, "-", color=colour, linewidth=1.0)
                shape = reference_curve(policy, used)
                if shape is not None:
                    axis.plot(used, line[0] * shape, ":", color=colour, linewidth=1.6)
            handles.setdefault(policy, (points, label))
        axis.set_xscale("log")
        axis.set_yscale("log", nonpositive="clip")
        axis.set_xticks(horizons, [f"{int(h):,}".replace(",", " ") for h in horizons], fontsize=8)
        axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.set_xlabel("horizon T")
        axis.set_ylabel("tail regret: mean of Q(t) − Q*(t), last 10 % of rounds")
        axis.set_title(panel_titles[experiment], fontsize=10)
        axis.grid(True, which="major", alpha=0.3)
        positive = rows_e.loc[rows_e["estimate"] > 0, "estimate"]
        if len(positive):  # bars reaching below zero run off the bottom
            axis.set_ylim(bottom=float(positive.min()) / 5)
        axis.text(0.02, 0.02, "\n".join(["slope [95 % interval]:"] + fitted + notes), transform=axis.transAxes,
                  fontsize=7, va="bottom", bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
    from matplotlib.lines import Line2D

    entries = [(handle, label) for handle, label in handles.values()]
    entries.append((Line2D([], [], color="black", linewidth=1.0), f"fitted slope ({slopes_file})"))
    entries.append((Line2D([], [], color="black", linestyle=":", linewidth=1.6),
                    "theorem's rate: CQB-ε T^(−1/4), CQB-η-2 T^(−1/2), CQB-Opt log²T"))
    figure.legend([e[0] for e in entries], [e[1] for e in entries], loc="outside lower center",
                  ncol=min(len(entries), 3), fontsize=8, frameon=False)
    if title:
        figure.suptitle(title, fontsize=11)
    return figure


def _resolve_text(fit) -> str:
    """What resolving an unresolved slope would cost (cqb.analysis.slope_precision.resolution_costs)."""
    note = fit.get("resolve_note") if hasattr(fit, "get") else None
    return f" — to resolve: {note}" if isinstance(note, str) and note else ""


def rates_summary_markdown(summary, slopes, panel_titles: Mapping[str, str],
                           display_names: Mapping[str, str], figure: str = "Figure 5") -> str:
    """The summary paragraph of a rate figure (``figure``: its name in the
    heading), every number read from the tables."""
    lines = [f"**{figure}: do the theorems' rates show up?** Estimand: the tail regret (mean of "
             "Q(t) − Q*(t) over the last 10 % of each run), averaged over the runs that did not stall; "
             f"a slope is *resolved* when its 95 % bootstrap interval has half-width ≤ {RESOLVED_HALF_WIDTH}. "
             "The bounds are upper bounds, so a slope below the bound's is consistent with the theorem.", ""]
    for experiment, panel_title in panel_titles.items():
        own = slopes[slopes["experiment"] == experiment]
        rows = summary[summary["experiment"] == experiment]
        horizons = sorted(rows["horizon"].unique())
        # the first stage's seeds in the panel's line; a second stage's in its policy's
        stage2 = rows["n_runs_stage2"] if "n_runs_stage2" in rows else 0
        seeds = (rows["n_runs"] - stage2).groupby(rows["horizon"]).max()
        counts = (f"{int(seeds.min())}" if seeds.min() == seeds.max() else f"{int(seeds.min())}–{int(seeds.max())}")
        lines.append(f"*{panel_title}* (T = {horizons[0]}–{horizons[-1]}, {counts} seeds per T):")
        for _, fit in own.iterrows():
            name = display_names.get(fit["policy"], fit["policy"])
            stalled = int(fit["n_stalled"])
            stall_text = (f"{stalled} of {int(fit['n_runs'])} runs stalled"
                          if stalled else f"no run of {int(fit['n_runs'])} stalled")
            if int(fit.get("n_runs_stage2", 0) or 0):
                per_t = rows[rows["policy"] == fit["policy"]].sort_values("horizon")
                stall_text += (f" ({int(fit['n_runs_stage2'])} of them a second stage on fresh seeds; seeds per T "
                               + ", ".join(f"{int(h)}: {int(n)}" for h, n in zip(per_t["horizon"], per_t["n_runs"]))
                               + ")")
            if math.isfinite(fit["slope"]):
                reference = reference_label(fit["policy"], "no bound")
                est = rows[rows["policy"] == fit["policy"]].sort_values("horizon")
                first, last = est.iloc[0], est.iloc[-1]
                lines.append(
                    f"- {name}: slope {_fmt(fit['slope'])} [{_fmt(fit['ci_low'])}, {_fmt(fit['ci_high'])}] "
                    f"against {_fmt(fit['reference_slope'])} for {reference} — {fit['verdict']}; "
                    f"R ≈ {_fmt(first['estimate'], 3)} at T = {int(first['horizon'])}, "
                    f"{_fmt(last['estimate'], 3)} at T = {int(last['horizon'])}; {stall_text}"
                    + (f"; left out of the fit (estimate ≤ 0): T = {fit['horizons_dropped']}"
                       if fit["horizons_dropped"] != "-" else "") + _resolve_text(fit) + ".")
            else:
                lines.append(f"- {name}: no slope (fewer than two horizons with a positive estimate); "
                             f"{stall_text}{_resolve_text(fit)}.")
        lines.append("")
    resolved = slopes[slopes["verdict"].str.startswith("resolved")]
    unresolved = slopes[~slopes["verdict"].str.startswith("resolved")]

    def names(table):
        return ", ".join(f"{display_names.get(p, p)} ({panel_titles.get(e, e).split(' (')[0]})"
                         for e, p in zip(table["experiment"], table["policy"])) or "none"

    lines.append(f"Resolved: {names(resolved)}. Not resolved: {names(unresolved)}.")
    return "\n".join(lines) + "\n"
