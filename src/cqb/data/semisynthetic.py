"""Semi-synthetic instances from a labelled feature pool (docs/model.md#real-data-pools).

Servers are the class labels. θ*_k is the coefficient vector of a
no-intercept logistic regression of 1{y = k} on the features, after scaling
every row by one common factor so the largest row norm is 1 (the model needs
‖x‖ ≤ 1). Contexts are later drawn uniformly from the pool. The slack is not
enforced; the report gives the measured one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from ..sim.runfile import atomic_write


@dataclass
class PoolInstance:
    """Contexts (n×d, max row norm 1), θ* (K×d), labels (n) and the build report."""

    contexts: np.ndarray
    theta: np.ndarray
    labels: np.ndarray
    report: dict


def scale_to_unit_ball(X: np.ndarray) -> tuple[np.ndarray, float]:
    """Divide all rows by the largest row norm; returns the scaled rows and the factor."""
    X = np.asarray(X, dtype=np.float64)
    max_norm = float(np.linalg.norm(X, axis=1).max())
    if not np.isfinite(max_norm) or max_norm <= 0:
        raise ValueError(f"cannot scale features with largest row norm {max_norm}")
    return X / max_norm, max_norm


def fit_theta(contexts: np.ndarray, labels: np.ndarray, C: float = 1.0, max_iter: int = 1000) -> np.ndarray:
    """One binary no-intercept logistic regression of 1{label = k} per class k (one-vs-rest)."""
    if C <= 0:
        raise ValueError(f"regularisation C must be positive, got {C}")
    classes = np.unique(labels)
    if not np.array_equal(classes, np.arange(len(classes))):
        raise ValueError(f"labels must be 0..K-1, got classes {classes.tolist()}")
    theta = np.empty((len(classes), contexts.shape[1]), dtype=np.float64)
    for k in classes:
        model = LogisticRegression(C=C, fit_intercept=False, solver="lbfgs", max_iter=max_iter)
        model.fit(contexts, (labels == k).astype(np.int64))
        theta[k] = model.coef_[0]
    return theta


def pool_diagnostics(contexts: np.ndarray, theta: np.ndarray, labels: np.ndarray) -> dict:
    """Best service rates, κ, norms and how well argmax_k xᵀθ*_k reproduces the labels.

    No arrival rate here: λ belongs to the experiment (config/config.yaml), and
    one pool serves any λ. The slack measured at λ is best_rate_min − λ.
    """
    rates = expit(contexts @ theta.T)  # n × K service probabilities μ(xᵀθ*_k)
    best_rate = rates.max(axis=1)
    derivative = rates * (1.0 - rates)
    predicted = np.argmax(contexts @ theta.T, axis=1)
    K = theta.shape[0]
    counts = np.bincount(labels, minlength=K)
    return {
        "K": int(K),
        "d": int(theta.shape[1]),
        "n_pool": int(contexts.shape[0]),
        "best_rate_min": float(best_rate.min()),
        "best_rate_quantiles": {
            q: float(np.quantile(best_rate, float(q))) for q in ("0.01", "0.1", "0.5", "0.9")
        },
        "mean_best_rate": float(best_rate.mean()),
        "kappa_measured": float(1.0 / derivative.min()),
        "mu_dot_min": float(derivative.min()),
        # κ restricted to each row's best server: the servers the oracle actually uses.
        "kappa_at_best_server": float(1.0 / derivative[np.arange(len(rates)), rates.argmax(axis=1)].min()),
        "theta_norm_max": float(np.linalg.norm(theta, axis=1).max()),
        "theta_norms": [float(v) for v in np.linalg.norm(theta, axis=1)],
        "context_norm_max": float(np.linalg.norm(contexts, axis=1).max()),
        "context_norm_mean": float(np.linalg.norm(contexts, axis=1).mean()),
        "label_accuracy": float(np.mean(predicted == labels)),
        "chance_uniform": float(1.0 / K),
        "chance_majority": float(counts.max() / counts.sum()),
    }


def build_pool_instance(
    X: np.ndarray,
    y: np.ndarray,
    C: float = 1.0,
    max_iter: int = 1000,
    extra_report: dict | None = None,
) -> PoolInstance:
    """Scale the pool into the unit ball, fit θ*, and measure the instance."""
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(y).astype(np.int64)
    if X.ndim != 2 or labels.shape != (X.shape[0],):
        raise ValueError(f"need X n×d and y of length n, got X {X.shape} and y {labels.shape}")
    contexts, scale = scale_to_unit_ball(X)
    theta = fit_theta(contexts, labels, C=C, max_iter=max_iter)
    report = {"instance": {
        "theta_fit": "sklearn LogisticRegression, one-vs-rest, fit_intercept=False, lbfgs",
        "C": float(C),
        "feature_scale_divisor": scale,
        **pool_diagnostics(contexts, theta, labels),
    }}
    if extra_report:
        report = {**extra_report, **report}
    return PoolInstance(contexts=contexts, theta=theta, labels=labels, report=report)


def _atomic_savez(path: Path, **arrays) -> None:
    with atomic_write(path) as temporary, open(temporary, "wb") as handle:
        np.savez(handle, **arrays)


def save_pool(path: str | os.PathLike, contexts, theta, labels, report: dict) -> None:
    """Write the pool `.npz` of docs/architecture.md atomically."""
    contexts = np.asarray(contexts, dtype=np.float64)
    theta = np.asarray(theta, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64)
    if contexts.ndim != 2 or theta.ndim != 2 or theta.shape[1] != contexts.shape[1]:
        raise ValueError(f"contexts {contexts.shape} and theta {theta.shape} must be n×d and K×d")
    if labels.shape != (contexts.shape[0],):
        raise ValueError(f"labels shape {labels.shape} does not match {contexts.shape[0]} contexts")
    max_norm = float(np.linalg.norm(contexts, axis=1).max())
    if max_norm > 1.0 + 1e-9:
        raise ValueError(f"contexts must have row norm at most 1, largest is {max_norm}")
    _atomic_savez(
        Path(path), contexts=contexts, theta=theta, labels=labels,
        report=np.array(json.dumps(report, sort_keys=True)),
    )


def load_pool(path: str | os.PathLike) -> PoolInstance:
    """Read a pool `.npz` written by save_pool."""
    with np.load(path, allow_pickle=False) as data:
        missing = {"contexts", "theta", "labels", "report"} - set(data.files)
        if missing:
            raise ValueError(f"{path} is not a pool file: missing {sorted(missing)}")
        return PoolInstance(
            contexts=data["contexts"].astype(np.float64, copy=False),
            theta=data["theta"].astype(np.float64, copy=False),
            labels=data["labels"].astype(np.int64, copy=False),
            report=json.loads(str(data["report"])),
        )


def save_features(path: str | os.PathLike, X, y, feature_names, report: dict) -> None:
    """The preprocessing output (intermediate between the preprocess and instance rules)."""
    _atomic_savez(
        Path(path), X=np.asarray(X, dtype=np.float64), y=np.asarray(y).astype(np.int64),
        feature_names=np.array(list(feature_names), dtype=str),
        report=np.array(json.dumps(report, sort_keys=True)),
    )


def load_features(path: str | os.PathLike):
    """(X, y, feature_names, report) from save_features."""
    with np.load(path, allow_pickle=False) as data:
        return (
            data["X"].astype(np.float64, copy=False),
            data["y"].astype(np.int64, copy=False),
            [str(v) for v in data["feature_names"]],
            json.loads(str(data["report"])),
        )
