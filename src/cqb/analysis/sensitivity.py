"""Figure 7: does "CQB-ε performs best on every real dataset" survive the
construction choices the paper leaves open? (docs/figures.md, Figure 7)

A *cell* is one (dataset, column) of the grid: an ordinary experiment of
config/config.yaml (``<dataset>_<column>``; the column ``default`` is the
Figure 4 experiment ``<dataset>``) with a ``best`` claim on CQB-ε, generated from the grid
(:func:`grid_claims`) with the Figure 4 claim's reading. Its verdict is that claim's, computed by
:func:`cqb.analysis.claims.kinds.check_claim` (kind ``best``) on the experiment's per-run summaries; beside it
the instance's measured slack, κ and S (from the pool's report.json; for a
bound per server, the range min_k–max_k of S_k = ‖θ*_k‖) and, per
policy, the mean final queue, the mean regret and the stalled runs; CQB-ε's rank is
on the claim's metric (the regret at the end of the horizon).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..datasets.registry import dataset_display_name
from ..errors import ConfigError
from ..sim.streams import family_of
from .claims.kinds import BEST, check_claim
from .claims.registry import ClaimSpec
from .verdict_rules import FAILS, HOLDS, INCONCLUSIVE

NOT_RUN = "not run"
TABLE_COLUMNS = ("dataset", "column", "column_label", "choice", "experiment", "n_servers", "dim",
                 "n_pool", "arrival_rate", "horizon", "slack", "lambda_for_margin", "kappa",
                 "norm_bound", "norm_bound_min", "theta_norm_max", "policy", "label", "n_seeds", "final_queue_mean",
                 "mean_regret_mean", "n_stalled", "eps_rank", "n_policies", "verdict", "value",
                 "ci_low", "ci_high", "decisive")


@dataclass(frozen=True)
class Cell:
    dataset: str
    column: str
    column_label: str
    choice: str
    experiment: str
    report: str  # the pool's report.json
    arrival_rate: float
    horizon: int
    norm_bound: float | None  # the S the CQB policies are given; None → max ‖θ*_k‖
    policies: tuple[tuple[str, str], ...]  # (label, policy) of the experiment, oracle excluded
    spec: ClaimSpec
    norm_bound_kind: str = "shared"  # "per_server": server k's S_k = ‖θ*_k‖ (the report's theta_norms)


def grid_claims(plan, specs: Sequence[ClaimSpec]) -> list[ClaimSpec]:
    """One ``best`` claim per cell of the plan's grid (:class:`cqb.config.experiments.GridCell`)
    outside the default column: CQB-ε (the experiment's label of policy
    cqb_eps) is best, read as the dataset's Figure 4 claim (the ``best`` claim
    on the experiment <dataset>: its quote, metric and alternative readings).
    Cells whose experiment already has a ``best`` claim keep it."""
    from dataclasses import replace

    claimed = {s.experiment for s in specs if s.kind == BEST}
    generated = []
    for grid_cell in plan.grid:
        experiment = grid_cell.experiment
        if grid_cell.column == "default" or experiment in claimed:
            continue
        figure4 = [s for s in specs if s.experiment == grid_cell.dataset and s.kind == BEST]
        if not figure4:
            raise ConfigError(f"invalid config value data.sensitivity.columns ({grid_cell.column}): "
                              f"the Figure 4 experiment {grid_cell.dataset} has no `best` claim in `claims` "
                              "to read the cell as")
        labels = [c.label for c in plan.curves[experiment] if c.policy == "cqb_eps"]
        if not labels:
            raise ConfigError(f"invalid config value experiments.{experiment}.policies: "
                              "a grid cell needs a CQB-ε policy")
        name = dataset_display_name(grid_cell.dataset)
        generated.append(replace(figure4[0], name=f"eps_best_{experiment}", figure="fig7",
                                 experiment=experiment, policies=(labels[0],),
                                 statement=f"CQB-ε performs best on {name} ({grid_cell.label})"))
    return generated


def grid_cells(grid: Sequence, plan, specs: Sequence[ClaimSpec]) -> list[Cell]:
    """The cells of the plan's grid (:class:`cqb.config.experiments.GridCell`:
    dataset, column, label, choice, experiment), each with the ``best`` claim
    on its experiment (ConfigError when it has none) and what its runs are."""
    cells = []
    for grid_cell in grid:
        experiment = grid_cell.experiment
        claimed = [s for s in specs if s.experiment == experiment and s.kind == BEST]
        if not claimed:
            raise ConfigError(f"invalid config value data.sensitivity.columns ({grid_cell.column}): "
                              f"experiment {experiment} has no `best` claim in `claims`")
        spec = claimed[0]
        curves = plan.curves[experiment]
        instance = curves[0].instance
        if family_of(instance) != "pool":
            raise ConfigError(f"invalid config value experiments.{experiment}.instance: "
                              "a grid cell needs a pool instance")
        by_label = {curve.base_label: curve for curve in curves}
        cells.append(Cell(
            dataset=grid_cell.dataset, column=grid_cell.column, column_label=grid_cell.label,
            choice=grid_cell.choice, experiment=experiment,
            report=str(Path(instance["pool"]).with_name("report.json")),
            arrival_rate=float(instance["arrival_rate"]), horizon=int(curves[0].horizon),
            norm_bound=by_label[spec.policies[0]].params.get("norm_bound"),
            norm_bound_kind=by_label[spec.policies[0]].params.get("norm_bound_kind", "shared"),
            policies=tuple((c.base_label, c.policy) for c in curves if c.policy != "oracle"),
            spec=spec))
    return cells


def cell_rows(cell: Cell, runs: pd.DataFrame, report: Mapping, slack_margin: float) -> list[dict]:
    """The table rows of one cell: one per policy (label) of its experiment."""
    instance = report["instance"]
    result = check_claim(runs, cell.spec)
    regret = {label: float(runs.loc[runs["policy"] == label, "mean_regret"].mean())
              for label, _ in cell.policies}
    claimed_metric = {label: float(runs.loc[runs["policy"] == label, cell.spec.metric].mean())
                      for label, _ in cell.policies}
    order = sorted(claimed_metric, key=lambda label: claimed_metric[label])  # ranked on the claim's metric
    claimed = cell.spec.policies[0]
    decisive = _decisive_policy(result.statistic)
    # norm_bound / norm_bound_min: the largest / smallest S_k (equal for a shared S)
    if cell.norm_bound_kind == "per_server":
        norm_bound, norm_bound_min = max(instance["theta_norms"]), min(instance["theta_norms"])
    else:
        norm_bound = cell.norm_bound if cell.norm_bound is not None else instance["theta_norm_max"]
        norm_bound_min = norm_bound
    common = {
        "dataset": cell.dataset, "column": cell.column, "column_label": cell.column_label,
        "choice": cell.choice, "experiment": cell.experiment, "n_servers": instance["K"],
        "dim": instance["d"], "n_pool": instance["n_pool"], "arrival_rate": cell.arrival_rate,
        "horizon": cell.horizon, "slack": instance["best_rate_min"] - cell.arrival_rate,
        "lambda_for_margin": instance["best_rate_min"] - slack_margin,
        "kappa": instance["kappa_measured"],
        "norm_bound": norm_bound, "norm_bound_min": norm_bound_min,
        "theta_norm_max": instance["theta_norm_max"], "eps_rank": order.index(claimed) + 1,
        "n_policies": len(order), "verdict": result.verdict, "value": result.value,
        "ci_low": result.ci_low, "ci_high": result.ci_high, "decisive": decisive,
    }
    rows = []
    for label, policy in cell.policies:
        own = runs[runs["policy"] == label]
        rows.append({**common, "policy": policy, "label": label, "n_seeds": len(own),
                     "final_queue_mean": float(own["final_queue"].mean()),
                     "mean_regret_mean": regret[label], "n_stalled": int(own["stalled"].sum())})
    return rows


def _decisive_policy(statistic: str) -> str:
    """The other policy of the comparison that decided (the ``best`` check names it: "(here X)")."""
    match = re.search(r"\(here ([^)]+)\)", statistic)
    return match.group(1) if match else ""


def sensitivity_table(cells: Sequence[Cell], runs_tables: Mapping[str, pd.DataFrame],
                      reports: Mapping[str, Mapping], slack_margin: float) -> pd.DataFrame:
    rows = [row for cell in cells
            for row in cell_rows(cell, runs_tables[cell.experiment], reports[cell.report], slack_margin)]
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def load_report(path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def cell_summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (the cell-level columns of the table)."""
    keep = [c for c in TABLE_COLUMNS if c not in ("policy", "label", "n_seeds", "final_queue_mean",
                                                    "mean_regret_mean", "n_stalled")]
    first = table.drop_duplicates(["dataset", "column"])[keep]
    eps = table[table["policy"] == "cqb_eps"][["dataset", "column", "final_queue_mean", "n_stalled"]]
    return first.merge(eps.rename(columns={"final_queue_mean": "eps_final_queue",
                                           "n_stalled": "eps_stalled"}), on=["dataset", "column"])


