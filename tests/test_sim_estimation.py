import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from cqb.sim.core import core
from cqb.sim.estimation import LogisticEstimator, check_estimator_params, filippi_projection
from reference_math import confidence_width, estimator_params, fit_logistic


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


def test_fit_logistic_warm_start_is_used():
    X, y = _data(n=200, d=3, seed=6)
    exact = fit_logistic(X, y, 1.0)
    # one Newton step from a start at the optimum stays there; from zero it does not
    np.testing.assert_allclose(fit_logistic(X, y, 1.0, theta0=exact, max_iter=1), exact, atol=1e-12)
    assert np.abs(fit_logistic(X, y, 1.0, max_iter=1) - exact).max() > 1e-4
    np.testing.assert_allclose(fit_logistic(X, y, 1.0, theta0=np.ones(3)), exact, atol=1e-8)


def test_exact_refits_track_sklearn_every_round():
    X, y = _data(n=120, d=3, seed=1)
    est = LogisticEstimator(1, 3, 200, estimator_params(reg=1.0, refit_growth=0.0, norm_bound=100.0,
                                                       newton_tol=1e-10))
    for i in range(X.shape[0]):
        est.update(0, X[i], y[i])
        if i in (5, 30, 119):
            np.testing.assert_allclose(est.mle[0], _sklearn_mle(X[:i + 1], y[:i + 1], 1.0), atol=1e-6)


def test_lazy_refits_stay_close_to_the_mle_and_are_exact_at_refits():
    X, y = _data(n=2000, d=5, seed=2)
    est = LogisticEstimator(1, 5, 2000, estimator_params(reg=1.0, norm_bound=100.0, refit_growth=0.2))
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
    est = LogisticEstimator(2, 6, 500, estimator_params(norm_bound=100.0, refit_growth=0.5))
    for i in range(X.shape[0]):
        est.update(i % 2, X[i], y[i])
    for k in range(2):
        np.testing.assert_allclose(est.design_inv[k], np.linalg.inv(est.design(k)), rtol=1e-9, atol=1e-12)
        assert np.array_equal(est.design_inv[k], est.design_inv[k].T)
        expected_design = 10.0 * np.eye(6) + X[k::2].T @ X[k::2]
        np.testing.assert_allclose(est.design(k), expected_design)


def test_plain_design_ridge():
    est = LogisticEstimator(1, 3, 10, estimator_params(design_reg="plain", reg=2.0))
    np.testing.assert_allclose(est.design_inv[0], np.eye(3) / 2.0)


@pytest.mark.parametrize("projection", ["filippi", "euclidean"])
def test_projection_keeps_norm_bound_and_is_noop_inside(projection):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X @ np.array([5.0, 0, 0]) > 0).astype(float)
    bound = 1.0
    est = LogisticEstimator(1, 3, 60, estimator_params(norm_bound=bound, projection=projection, reg=0.01))
    outside = 0
    for i in range(60):
        est.update(0, X[i], y[i])
        outside += np.linalg.norm(est.mle[0]) > bound
        assert np.linalg.norm(est.theta[0]) <= bound + 1e-9
    assert est.projections == outside > 0  # the diagnostic counts every active projection
    assert np.linalg.norm(est.mle[0]) > bound  # the projection was active
    radial = est.mle[0] * bound / np.linalg.norm(est.mle[0])
    if projection == "euclidean":
        np.testing.assert_allclose(est.theta[0], radial, rtol=1e-12)
    else:  # the Filippi point is not the radial one
        assert np.linalg.norm(est.theta[0] - radial) > 1e-3
    loose = LogisticEstimator(1, 3, 60, estimator_params(norm_bound=1e6, projection=projection))
    for i in range(60):
        loose.update(0, X[i], y[i])
    np.testing.assert_array_equal(loose.theta[0], loose.mle[0])
    assert loose.projections == 0


