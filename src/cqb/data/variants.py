"""Variants of the real-data construction (sensitivity study, docs/figures.md, Figure 7).

The paper leaves open how the servers' θ* are made from a dataset. The default
reading (:func:`cqb.data.semisynthetic.build_pool_instance`) is one point of a
space of choices; a *construction variant* moves one or more of them:

* the θ* fit: the ridge weight C, an intercept (a constant feature 1 appended
  before scaling, so it lives inside the unit ball and is fitted, and
  penalised, like any other coordinate);
* the feature scaling: one common factor (``max_norm``, the default) or each
  column standardised first (``standardise``; constant columns stay 0);
* the servers: the labels, or groups of labels (``server_groups``);
* the preprocessing of one dataset (``preprocess``: the Coupon reading);
* a slack filter (``min_best_rate``): only pool rows that some server serves
  with probability at least this value are kept, which is how the synthetic
  instances meet the slack assumption (rejection of contexts), here applied to
  a finite pool. With ``min_best_rate = λ + ϵ`` the pool meets slack ϵ at λ.

The arrival rate, the norm bound S handed to the policies and the horizon are
experiment settings (config/config.yaml), not construction ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit

from .semisynthetic import PoolInstance, fit_theta, pool_diagnostics, scale_to_unit_ball

SCALINGS = ("max_norm", "standardise")


@dataclass(frozen=True)
class ConstructionVariant:
    """One point of the construction space; the defaults are the default reading."""

    name: str
    C: float = 1.0
    intercept: bool = False
    scaling: str = "max_norm"
    server_groups: tuple[tuple[int, ...], ...] = ()  # empty: one server per label
    preprocess: Mapping = field(default_factory=dict)  # overrides of the dataset's preprocess options
    min_best_rate: float | None = None  # keep rows with max_k μ(xᵀθ*_k) ≥ this
    datasets: tuple[str, ...] = ()  # the datasets it applies to; empty: all

    def __post_init__(self):
        if not (isinstance(self.C, (int, float)) and self.C > 0 and math.isfinite(self.C)):
            raise ValueError(f"variant {self.name!r}: C must be a positive number, got {self.C!r}")
        if self.scaling not in SCALINGS:
            raise ValueError(f"variant {self.name!r}: scaling must be one of {SCALINGS}, got {self.scaling!r}")
        if self.min_best_rate is not None and not 0 < self.min_best_rate < 1:
            raise ValueError(f"variant {self.name!r}: min_best_rate must lie in (0, 1), "
                             f"got {self.min_best_rate!r}")
        if self.server_groups:
            labels = [label for group in self.server_groups for label in group]
            if sorted(labels) != list(range(len(labels))) or any(not group for group in self.server_groups):
                raise ValueError(f"variant {self.name!r}: server_groups must split the labels 0..n−1 into "
                                 f"non-empty groups, each label once, got {self.server_groups!r}")

    def applies_to(self, dataset: str) -> bool:
        return not self.datasets or dataset in self.datasets

    @property
    def is_default(self) -> bool:
        return (self.C == 1.0 and not self.intercept and self.scaling == "max_norm"
                and not self.server_groups and not self.preprocess and self.min_best_rate is None)


def variant_for_dataset(name: str, entry: Mapping, dataset: str) -> ConstructionVariant:
    """The variant of a config entry (config/datasets.yaml, data.variants.<name>)
    as it applies to one dataset: per-dataset maps are read at ``dataset``."""
    def at_dataset(key, default):
        value = entry.get(key, default)
        return value.get(dataset, default) if isinstance(value, Mapping) and key != "preprocess" else value

    preprocess = entry.get("preprocess", {})
    groups = at_dataset("server_groups", [])
    variant = ConstructionVariant(
        name=name, C=float(entry.get("C", 1.0)), intercept=bool(entry.get("intercept", False)),
        scaling=entry.get("scaling", "max_norm"),
        server_groups=tuple(tuple(int(v) for v in group) for group in (groups or [])),
        preprocess=dict(preprocess.get(dataset, {})),
        min_best_rate=at_dataset("min_best_rate", None),
        datasets=tuple(entry.get("datasets", ())))
    if not variant.applies_to(dataset):
        raise ValueError(f"variant {name!r} does not apply to dataset {dataset!r} "
                         f"(its datasets: {list(variant.datasets)})")
    return variant


def standardise_columns(X: np.ndarray) -> np.ndarray:
    """Each column to mean 0 and sd 1; constant columns become 0."""
    X = np.asarray(X, dtype=np.float64)
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def group_labels(labels: np.ndarray, groups) -> np.ndarray:
    """Label → index of its group (0..len(groups)−1)."""
    if not groups:
        return labels
    mapping = np.full(max(max(g) for g in groups) + 1, -1, dtype=np.int64)
    for server, group in enumerate(groups):
        mapping[list(group)] = server
    if labels.max() >= mapping.shape[0] or (mapping[labels] < 0).any():
        raise ValueError(f"server_groups {groups} do not cover the labels {np.unique(labels).tolist()}")
    return mapping[labels]


def build_variant_instance(X: np.ndarray, y: np.ndarray, variant: ConstructionVariant,
                           max_iter: int = 1000, extra_report: dict | None = None) -> PoolInstance:
    """The pool instance of ``variant``: scale, fit θ*, filter rows, measure.

    The default variant gives the arrays of build_pool_instance exactly."""
    X = np.asarray(X, dtype=np.float64)
    labels = group_labels(np.asarray(y).astype(np.int64), variant.server_groups)
    if X.ndim != 2 or labels.shape != (X.shape[0],):
        raise ValueError(f"need X n×d and y of length n, got X {X.shape} and y {labels.shape}")
    features = standardise_columns(X) if variant.scaling == "standardise" else X
    if variant.intercept:
        features = np.hstack([features, np.ones((features.shape[0], 1))])
    contexts, scale = scale_to_unit_ball(features)
    theta = fit_theta(contexts, labels, C=variant.C, max_iter=max_iter)
    n_before = contexts.shape[0]
    if variant.min_best_rate is not None:
        keep = expit(contexts @ theta.T).max(axis=1) >= variant.min_best_rate
        if not keep.any():
            raise ValueError(f"variant {variant.name!r}: no pool row reaches best rate "
                             f"{variant.min_best_rate}")
        contexts, labels = contexts[keep], labels[keep]
    report = {"instance": {
        "variant": variant.name,
        "theta_fit": "sklearn LogisticRegression, one-vs-rest, fit_intercept=False, lbfgs"
                     + (", constant feature appended (intercept)" if variant.intercept else ""),
        "C": float(variant.C),
        "scaling": variant.scaling,
        "server_groups": [list(g) for g in variant.server_groups],
        "preprocess_overrides": dict(variant.preprocess),
        "min_best_rate": variant.min_best_rate,
        "n_pool_before_filter": int(n_before),
        "feature_scale_divisor": scale,
        **pool_diagnostics(contexts, theta, labels),
    }}
    if extra_report:
        report = {**extra_report, **report}
    return PoolInstance(contexts=contexts, theta=theta, labels=labels, report=report)