def render_summary(table: pd.DataFrame, datasets: Sequence[str], columns: Sequence[Mapping],
                   source: str = "figures/fig7.tsv") -> str:
    """The README paragraph and per-cell lines, every number from ``table``."""
    cells = cell_summary(table)
    counts = {v: int((cells["verdict"] == v).sum()) for v in (HOLDS, FAILS, INCONCLUSIVE)}
    label = {c["name"]: c["label"] for c in columns}
    lines = [f"<!-- rendered by the fig7 rule (cqb.analysis.sensitivity.render_summary) from {source}; "
             "do not edit by hand -->",
             f"Of {len(cells)} (dataset, construction) cells run, the claim \"CQB-ε performs best\" "
             f"**holds in {counts[HOLDS]}**, **does not hold in {counts[FAILS]}** and is "
             f"**inconclusive in {counts[INCONCLUSIVE]}** (paired by seed over "
             f"{int(table['n_seeds'].min())}–{int(table['n_seeds'].max())} evaluation seeds; "
             "bootstrap 95% intervals of the mean-regret difference to every other policy)."]
    for dataset in datasets:
        own = cells[cells["dataset"] == dataset]
        if own.empty:
            continue
        default = own[own["column"] == "default"]
        flips = own[(own["column"] != "default") & (own["verdict"] != default["verdict"].iloc[0])] \
            if not default.empty else own.iloc[0:0]
        head = dataset_display_name(dataset)
        if not default.empty:
            d = default.iloc[0]
            head += (f": by default the claim {_verdict_words(d['verdict'])} (CQB-ε ranks "
                     f"{d['eps_rank']} of {d['n_policies']}; slack {d['slack']:.3f}, S {norm_bound_text(d)})")
        head += ("; the verdict changes under " + ", ".join(
            f"{label[r['column']]} ({_verdict_words(r['verdict'])}, rank {r['eps_rank']}, "
            f"slack {r['slack']:.3f}, S {norm_bound_text(r)})" for _, r in flips.iterrows())
            if len(flips) else "; no choice run changes the verdict") + "."
        ranks = own["eps_rank"]
        head += f" CQB-ε's rank over the {len(own)} constructions: {ranks.min()}–{ranks.max()}."
        lines.append(head)
    lines += ["", "| dataset | construction | λ | T | slack | κ | S | CQB-ε rank | CQB-ε Q(T) | "
                  "CQB-ε stalled | decisive other | Δ regret at the end [95% CI] | verdict |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"]
    for _, c in cells.iterrows():
        lines.append(f"| {dataset_display_name(c['dataset'])} | {label[c['column']]} | "
                     f"{c['arrival_rate']:g} | {c['horizon']} | {c['slack']:.3f} | {c['kappa']:.3g} | "
                     f"{norm_bound_text(c)} | {c['eps_rank']}/{c['n_policies']} | "
                     f"{c['eps_final_queue']:.3g} | {c['eps_stalled']} | {c['decisive']} | "
                     f"{c['value']:.3g} [{c['ci_low']:.3g}, {c['ci_high']:.3g}] | {c['verdict']} |")
    return "\n".join(lines) + "\n"


def norm_bound_text(cell) -> str:
    """S of a cell: one number, or the range of S_k for a bound per server."""
    low, high = f"{cell['norm_bound_min']:.3g}", f"{cell['norm_bound']:.3g}"
    return high if low == high else f"{low}–{high} per server"


def _verdict_words(verdict: str) -> str:
    return {HOLDS: "holds", FAILS: "does not hold", INCONCLUSIVE: "is inconclusive"}[verdict]
