"""Held-out tuning of the constants chosen by experiment.

The bonus scale c_β of every CQB policy and the exploration constant of Q-UCB
and Q-ThS are not fixed by the paper. Each is tuned over a grid on *tuning
seeds* that no figure reports (docs/verdicts.md), every policy with the same
budget (grid size × seeds), by one criterion:

1. fewest stalled tuning runs (a stalled run's regret grows without bound in
   T, so no finite gain elsewhere makes up for it); then
2. the smallest mean over seeds of the run's time-averaged regret
   (1/T)·Σ_t (Q(t) − Q*(t)) — how fast the policy comes down, not only where
   it ends.

The evaluation runs use the chosen values; the pipeline's tuning check fails
when the configured value of a policy differs from the choice.

**Powered tuning** (config ``tuning.stage2``; docs/verdicts.md): 30 seeds per
grid value cannot tell a stall rate of 0 from 3 %. A two-stage design, the
same rule for every policy, baselines included:

* stage 1 (the grid, 30 seeds): :func:`contenders` keeps, per policy, the
  ``contenders`` values with the smallest mean regret among those whose
  stall interval reaches down to the bound (lower end ≤ ``stall_bound``; when
  none does, among those with the fewest stalls);
* stage 2 (``seeds`` fresh tuning seeds per contender, the same for each):
  :func:`stage2_choices` picks, among the contenders whose exact 95 % upper
  stall bound is ≤ ``stall_bound`` (shown safe), the smallest mean regret;
  when none is shown safe, the fewest stalls, then the smallest mean regret,
  and says so (``safe`` false). The choice is made on stage-2 seeds only, so
  the selection in stage 1 does not bias it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .claims.statistics import bootstrap_mean_interval
from .curves import Curve
from .summaries import SummarySettings, binomial_interval, summarise_curves

TABLE_COLUMNS = ("policy", "parameter", "value", "n_runs", "n_stalled", "stall_ci_low", "stall_ci_high",
                 "stalled_seeds", "mean_regret", "mean_regret_ci_low", "mean_regret_ci_high",
                 "tail_regret_median", "chosen")
CHOICE_COLUMNS = ("policy", "parameter", "value", "n_runs", "n_stalled", "mean_regret")
CONTENDER_COLUMNS = ("policy", "label", "parameter", "value", "stage1_n_stalled", "stage1_mean_regret")


def base_label(label: str) -> str:
    """The policy label of a swept run label: 'cqb_opt.bonus_scale0.1' → 'cqb_opt'."""
    return label.split(".", 1)[0]


def tuning_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, grid value): stalls with an exact interval and the mean
    time-averaged regret with a bootstrap interval; ``chosen`` marks the
    value the criterion picks for each policy."""
    if runs.empty:
        raise ValueError("no tuning runs")
    rows = []
    runs = runs.assign(base=runs["policy"].map(base_label))
    for (policy, value), group in runs.groupby(["base", "sweep_value"], sort=False):
        stalled = group["stalled"].astype(bool)
        low, high = binomial_interval(int(stalled.sum()), len(group))
        regret = group["mean_regret"].to_numpy(dtype=np.float64)
        r_low, r_high = bootstrap_mean_interval(regret)
        rows.append({"policy": policy, "parameter": group["sweep_param"].iloc[0], "value": value,
                     "n_runs": len(group), "n_stalled": int(stalled.sum()),
                     "stall_ci_low": low, "stall_ci_high": high,
                     "stalled_seeds": " ".join(str(s) for s in group.loc[stalled, "seed"]) or "-",
                     "mean_regret": float(regret.mean()), "mean_regret_ci_low": r_low,
                     "mean_regret_ci_high": r_high,
                     "tail_regret_median": float(group["tail_regret"].median()), "chosen": False})
    table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    for policy, group in table.groupby("policy", sort=False):
        budgets = set(group["n_runs"])
        if len(budgets) != 1:
            raise ValueError(f"policy {policy!r}: grid values have different numbers of tuning runs "
                             f"{sorted(budgets)}; every value needs the same seeds")
        best = min(group.index, key=lambda i: (group.at[i, "n_stalled"], group.at[i, "mean_regret"]))
        table.loc[best, "chosen"] = True
    return table


