"""Per-experiment tidy tables from run files.

One row per (policy label, sweep value, round t): mean, standard deviation and
standard error across seeds of the queue length Q(t), of the oracle's Q*(t)
and of the regret Q(t) − Q*(t), and the median and quartiles of Q(t) and of
the regret (a mean is hostage to one stalled seed; the median is not). Rows come in the order the curves are given
(then t ascending) and floats are written with a fixed format, so the bytes
of a table depend only on the run files.
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..sim.runfile import atomic_write
from ..sim.runfile import load_run
from .curves import Curve

KEY_COLUMNS = ("policy", "sweep_param", "sweep_value", "t")
STAT_COLUMNS = (
    "queue_mean", "queue_sd", "queue_se",
    "oracle_mean", "oracle_sd", "oracle_se",
    "regret_mean", "regret_sd", "regret_se",
    "queue_median", "queue_q25", "queue_q75",
    "regret_median", "regret_q25", "regret_q75",
)
COLUMNS = KEY_COLUMNS + STAT_COLUMNS + ("n_seeds",)
DEFAULT_FLOAT_FORMAT = "%.6f"


def mean_sd_se(values: np.ndarray, ddof: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, sd and standard error over axis 0 (the seeds).

    With a single seed the sd is undefined for ddof = 1 and reported as NaN.
    """
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    if n == 0:
        raise ValueError("no runs to aggregate")
    # Sums of integer-valued floats are exact, so the mean does not depend on the order of the seeds.
    mean = values.sum(axis=0) / n
    if n - ddof <= 0:
        sd = np.full(values.shape[1:], np.nan)
    else:
        sd = np.sqrt(((values - mean) ** 2).sum(axis=0) / (n - ddof))
    return mean, sd, sd / math.sqrt(n)


def read_run_file(path) -> dict:
    """``load_run``, with one line naming the file for one that is not an intact
    run file (truncated by a crashed copy or a full quota, empty, or another
    format): numpy's own errors ("File is not a zip file", or "pickled data" with
    advice to allow pickles) name no file and point the wrong way."""
    try:
        return load_run(path)
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, TypeError) as error:
        if os.path.getsize(path) == 0:
            problem = "it is empty"
        elif not zipfile.is_zipfile(path):
            problem = "not a complete .npz archive: truncated, or another format"
        else:
            problem = str(error)  # corrupted contents, missing arrays, unreadable metadata
        raise ValueError(f"{path} is not a readable run file ({problem}): "
                         "delete it so that Snakemake runs it again") from error


def load_curve_runs(files: Iterable[str | Path]) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """Stack the queue and oracle queue of run files (two (n_seeds, T) int
    arrays) and return each run's metadata."""
    files = list(files)
    queues, oracles, metadata = [], [], []
    for path in files:
        run = read_run_file(path)
        queues.append(run["queue"])
        oracles.append(run["oracle_queue"])
        metadata.append(run["metadata"])
    lengths = {len(q) for q in queues} | {len(o) for o in oracles}
    if len(lengths) != 1:
        raise ValueError(f"run files have different horizons {sorted(lengths)}: {files}")
    seeds = [m.get("seed") for m in metadata]
    if None not in seeds and len(set(seeds)) != len(seeds):
        raise ValueError(f"the same seed appears twice among {files}")
    return np.stack(queues), np.stack(oracles), metadata


def curve_table(curve: Curve, ddof: int = 1) -> pd.DataFrame:
    queue, oracle, _ = load_curve_runs(curve.files)
    n_seeds, horizon = queue.shape
    columns = {
        "policy": curve.label,
        "sweep_param": curve.sweep_param,
        "sweep_value": curve.sweep_text,
        "t": np.arange(1, horizon + 1, dtype=np.int64),
    }
    for name, values in (("queue", queue), ("oracle", oracle), ("regret", queue - oracle)):
        mean, sd, se = mean_sd_se(values, ddof)
        columns[f"{name}_mean"], columns[f"{name}_sd"], columns[f"{name}_se"] = mean, sd, se
    for name, values in (("queue", queue), ("regret", queue - oracle)):
        # linear interpolation between order statistics (numpy's default), per round
        quartiles = np.quantile(values.astype(np.float64), [0.5, 0.25, 0.75], axis=0)
        columns[f"{name}_median"], columns[f"{name}_q25"], columns[f"{name}_q75"] = quartiles
    columns["n_seeds"] = n_seeds
    return pd.DataFrame(columns, columns=list(COLUMNS))


