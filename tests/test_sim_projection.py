"""Filippi's projection certified by its KKT conditions, from numpy: problems
with S/‖θ̂‖ close to 1 (0.99–0.99999) and across 0.2–0.99, each solved from a
start away from the optimum; its status (converged or not) counted by the
estimator, recorded by a run and reported per curve with its seeds."""

from __future__ import annotations

import numpy as np
import pytest

from cqb.analysis.summaries import curve_summaries, summarise_curves
from cqb.publishing.markdown_tables import results_summary
from cqb.sim.core import core
from cqb.sim.estimation import LogisticEstimator, filippi_projection
from cqb.sim.runfile import load_run, save_run
from cqb.sim.simulate import simulate
from conftest import curve_of
from reference_math import estimator_params, fit_logistic


def problem(seed, ratio_low, ratio_high, max_dim=40):
    """Filippi's objective on n samples of dimension d ≤ max_dim, θ̂ the
    regularised MLE, V = XᵀX + 10λ₀I; S = ratio·‖θ̂‖, the ratio log-uniform in
    its gap to 1 within [ratio_low, ratio_high]."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, max_dim + 1))
    n = int(rng.integers(d + 2, 3 * d + 40))
    X = rng.standard_normal((n, d)) / np.sqrt(d) * rng.uniform(0.5, 3)
    theta_true = rng.standard_normal(d) * rng.uniform(0.5, 4) / np.sqrt(d) * 3
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ theta_true))).astype(float)
    mle = fit_logistic(X, y, 1.0, tol=1e-12)
    design_inv = np.linalg.inv(X.T @ X + 10 * np.eye(d))
    gap = np.exp(rng.uniform(np.log(1 - ratio_high), np.log(1 - ratio_low)))
    bound = float(np.linalg.norm(mle)) * (1 - gap)
    # a start away from the optimum: a random point of the ball, not the radial one
    direction = rng.standard_normal(d)
    start = direction / np.linalg.norm(direction) * bound * rng.uniform(0.1, 1.0)
    return X, mle, design_inv, 1.0, bound, start


def kkt_residual(X, mle, design_inv, reg, bound, theta):
    """(‖∇f + 2νθ‖/‖∇f‖, ν) from numpy, ν = max(0, −∇fᵀθ/(2‖θ‖²)) on the sphere."""
    mu = lambda z: 0.5 * (1 + np.tanh(0.5 * z))  # noqa: E731
    prob = mu(X @ theta)
    residual = X.T @ (prob - mu(X @ mle)) + reg * (theta - mle)
    jacobian = (X.T * (prob * (1 - prob))) @ X + reg * np.eye(len(theta))
    gradient = 2 * jacobian @ design_inv @ residual
    on_sphere = np.linalg.norm(theta) >= bound * (1 - 1e-10)
    nu = max(0.0, -(gradient @ theta) / (2 * theta @ theta)) if on_sphere else 0.0
    return float(np.linalg.norm(gradient + 2 * nu * theta) / np.linalg.norm(gradient)), nu


@pytest.mark.parametrize("ratios", [(0.99, 0.99999), (0.2, 0.99)])
def test_the_projection_is_a_kkt_point_from_a_start_away_from_it(ratios):
    tolerance = core().PROJECTION_KKT_TOL
    residuals = []
    for seed in range(40):
        X, mle, design_inv, reg, bound, start = problem(seed, *ratios)
        assert kkt_residual(X, mle, design_inv, reg, bound, start)[0] > 1e-3  # the start is far from optimal
        projected = filippi_projection(X, mle, design_inv, reg, bound, start)
        assert projected.converged, f"seed {seed}: not converged, residual {projected.kkt_residual:.3g}"
        assert projected.kkt_residual <= tolerance
        theta = projected.theta
        assert bound * (1 - 1e-10) <= np.linalg.norm(theta) <= bound * (1 + 1e-12)
        residual, nu = kkt_residual(X, mle, design_inv, reg, bound, theta)
        assert nu > 0, f"seed {seed}: the multiplier is not positive"
        residuals.append(residual)
    worst = int(np.argmax(residuals))
    assert max(residuals) <= 2 * tolerance, f"seed {worst}: numpy's KKT residual {max(residuals):.3g}"


def test_an_inside_mle_is_its_own_projection():
    """θ̂ inside the ball is the minimiser (f(θ̂) = 0 ≤ f): returned as it is."""
    X, mle, design_inv, reg, bound, start = problem(3, 0.2, 0.9)
    projected = filippi_projection(X, mle, design_inv, reg, 1.01 * np.linalg.norm(mle), start * 0.5)
    np.testing.assert_array_equal(projected.theta, mle)
    assert projected.converged and projected.steps == 0


@pytest.mark.parametrize("change, message", [
    (dict(reg=0.0), "reg must be a positive number, got 0.0"),
    (dict(reg=-1.0), "reg must be a positive number, got -1.0"),
    (dict(bound=float("nan")), "bound must be a positive number, got nan"),
    (dict(start_scale=1.5), "the start must lie inside the ball"),
])
def test_bad_projection_input_is_one_clear_error(change, message):
    X, mle, design_inv, reg, bound, start = problem(1, 0.5, 0.9)
    start = start / np.linalg.norm(start) * bound * change.get("start_scale", 0.5)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        filippi_projection(X, mle, design_inv, change.get("reg", reg), change.get("bound", bound), start)


def test_a_capped_solve_is_reported_not_converged():
    X, mle, design_inv, reg, bound, start = problem(2, 0.5, 0.9)
    capped = filippi_projection(X, mle, design_inv, reg, bound, start, max_iter=1)
    assert not capped.converged and capped.steps == 1 and capped.kkt_residual > core().PROJECTION_KKT_TOL
    assert filippi_projection(X, mle, design_inv, reg, bound, start).converged


def _capped_estimator(monkeypatch, max_iter):
    """Every CQB policy's estimator built with its solver capped at max_iter steps."""
    import cqb.sim.policies.optimistic as optimistic

    def capped(*args):
        estimator = LogisticEstimator(*args)
        estimator.projection_max_iter = max_iter
        return estimator

    monkeypatch.setattr(optimistic, "LogisticEstimator", capped)