def contenders(table: pd.DataFrame, runs: pd.DataFrame, keep: int, stall_bound: float) -> pd.DataFrame:
    """Per policy, the grid values that go on to stage 2 (see the module
    docstring), with their run labels (``runs``: the stage-1 runs table)."""
    if keep < 1:
        raise ValueError(f"contenders must be ≥ 1, got {keep}")
    label_of = {(base_label(label), value): label for label, value in zip(runs["policy"], runs["sweep_value"])}
    rows = []
    for policy, group in table.groupby("policy", sort=False):
        compatible = group[group["stall_ci_low"] <= stall_bound]
        if compatible.empty:
            compatible = group[group["n_stalled"] == group["n_stalled"].min()]
        kept = compatible.sort_values(["mean_regret", "value"], kind="stable").head(keep)
        for row in kept.itertuples():
            rows.append({"policy": policy, "label": label_of[(policy, row.value)], "parameter": row.parameter,
                         "value": row.value, "stage1_n_stalled": row.n_stalled,
                         "stage1_mean_regret": row.mean_regret})
    return pd.DataFrame(rows, columns=list(CONTENDER_COLUMNS))


def stage2_choices(table: pd.DataFrame, stall_bound: float) -> pd.DataFrame:
    """The stage-2 table (:func:`tuning_table` of the stage-2 runs) with
    ``safe`` (upper stall bound ≤ ``stall_bound``) and ``chosen`` per policy:
    the safe contender with the smallest mean regret, else the fewest stalls
    then the smallest mean regret."""
    table = table.copy()
    table["safe"] = table["stall_ci_high"] <= stall_bound
    table["chosen"] = False
    for policy, group in table.groupby("policy", sort=False):
        pool = group[group["safe"]] if group["safe"].any() else group
        best = min(pool.index, key=lambda i: (pool.at[i, "n_stalled"] if not group["safe"].any() else 0,
                                              pool.at[i, "mean_regret"]))
        table.loc[best, "chosen"] = True
    return table


def stage2_curves(labels: Sequence[str], stage1_runs: pd.DataFrame, files: Sequence[str]) -> list[Curve]:
    """The stage-2 curves: each contender's run label with its stage-2 run
    files, at its stage-1 sweep value. A file is matched to its label by the
    workflow's run-file layout (``…/{label}/seed{seed}.npz``), not by its
    position; every file must belong to a contender and every contender must
    have files (ValueError otherwise)."""
    stage1_runs = stage1_runs.drop_duplicates("policy")
    sweep = dict(zip(stage1_runs["policy"], zip(stage1_runs["sweep_param"], stage1_runs["sweep_value"])))
    by_label: dict[str, list[tuple[int, str]]] = {label: [] for label in labels}
    for path in files:
        label, name = Path(path).parent.name, Path(path).stem
        if label not in by_label or not name.startswith("seed") or not name[len("seed"):].isdigit():
            raise ValueError(f"stage-2 run file {path} is not …/<contender label>/seed<N>.npz "
                             f"of a contender ({', '.join(labels)})")
        by_label[label].append((int(name[len("seed"):]), str(path)))
    curves = []
    for label, seeded in by_label.items():
        if not seeded:
            raise ValueError(f"contender {label} has no stage-2 run files")
        if label not in sweep:
            raise ValueError(f"contender {label} is not a stage-1 label")
        seeded.sort()
        sweep_param, sweep_value = sweep[label]
        curves.append(Curve(label, sweep_param, sweep_value, seeds=tuple(s for s, _ in seeded),
                            files=tuple(path for _, path in seeded)))
    return curves


def stage2_table(contender_labels: Sequence[str] | None, stage1_runs: pd.DataFrame, files: Sequence[str],
                 settings: SummarySettings, stall_bound: float) -> pd.DataFrame:
    """The stage-2 table of :func:`stage2_choices` from the contenders' run
    files (an empty table without a second stage: ``contender_labels`` None)."""
    if contender_labels is None:
        return pd.DataFrame(columns=list(TABLE_COLUMNS) + ["safe"])
    runs = summarise_curves(stage2_curves(contender_labels, stage1_runs, files), settings)
    return stage2_choices(tuning_table(runs), stall_bound)


def choices(table: pd.DataFrame) -> pd.DataFrame:
    chosen = table[table["chosen"]]
    return chosen[list(CHOICE_COLUMNS)].reset_index(drop=True)


def mismatches(chosen: pd.DataFrame, configured: dict) -> list[str]:
    """Policies whose configured value differs from the tuned one.
    ``configured``: {policy: {parameter: value}} as the evaluation runs use it."""
    problems = []
    for row in chosen.itertuples():
        value = configured.get(row.policy, {}).get(row.parameter)
        if value is None or not math.isclose(float(value), float(row.value), rel_tol=1e-12):
            problems.append(f"{row.policy}: {row.parameter} is {value!r} in the config, tuning chose "
                            f"{row.value} ({row.n_stalled}/{row.n_runs} stalled, mean regret "
                            f"{row.mean_regret:.3g})")
    return problems