def aggregate_curves(curves: Sequence[Curve], ddof: int = 1) -> pd.DataFrame:
    """The tidy table of an experiment, rows in the order of ``curves`` (each
    with its run files: :meth:`cqb.analysis.curves.Curve.with_files`)."""
    if not curves:
        raise ValueError("no curves to aggregate")
    seen = set()
    for curve in curves:
        key = (curve.label, curve.sweep_text)
        if key in seen:
            raise ValueError(f"curve {key} given twice")
        seen.add(key)
    return pd.concat([curve_table(c, ddof) for c in curves], ignore_index=True)


def write_table(table: pd.DataFrame, path: str | Path, float_format: str = DEFAULT_FLOAT_FORMAT) -> None:
    """Write a tab-separated table atomically, floats in a fixed format, NaN as 'nan'."""
    text = table_text(table, float_format)
    with atomic_write(path) as temporary:  # a .tmp file, so pandas infers no compression
        if text is None:
            table.to_csv(temporary, sep="\t", index=False, float_format=float_format,
                         na_rep="nan", lineterminator="\n")
        else:
            with open(temporary, "w", encoding="utf-8", newline="") as handle:  # as pandas opens it
                handle.write(text)


# What no field may hold to be written as it is: pandas' CSV writer quotes it.
_NEEDS_QUOTING = ("\t", "\n", "\r", '"')


def _plain_text(values) -> bool:
    """Every value a str that pandas writes as it is (one join: C speed)."""
    try:
        joined = "".join(values)  # a TypeError for anything but str: None, NaN, a number
    except TypeError:
        return False
    return not any(mark in joined for mark in _NEEDS_QUOTING)


def table_text(table: pd.DataFrame, float_format: str = DEFAULT_FLOAT_FORMAT) -> str | None:
    """The bytes ``DataFrame.to_csv`` writes for :func:`write_table`, made
    column by column (each float by ``float_format % x``, as pandas formats
    it; 'nan' for NaN, which is what that gives too): several times faster on
    the per-round tables, whose millions of floats pandas formats one Python
    call each. None where pandas could write otherwise (another dtype, a
    field it would quote, a one-column table), which it then writes itself."""
    if len(table.columns) < 2 or not table.columns.is_unique or not _plain_text(table.columns):
        return None
    columns = []
    for name in table.columns:
        column = table[name]
        text = isinstance(column.dtype, pd.StringDtype) or column.dtype == object
        if not (text or isinstance(column.dtype, np.dtype)):  # another extension dtype: nullable, categorical
            return None
        values = column.to_numpy()
        if values.dtype == np.float64:
            columns.append([float_format % value for value in values.tolist()])
        elif values.dtype.kind in "iu" and values.dtype.itemsize == 8 or values.dtype == np.bool_:
            columns.append([str(value) for value in values.tolist()])
        elif text and _plain_text(values.tolist()):  # no missing value: pandas writes those as 'nan'
            columns.append(values.tolist())
        else:
            return None
    lines = ["\t".join(table.columns), *map("\t".join, zip(*columns))]
    return "\n".join(lines) + "\n"


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a table written by :func:`write_table` (sweep values kept as text)."""
    return pd.read_csv(path, sep="\t", dtype={"policy": str, "sweep_param": str, "sweep_value": str},
                       keep_default_na=False, na_values={c: ["nan"] for c in STAT_COLUMNS})


def final_values(table: pd.DataFrame) -> pd.DataFrame:
    """The last round of every curve: Q(T), Q*(T) and the regret, mean and sd."""
    last = table.groupby(["policy", "sweep_value"])["t"].transform("max") == table["t"]
    return table.loc[last, ["policy", "sweep_param", "sweep_value", "t", "queue_mean", "queue_sd",
                            "oracle_mean", "regret_mean", "regret_sd", "n_seeds"]].reset_index(drop=True)