@pytest.mark.parametrize("seed", range(4))
def test_filippi_projection_lands_on_the_ball_at_a_kkt_point(seed):
    """With θ̂ outside the ball the minimiser sits on the sphere, where the
    objective's gradient points straight inward (∇f = −2νθ, ν > 0); the
    radial start is not such a point, so returning it fails."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(80, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X @ np.array([6.0, -3.0, 0]) + rng.normal(size=80) > 0).astype(float)
    mle = fit_logistic(X, y, 0.01)
    design_inv = np.linalg.inv(np.eye(3) + X.T @ X)
    bound = 1.5
    radial = mle * bound / np.linalg.norm(mle)

    def gradient(theta):
        prob = 1 / (1 + np.exp(-X @ theta))
        residual = X.T @ (prob - 1 / (1 + np.exp(-X @ mle))) + 0.01 * (theta - mle)
        jacobian = (X.T * (prob * (1 - prob))) @ X + 0.01 * np.eye(3)
        return 2 * jacobian @ design_inv @ residual

    def inward_cosine(theta):
        g = gradient(theta)
        return float(-(g @ theta) / (np.linalg.norm(g) * np.linalg.norm(theta)))

    projected = filippi_projection(X, mle, design_inv, 0.01, bound, radial).theta
    assert np.linalg.norm(projected) == pytest.approx(bound, rel=1e-9)
    assert inward_cosine(projected) > 1 - 1e-6
    assert inward_cosine(radial) < 1 - 1e-3  # the start is not already optimal


def test_separable_data_gives_finite_estimate():
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.9, 0.1], [-0.9, -0.1]])
    y = np.array([1.0, 0.0, 1.0, 0.0])
    theta = fit_logistic(X, y, 1.0)
    assert np.all(np.isfinite(theta))
    est = LogisticEstimator(1, 2, 4, estimator_params(norm_bound=100.0))
    for i in range(4):
        est.update(0, X[i], y[i])
    assert np.all(np.isfinite(est.theta[0])) and est.theta[0][0] > 0


@pytest.mark.parametrize("n_servers,dim,kappa,reg,delta,bound,n", [
    (4, 3, 10.0, 1.0, 0.001, 2.0, 100),
    (2, 5, 1.0, 0.5, 0.1, 1.0, 7),
    (6, 2, 3.0, 2.0, 1e-4, 3.5, 0),
    (3, 8, 20.0, 0.1, 0.02, 0.5, 1000),
])
def test_confidence_width_matches_spec_formula_across_configurations(n_servers, dim, kappa, reg, delta,
                                                                    bound, n):
    config = estimator_params(reg=reg, kappa=kappa, delta=delta, norm_bound=bound)
    expected = (kappa / 2 * np.sqrt(2 * dim * np.log(1 + n / (kappa * reg * dim)) + np.log(n_servers / delta))
                + kappa * bound * np.sqrt(reg) / 2)
    assert confidence_width(config, dim, n_servers, n) == pytest.approx(expected, rel=1e-12)
    est = LogisticEstimator(n_servers, dim, max(n, 1), config)
    x = np.eye(dim)[0]
    for i in range(n):
        est.update(n_servers - 1, x, float(i % 2))
    assert est.widths[n_servers - 1] == pytest.approx(expected, rel=1e-12)  # the core's, after every update
    assert est.widths[0] == pytest.approx(confidence_width(config, dim, n_servers, 0), rel=1e-12)


@pytest.mark.parametrize("name,value", [("reg", -1.0), ("kappa", 0.0), ("delta", 1.5), ("delta", 0.0), ("delta", 1.0),
                                        ("projection", "sideways"), ("design_reg", "nope"),
                                        ("refit_growth", -0.5), ("newton_max_iter", 0)])
def test_bad_config_names_the_value(name, value):
    with pytest.raises(ValueError, match=name):
        check_estimator_params(estimator_params(**{name: value}))
    with pytest.raises(ValueError, match=name):  # the factory checks before the core reads them
        LogisticEstimator(1, 2, 3, estimator_params(**{name: value}))


def test_config_messages_and_smallest_accepted_values():
    with pytest.raises(ValueError, match=r"^refit_growth must be a number ≥ 0, got -0.5$"):
        check_estimator_params(estimator_params(refit_growth=-0.5))
    with pytest.raises(ValueError, match=r"^newton_max_iter must be ≥ 1, got 0$"):
        check_estimator_params(estimator_params(newton_max_iter=0))
    check_estimator_params(estimator_params(newton_max_iter=1, refit_growth=0))


def test_fit_logistic_accepts_an_integer_warm_start():
    X, y = _data(n=100, d=3, seed=3)
    np.testing.assert_allclose(fit_logistic(X, y, 0.5, theta0=np.zeros(3, dtype=np.int64)),
                               fit_logistic(X, y, 0.5), atol=1e-12)


def test_kappa_design_ridge_is_kappa_times_reg():
    X, y = _data(n=30, d=3, seed=4)
    est = LogisticEstimator(1, 3, 30, estimator_params(reg=0.5, kappa=4.0))
    for i in range(30):
        est.update(0, X[i], y[i])
    np.testing.assert_allclose(est.design_inv[0], np.linalg.inv(2.0 * np.eye(3) + X.T @ X), rtol=1e-10)


def test_refits_follow_the_geometric_schedule():
    """Every sample below refit_min_samples (10), then at n + ⌈0.2 n⌉: 12, 15, 18, 22."""
    X, y = _data(n=22, d=3, seed=5)
    est = LogisticEstimator(1, 3, 22, estimator_params())
    refitted_at = []
    for i in range(22):
        before = est.refits
        est.update(0, X[i], y[i])
        if est.refits == before + 1:
            refitted_at.append(i + 1)
        assert est.refits == len(refitted_at)
    assert refitted_at == list(range(1, 11)) + [12, 15, 18, 22]


def test_lazy_update_is_one_newton_step_with_the_hessian_of_the_last_refit_plus_the_new_sample():
    X, y = _data(n=13, d=3, seed=6)
    config = estimator_params(reg=0.7, norm_bound=100.0)
    est = LogisticEstimator(1, 3, 13, config)
    for i in range(12):
        est.update(0, X[i], y[i])
    assert est.next_refit[0] == 15  # sample 13 is a lazy one
    theta = est.mle[0].copy()
    prob = 1 / (1 + np.exp(-X[:12] @ theta))
    hessian = (X[:12].T * (prob * (1 - prob))) @ X[:12] + 0.7 * np.eye(3)
    p13 = 1 / (1 + np.exp(-X[12] @ theta))
    hessian += p13 * (1 - p13) * np.outer(X[12], X[12])
    est.update(0, X[12], y[12])
    np.testing.assert_allclose(est.inverses[0, 1], np.linalg.inv(hessian), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.mle[0], theta - (p13 - y[12]) * np.linalg.solve(hessian, X[12]), rtol=1e-9)
    np.testing.assert_allclose(est.design_inv[0], np.linalg.inv(10 * 0.7 * np.eye(3) + X.T @ X), rtol=1e-9)


def test_a_saturated_sample_updates_the_design_and_keeps_the_hessian():
    """μ(xᵀθ̂) rounds to 1 (μ̇ = 0): V⁻¹ takes the sample, H⁻¹ is unchanged, θ̂ steps by (μ − y)H⁻¹x."""
    X, y = _data(n=12, d=3, seed=7)
    est = LogisticEstimator(1, 3, 13, estimator_params(norm_bound=1e6))
    for i in range(12):
        est.update(0, X[i], y[i])
    est.mle[0] = np.array([80.0, 0.0, 0.0])  # as if the data had been separable
    hessian_inv = est.inverses[0, 1].copy()
    x = np.array([1.0, 0.0, 0.0])
    est.update(0, x, 0.0)
    np.testing.assert_array_equal(est.inverses[0, 1], hessian_inv)
    np.testing.assert_allclose(est.mle[0], np.array([80.0, 0, 0]) - hessian_inv @ x, rtol=1e-12)
    design = 10 * np.eye(3) + X.T @ X + np.outer(x, x)
    np.testing.assert_allclose(est.design_inv[0], np.linalg.inv(design), rtol=1e-9)


# ------------------------------------------------------- Filippi's projection against SLSQP


def _slsqp_problem(seed):
    """A projection problem like the runs' (Filippi's objective on n samples of
    dimension d = 2–120, θ̂ the regularised MLE, V = XᵀX + 10λ₀I), with the
    ball's radius S between 0.2 and 1.3 times ‖θ̂‖: θ̂ inside about a quarter
    of the time."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 121))
    n = int(rng.integers(d + 2, 3 * d + 40))
    X = rng.standard_normal((n, d)) / np.sqrt(d) * rng.uniform(0.5, 3)
    theta_true = rng.standard_normal(d) * rng.uniform(0.5, 4) / np.sqrt(d) * 3
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ theta_true))).astype(float)
    reg = 1.0
    mle = fit_logistic(X, y, reg, tol=1e-12)
    design_inv = np.linalg.inv(X.T @ X + 10 * reg * np.eye(d))
    bound = float(np.linalg.norm(mle)) * rng.uniform(0.2, 1.3)
    return X, mle, design_inv, reg, bound


