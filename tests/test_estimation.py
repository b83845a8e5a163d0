import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from cqb.estimation import (EstimatorConfig, LogisticEstimator, confidence_width, filippi_projection,
                            fit_logistic)


def _data(n=300, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    theta = rng.uniform(-1, 1, d) * 2
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ theta))).astype(float)
    return X, y


def _sklearn_mle(X, y, reg):
    # sklearn minimises C·Σ loss + ½‖θ‖², i.e. Σ loss + (1/(2C))‖θ‖²: C = 1/reg.
    model = LogisticRegression(C=1.0 / reg, fit_intercept=False, tol=1e-12, max_iter=10_000)
    return model.fit(X, y).coef_[0]


@pytest.mark.parametrize("reg", [0.1, 1.0, 5.0])
def test_mle_matches_sklearn(reg):
    X, y = _data()
    np.testing.assert_allclose(fit_logistic(X, y, reg), _sklearn_mle(X, y, reg), atol=1e-6)


def test_exact_refits_track_sklearn_every_round():
    X, y = _data(n=120, d=3, seed=1)
    est = LogisticEstimator(1, 3, 200, EstimatorConfig(reg=1.0, refit_growth=0.0, norm_bound=100.0,
                                                       newton_tol=1e-10))
    for i in range(X.shape[0]):
        est.update(0, X[i], y[i])
        if i in (5, 30, 119):
            np.testing.assert_allclose(est.mle[0], _sklearn_mle(X[:i + 1], y[:i + 1], 1.0), atol=1e-6)


def test_lazy_refits_stay_close_to_the_mle_and_are_exact_at_refits():
    X, y = _data(n=2000, d=5, seed=2)
    est = LogisticEstimator(1, 5, 2000, EstimatorConfig(reg=1.0, norm_bound=100.0, refit_growth=0.2))
    worst = 0.0
    for i in range(X.shape[0]):
        refit_due = i + 1 >= est.next_refit[0]
        est.update(0, X[i], y[i])
        if i % 97 == 0 or refit_due:
            exact = fit_logistic(X[:i + 1], y[:i + 1], 1.0)
            error = np.abs(est.mle[0] - exact).max()
            if refit_due:
                assert error < 1e-6
            worst = max(worst, error)
    assert worst < 0.05
    assert est.refits < 60  # geometric schedule, not a refit per sample


def test_sherman_morrison_inverse_matches_numpy():
    X, y = _data(n=500, d=6, seed=3)
    est = LogisticEstimator(2, 6, 500, EstimatorConfig(norm_bound=100.0, refit_growth=0.5))
    for i in range(X.shape[0]):
        est.update(i % 2, X[i], y[i])
    for k in range(2):
        np.testing.assert_allclose(est.design_inv[k], np.linalg.inv(est.design(k)), rtol=1e-9, atol=1e-12)
        assert np.array_equal(est.design_inv[k], est.design_inv[k].T)
        expected_design = 10.0 * np.eye(6) + X[k::2].T @ X[k::2]
        np.testing.assert_allclose(est.design(k), expected_design)


def test_plain_design_ridge():
    est = LogisticEstimator(1, 3, 10, EstimatorConfig(design_reg="plain", reg=2.0))
    np.testing.assert_allclose(est.design_inv[0], np.eye(3) / 2.0)


@pytest.mark.parametrize("projection", ["filippi", "euclidean"])
def test_projection_keeps_norm_bound_and_is_noop_inside(projection):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X @ np.array([5.0, 0, 0]) > 0).astype(float)
    bound = 1.0
    est = LogisticEstimator(1, 3, 60, EstimatorConfig(norm_bound=bound, projection=projection, reg=0.01))
    for i in range(60):
        est.update(0, X[i], y[i])
        assert np.linalg.norm(est.theta[0]) <= bound + 1e-9
    assert np.linalg.norm(est.mle[0]) > bound  # the projection was active
    assert est.projections > 0
    loose = LogisticEstimator(1, 3, 60, EstimatorConfig(norm_bound=1e6, projection=projection))
    for i in range(60):
        loose.update(0, X[i], y[i])
    np.testing.assert_array_equal(loose.theta[0], loose.mle[0])
    assert loose.projections == 0


def test_filippi_projection_improves_on_radial_start():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(80, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X @ np.array([6.0, -3.0, 0]) > 0).astype(float)
    mle = fit_logistic(X, y, 0.01)
    design_inv = np.linalg.inv(np.eye(3) + X.T @ X)
    bound = 1.5
    radial = mle * bound / np.linalg.norm(mle)
    projected = filippi_projection(X, mle, design_inv, 0.01, bound, radial)

    def objective(theta):
        residual = X.T @ (1 / (1 + np.exp(-X @ theta)) - 1 / (1 + np.exp(-X @ mle))) + 0.01 * (theta - mle)
        return residual @ design_inv @ residual

    assert np.linalg.norm(projected) <= bound + 1e-9
    assert objective(projected) <= objective(radial) + 1e-12


def test_separable_data_gives_finite_estimate():
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.9, 0.1], [-0.9, -0.1]])
    y = np.array([1.0, 0.0, 1.0, 0.0])
    theta = fit_logistic(X, y, 1.0)
    assert np.all(np.isfinite(theta))
    est = LogisticEstimator(1, 2, 4, EstimatorConfig(norm_bound=100.0))
    for i in range(4):
        est.update(0, X[i], y[i])
    assert np.all(np.isfinite(est.theta[0])) and est.theta[0][0] > 0


def test_confidence_width_formula():
    config = EstimatorConfig(reg=1.0, kappa=10.0, delta=0.001, norm_bound=2.0)
    n = 100
    expected = 5.0 * np.sqrt(2 * 3 * np.log(1 + n / 30.0) + np.log(4 / 0.001)) + 10.0 * 2.0 / 2
    assert confidence_width(config, 3, 4, n) == pytest.approx(expected)
    est = LogisticEstimator(4, 3, 200, config)
    for i in range(n):
        est.update(2, np.array([1.0, 0, 0]), float(i % 2))
    assert est.widths[2] == pytest.approx(expected)


@pytest.mark.parametrize("name,value", [("reg", -1.0), ("kappa", 0.0), ("delta", 1.5),
                                        ("projection", "sideways"), ("design_reg", "nope")])
def test_bad_config_names_the_value(name, value):
    with pytest.raises(ValueError, match=name):
        EstimatorConfig(**{name: value})