INSTANCE = {"kind": "synthetic", "n_servers": 2, "dim": 3, "arrival_rate": 0.7, "slack": 0.1}
PARAMS = {"norm_bound": 0.3}  # a small ball: the projection runs on most updates


def test_a_run_counts_its_unconverged_projections_and_the_report_names_their_seeds(monkeypatch, tmp_path):
    runs = {}
    for seed in (0, 1):
        runs[seed] = simulate(INSTANCE, "cqb_opt", PARAMS, 300, seed)
        assert runs[seed].metadata["projections"] > 10
        assert runs[seed].metadata["projection_unconverged"] == 0  # uncapped: every solve certified
    _capped_estimator(monkeypatch, 1)
    capped = simulate(INSTANCE, "cqb_opt", PARAMS, 300, 2)
    assert 0 < capped.metadata["projection_unconverged"] <= capped.metadata["projections"]
    runs[2] = capped
    files = []
    for seed, result in runs.items():
        save_run(tmp_path / f"seed{seed}.npz", result)
        files.append(tmp_path / f"seed{seed}.npz")
    table = summarise_curves([curve_of("cqb_opt", files)])
    assert table["projection_unconverged"].tolist() == [0, 0, capped.metadata["projection_unconverged"]]
    row = curve_summaries(table).iloc[0]
    assert row["n_unconverged_runs"] == 1 and row["unconverged_seeds"] == "2"
    text = results_summary({"base": curve_summaries(table)}, {}, {})
    assert "| 1/3: 2 |" in text


def test_the_estimator_counts_capped_solves():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(80, 3))
    y = (X @ np.array([6.0, -3.0, 0]) + rng.normal(size=80) > 0).astype(float)
    counts = []
    for max_iter in (1, None):
        est = LogisticEstimator(1, 3, 80, estimator_params(norm_bound=1.0, reg=0.01))
        if max_iter is not None:
            est.projection_max_iter = max_iter
        for i in range(80):
            est.update(0, X[i], y[i])
        assert est.projections > 20
        counts.append(est.projection_unconverged)
    assert counts[0] > 0 and counts[1] == 0


def test_the_run_log_says_how_many_projections_did_not_converge(monkeypatch, tmp_path, capsys):
    from cqb.cli import main

    _capped_estimator(monkeypatch, 1)
    out = tmp_path / "r.npz"
    assert main(["run", "--policy", "cqb_opt", "--seed", "2", "--horizon", "300", "--n-servers", "2", "--dim", "3",
                 "--set", "norm_bound=0.3", "--out", str(out)]) == 0
    metadata = load_run(out)["metadata"]
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert metadata["projection_unconverged"] > 0
    assert (f", {metadata['projection_unconverged']} of {metadata['projections']} projections not converged, "
            in last)
