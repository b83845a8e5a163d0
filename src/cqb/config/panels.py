"""The figures of the plan: which curves each panel of a figure draws, with
their legends, reference curves and the rounds a context stream changes at
(:func:`figure_spec`); drawn by :mod:`cqb.figures.plotting` from the
aggregate tables only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..analysis.curves import Curve, format_value
from ..errors import config_error
from ..sim.streams import shift_round, stream_kind, stream_params
from .schema import accepted_parameters, instance_sweep_keys

SWEEP_SYMBOLS = {"slack": "ϵ", "n_servers": "K", "dim": "d", "arrival_rate": "λ",
                 "bonus_scale": "c_β", "horizon": "T", "kind": "stream", "noise_scale": "σ"}


@dataclass(frozen=True)
class PanelCurve:
    policy: str  # run label: the table's `policy` column
    sweep_value: str  # as in the table
    display: str
    legend: str
    swept: bool = True  # False: a reference (the oracle) that does not take the swept parameter


@dataclass(frozen=True)
class Panel:
    title: str
    experiment: str
    sweep_param: str
    curves: tuple[PanelCurve, ...]
    yscale: str = "linear"
    ylim: tuple | None = None
    marks: tuple[int, ...] = ()  # rounds a context stream changes at (T0), drawn as vertical lines


# the bands that go with each centre line: ±1 sd or se around a mean, the
# interquartile range around a median
BANDS = {"mean": ("sd", "se", "none"), "median": ("iqr", "none")}


@dataclass(frozen=True)
class FigureSpec:
    name: str
    title: str
    panels: tuple[Panel, ...]
    band: str = "sd"  # see BANDS
    panel_width: float = 4.2
    panel_height: float = 3.4
    dpi: int = 150
    center: str = "mean"  # the line: mean or median over seeds
    quantity: str = "queue"  # what the panels draw: the queue Q(t), or the regret Q(t) − Q*(t)

    @property
    def experiments(self) -> list[str]:
        return sorted({panel.experiment for panel in self.panels})


def figure_spec(config: Mapping, curves: dict, figure_name: str) -> FigureSpec:
    """Panels of a figure with their curves, legends and reference curves."""
    figure = config["figures"][figure_name]
    panels = []
    for index, panel in enumerate(figure["panels"]):
        key = f"figures.{figure_name}.panels[{index}]"
        experiment = panel["experiment"]
        if experiment not in curves:
            config_error(f"{key}.experiment", experiment, f"not an experiment ({', '.join(curves)})")
        experiment_curves = curves[experiment]
        base_labels = list(dict.fromkeys(c.base_label for c in experiment_curves))
        labels = panel.get("policies", base_labels)
        for label in labels:
            if label not in base_labels:
                config_error(f"{key}.policies", label, f"not run in experiment {experiment} ({base_labels})")
        values = list(dict.fromkeys(c.sweep_value for c in experiment_curves))
        wanted = panel.get("sweep_values", values)
        for value in wanted:
            if value not in values:
                config_error(f"{key}.sweep_values", value, f"not a sweep value of {experiment} ({values})")
        sweep_param = experiment_curves[0].sweep_param
        symbol = SWEEP_SYMBOLS.get(sweep_param, sweep_param)
        policy_of = {c.base_label: c.policy for c in experiment_curves}
        # a label that does not take a swept policy parameter (the oracle under a
        # bonus_scale sweep) has one run set for every value: drawn once, as a reference
        fixed = {label for label in labels
                 if sweep_param and sweep_param != "horizon" and sweep_param not in instance_sweep_keys()
                 and sweep_param not in accepted_parameters(policy_of[label])}
        n_swept = len(set(labels) - fixed)
        selected = []
        for label in labels:
            for value in wanted[:1] if label in fixed else wanted:
                curve = next(c for c in experiment_curves if c.base_label == label and c.sweep_value == value)
                if not sweep_param or label in fixed:
                    legend = curve.display
                elif n_swept == 1:
                    legend = f"{symbol} = {format_value(value)}"
                else:
                    legend = f"{curve.display}, {symbol} = {format_value(value)}"
                selected.append(PanelCurve(curve.label, curve.sweep_text, curve.display, legend,
                                           label not in fixed))
        ylim = panel.get("ylim")
        drawn = {curve.policy for curve in selected}  # the run labels
        marks = tuple(sorted({mark for c in experiment_curves if c.label in drawn and c.sweep_text in
                              {curve.sweep_value for curve in selected} for mark in shift_marks(c)}))
        panels.append(Panel(panel.get("title", experiment), experiment, sweep_param, tuple(selected),
                            panel["yscale"], tuple(ylim) if ylim else None, marks))
    center, band = figure["center"], figure["band"]
    if band not in BANDS[center]:
        config_error(f"figures.{figure_name}.band", band,
                     f"does not go with center {center} (its bands: {', '.join(BANDS[center])})")
    if figure["quantity"] == "regret" and center != "mean":
        config_error(f"figures.{figure_name}.center", center, "the regret is drawn as a mean over seeds")
    return FigureSpec(figure_name, figure.get("title", figure_name), tuple(panels), band,
                      figure["panel_width"], figure["panel_height"], figure["dpi"], center, figure["quantity"])


def shift_marks(curve: Curve) -> tuple[int, ...]:
    """The round T0 at which the curve's context stream changes, if it does."""
    kind = stream_kind(curve.instance["kind"])
    params = stream_params(kind, dict(curve.instance))
    return (shift_round(params, curve.horizon),) if hasattr(params, "shift_fraction") else ()
