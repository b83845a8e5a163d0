"""The figures of the plan: which curves each panel of a figure draws, with
their legends, reference curves and the rounds a context stream changes at
(:func:`figure_spec`); drawn by :mod:`cqb.figures.plotting` from the
aggregate tables only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..analysis.curves import Curve, format_value
from ..analysis.summaries import RUN_COLUMNS
from ..errors import config_error
from ..sim.streams import shift_round, stream_kind, stream_params
from .schema import accepted_parameters, instance_sweep_keys

SWEEP_SYMBOLS = {"slack": "ϵ", "n_servers": "K", "dim": "d", "arrival_rate": "λ",
                 "bonus_scale": "c_β", "horizon": "T", "kind": "stream", "noise_scale": "σ"}
# what a sweep panel (x: sweep) may draw: a number per run of the runs table
SWEEP_METRICS = tuple(c for c in RUN_COLUMNS if c not in ("policy", "sweep_param", "sweep_value", "seed", "code_hash"))


@dataclass(frozen=True)
class PanelCurve:
    policy: str  # run label: the table's `policy` column
    sweep_value: str  # as in the table
    display: str
    legend: str
    swept: bool = True  # False: a reference (the oracle) that does not take the swept parameter


@dataclass(frozen=True)
class SweepReference:
    """Another experiment's runs at one sweep value, drawn across a sweep panel
    per policy: ``runs`` maps the panel's run label to the reference's."""
    experiment: str
    sweep_value: str  # as in the runs table
    label: str
    runs: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Panel:
    title: str
    experiment: str
    sweep_param: str
    curves: tuple[PanelCurve, ...]
    yscale: str = "linear"
    ylim: tuple | None = None
    marks: tuple[int, ...] = ()  # rounds a context stream changes at (T0), drawn as vertical lines
    x: str = "round"  # round: a curve over rounds per curve; sweep: a run metric against the sweep value
    metric: str = "tail_regret"  # the runs table's column a sweep panel draws
    reference: SweepReference | None = None


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
        """The experiments whose aggregate (per-round) tables the round panels draw."""
        return sorted({panel.experiment for panel in self.panels if panel.x == "round"})

    @property
    def runs_experiments(self) -> list[str]:
        """The experiments whose runs tables the sweep panels (and their references) draw."""
        return sorted({name for panel in self.panels if panel.x == "sweep"
                       for name in (panel.experiment,) + ((panel.reference.experiment,) if panel.reference else ())})


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
        reference = sweep_reference(panel, key, curves, selected, sweep_param)
        panels.append(Panel(panel.get("title", experiment), experiment, sweep_param, tuple(selected),
                            panel["yscale"], tuple(ylim) if ylim else None, marks, panel["x"], panel["metric"],
                            reference))
    center, band = figure["center"], figure["band"]
    if band not in BANDS[center]:
        config_error(f"figures.{figure_name}.band", band,
                     f"does not go with center {center} (its bands: {', '.join(BANDS[center])})")
    if figure["quantity"] == "regret" and center != "mean":
        config_error(f"figures.{figure_name}.center", center, "the regret is drawn as a mean over seeds")
    return FigureSpec(figure_name, figure.get("title", figure_name), tuple(panels), band,
                      figure["panel_width"], figure["panel_height"], figure["dpi"], center, figure["quantity"])


def sweep_reference(panel: Mapping, key: str, curves: dict, selected: list[PanelCurve],
                    sweep_param: str) -> SweepReference | None:
    """Check a panel's x, metric and reference; the reference it draws, if any."""
    if panel["x"] == "round":
        if "reference" in panel:
            config_error(f"{key}.reference", panel["reference"], "only a sweep panel (x: sweep) draws a reference")
        return None
    if not sweep_param:
        config_error(f"{key}.x", panel["x"], f"experiment {panel['experiment']} has no sweep")
    if panel["metric"] not in SWEEP_METRICS:
        config_error(f"{key}.metric", panel["metric"], f"not a column of the runs table ({', '.join(SWEEP_METRICS)})")
    if "reference" not in panel:
        return None
    entry, where = panel["reference"], f"{key}.reference"
    if entry["experiment"] not in curves:
        config_error(f"{where}.experiment", entry["experiment"], f"not an experiment ({', '.join(curves)})")
    reference_curves = curves[entry["experiment"]]
    values = list(dict.fromkeys(c.sweep_value for c in reference_curves))
    value = entry.get("sweep_value", values[0])
    if value not in values:
        config_error(f"{where}.sweep_value", value, f"not a sweep value of {entry['experiment']} ({values})")
    at_value = {c.base_label: c for c in reference_curves if c.sweep_value == value}
    base_of = {c.label: c.base_label for c in curves[panel["experiment"]]}
    runs = {}
    for curve in selected:
        base = base_of[curve.policy]
        if base not in at_value:
            config_error(f"{where}.experiment", entry["experiment"], f"does not run {base}")
        runs[curve.policy] = at_value[base].label
    text = at_value[next(iter(at_value))].sweep_text
    reference_param = reference_curves[0].sweep_param
    label = entry.get("label") or (f"{entry['experiment']}, {SWEEP_SYMBOLS.get(reference_param, reference_param)}"
                                   f" = {text}" if reference_param else entry["experiment"])
    return SweepReference(entry["experiment"], text, label, tuple(runs.items()))


def shift_marks(curve: Curve) -> tuple[int, ...]:
    """The round T0 at which the curve's context stream changes, if it does."""
    kind = stream_kind(curve.instance["kind"])
    params = stream_params(kind, dict(curve.instance))
    return (shift_round(params, curve.horizon),) if hasattr(params, "shift_fraction") else ()