def _filippi_value_and_gradient(X, mle, design_inv, reg):
    """f(θ) = ‖g(θ) − g(θ̂)‖²_{V⁻¹}, g(θ) = Σ μ(xᵢᵀθ)xᵢ + λ₀θ, and ∇f = 2 J V⁻¹ r;
    also the scale of g (for a relative gradient)."""
    mu = lambda z: 0.5 * (1 + np.tanh(0.5 * z))  # noqa: E731
    target = X.T @ mu(X @ mle) + reg * mle

    def value_and_gradient(theta):
        prob = mu(X @ theta)
        residual = X.T @ prob + reg * theta - target
        weighted = design_inv @ residual
        jacobian = (X.T * (prob * (1 - prob))) @ X + reg * np.eye(X.shape[1])
        return float(residual @ weighted), 2 * jacobian @ weighted, jacobian

    return value_and_gradient, float(np.linalg.norm(target))


def _slsqp(value_and_gradient, start, bound, max_iter=500):
    from scipy.optimize import minimize

    result = minimize(lambda th: value_and_gradient(th)[:2], start, jac=True, method="SLSQP",
                      constraints=[{"type": "ineq", "fun": lambda th: bound ** 2 - th @ th,
                                    "jac": lambda th: -2.0 * th}],
                      options={"maxiter": max_iter, "ftol": 1e-15})
    return result.x * min(1.0, bound / np.linalg.norm(result.x))  # SLSQP may end a hair outside


# The objective at an inside θ̂ is rounding (≤ 1e-28 here, SLSQP's often 0), on
# the sphere ≥ 1e-4: relative gaps are taken against this floor at least (a
# projection that moved an inside θ̂ by 1e-14 would exceed 1e-9 of it).
OBJECTIVE_FLOOR = 1e-18


def _compare_with_slsqp(seed):
    """(relative objective gap to SLSQP's, KKT residual, on the sphere?) of one problem."""
    X, mle, design_inv, reg, bound = _slsqp_problem(seed)
    start = mle * min(1.0, bound / np.linalg.norm(mle))  # radial, as the estimator starts it
    value_and_gradient, scale = _filippi_value_and_gradient(X, mle, design_inv, reg)
    ours = filippi_projection(X, mle, design_inv, reg, bound, start).theta
    assert np.linalg.norm(ours) <= bound * (1 + 1e-12)
    value, gradient, jacobian = value_and_gradient(ours)
    reference = value_and_gradient(_slsqp(value_and_gradient, start, bound))[0]
    gap = (value - reference) / max(abs(reference), OBJECTIVE_FLOOR)
    norm = np.linalg.norm(ours)
    if norm < bound * (1 - 1e-10):  # inside: ∇f = 0, relative to the size of its terms
        kkt = np.linalg.norm(gradient) / (2 * np.linalg.norm(jacobian, 2) * np.linalg.norm(design_inv, 2) * scale)
        return gap, kkt, False
    # on the sphere: ∇f + 2νθ = 0 with ν ≥ 0, relative to ‖∇f‖
    nu = -(gradient @ ours) / (2 * bound ** 2)
    assert nu >= -1e-12 * np.linalg.norm(gradient) / bound, f"seed {seed}: multiplier {nu} < 0"
    kkt = np.linalg.norm(gradient + 2 * max(nu, 0.0) * ours) / np.linalg.norm(gradient)
    return gap, kkt, True


@pytest.mark.parametrize("chunk", range(4))
def test_filippi_projection_is_at_least_as_good_as_slsqp_and_a_kkt_point(chunk):
    """240 random problems (60 per chunk), d = 2–120, θ̂ inside and outside the
    ball: the objective within 1e-9 (relative) of SciPy's SLSQP at ftol 1e-15,
    or lower; the KKT conditions to the solver's tolerance (numpy's residual
    within twice PROJECTION_KKT_TOL). From a start away from the optimum and
    with S/‖θ̂‖ near 1: tests/test_sim_projection.py."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):  # SLSQP at d = 120 is 10× slower threaded here
        results = [_compare_with_slsqp(seed) for seed in range(60 * chunk, 60 * (chunk + 1))]
    gaps, residuals, on_sphere = map(np.array, zip(*results))
    worst = int(np.argmax(gaps))
    assert gaps.max() <= 1e-9, f"seed {60 * chunk + worst}: objective {gaps.max():.3g} above SLSQP's (relative)"
    worst = int(np.argmax(residuals))
    assert residuals.max() <= 2 * core().PROJECTION_KKT_TOL, f"seed {60 * chunk + worst}: KKT residual {residuals.max():.3g}"
    assert 5 <= (~on_sphere).sum() and on_sphere.sum() >= 30  # both cases, in every chunk
