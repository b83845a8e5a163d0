"""Instance construction at its boundaries: the checks' bounds, the labels and
diagnostics a synthetic instance records, the acceptance threshold, and the
seed-0 base instance pinned (the instance stream must not move silently)."""

import hashlib

import numpy as np
import pytest

import cqb.sim.instances as instances
from cqb.sim.instances import check_arrival_rate, check_positive_int, synthetic_instance
from cqb.sim.rng import stream


@pytest.mark.parametrize("rate", [0, 0.0, 1.0, -0.1, "0.5"])
def test_arrival_rate_outside_the_open_unit_interval_is_refused(rate):
    with pytest.raises(ValueError, match=r"arrival_rate must lie in \(0, 1\), got"):
        check_arrival_rate(rate)


@pytest.mark.parametrize("value", [2.5, 3.0, True, 0, -2, "3"])
def test_sizes_must_be_positive_integers_not_floats_or_bools(value):
    with pytest.raises(ValueError, match="n_servers must be a positive integer"):
        check_positive_int("n_servers", value)


def test_numpy_integers_and_small_rates_are_accepted():
    check_positive_int("dim", np.int64(3))
    check_arrival_rate(1e-9)


def _passes_by_call(masks):
    """A stand-in for the slack test (on raw draws) that returns the given masks in turn."""
    calls = iter(masks)
    return lambda batch, theta, threshold: next(calls)(batch.shape[0])


def test_synthetic_instance_is_labelled_and_counts_its_theta_redraws(monkeypatch):
    reject = lambda n: np.zeros(n, bool)  # noqa: E731
    accept = lambda n: np.ones(n, bool)  # noqa: E731
    monkeypatch.setattr(instances, "_accepted", _passes_by_call([reject, reject, accept]))
    instance = synthetic_instance(3, 2, 0.5, 0.1, np.random.default_rng(1))
    assert instance.kind == "synthetic"
    assert instance.description == {"theta_redraws": 2}
    assert instance.accept_rate == 1.0


def test_acceptance_exactly_at_the_minimum_rate_is_enough(monkeypatch):
    def exactly_100_of_20000(n):
        mask = np.zeros(n, bool)
        mask[:100] = True
        return mask

    monkeypatch.setattr(instances, "_accepted", _passes_by_call([exactly_100_of_20000]))
    instance = synthetic_instance(3, 2, 0.5, 0.1, np.random.default_rng(1), min_accept_rate=0.005)
    assert instance.accept_rate == 0.005 and instance.description == {"theta_redraws": 0}


def test_unreachable_slack_says_so_after_the_last_redraw(monkeypatch):
    monkeypatch.setattr(instances, "_accepted", lambda batch, theta, threshold: np.zeros(batch.shape[0], bool))
    with pytest.raises(ValueError, match=r"in 3 draws .*: the slack cannot be met with unit-norm contexts$"):
        synthetic_instance(3, 2, 0.5, 0.1, np.random.default_rng(1), max_redraws=3)


def test_base_instance_of_seed_0_is_the_published_one():
    """θ* and the acceptance probe (20,000 draws) of the base instance at seed 0:
    a change to either shifts every synthetic result."""
    instance = synthetic_instance(5, 5, 0.7, 0.1, stream(0, "instance"))
    assert hashlib.sha256(instance.theta.tobytes()).hexdigest()[:16] == "1fe0554c8a81ba90"
    assert instance.accept_rate == 0.04195
    assert instance.description == {"theta_redraws": 0}


@pytest.mark.parametrize("columns", range(1, 13))
def test_row_max_and_row_norms_are_numpys_to_the_bit(columns):
    """The rejection sampler's column-wise row maximum and row norm against
    numpy's reductions, on draws like the sampler's plus ties, zeros and
    rounded values (a sum in another order differs in the last bit on about
    a third of the rows)."""
    rng = np.random.default_rng(columns)
    matrix = rng.uniform(-1.0, 1.0, size=(200_000, columns))
    matrix[::5] = np.round(matrix[::5], 1)
    matrix[3] = 0.0
    np.testing.assert_array_equal(instances._row_max(matrix), matrix.max(axis=1))
    assert instances._row_norms(matrix).tobytes() == np.linalg.norm(matrix, axis=1).tobytes()


def _reference_contexts(theta, threshold, n, rng, accept_rate):
    """The sampler as first written (numpy's reductions throughout): batches
    of U(−1, 1)^d scaled to norm 1, kept where max_k μ(xᵀθ*_k) ≥ threshold."""
    from cqb.sim.estimation import logistic

    dim, chunks, have = theta.shape[1], [], 0
    rate = max(accept_rate or 0.01, 1e-4)
    while have < n:
        raw = rng.uniform(-1.0, 1.0, size=(int(np.ceil((n - have) / rate * 1.2)) + 64, dim))
        batch = raw / np.linalg.norm(raw, axis=1, keepdims=True)
        kept = batch[logistic(batch @ theta.T).max(axis=1) >= threshold]
        chunks.append(kept)
        have += kept.shape[0]
    return np.concatenate(chunks)[:n]


@pytest.mark.parametrize("n_servers, dim, seed", [(5, 5, 0), (5, 5, 1), (3, 5, 2), (9, 5, 3), (5, 3, 4),
                                                  (5, 10, 5), (5, 20, 6)])
def test_the_sampled_contexts_are_those_of_the_plain_numpy_sampler(n_servers, dim, seed):
    """The instances of the figures (K and d as in Figures 2, 4 and 5): the
    contexts a run gets, bit for bit, from the sampler as first written."""
    instance = synthetic_instance(n_servers, dim, 0.7, 0.1, stream(seed, "instance"))
    drawn = instance.sample_contexts(3000, stream(seed, "contexts"))
    reference = _reference_contexts(instance.theta, 0.8, 3000, stream(seed, "contexts"), instance.accept_rate)
    assert drawn.tobytes() == reference.tobytes()


# ------------------------------------ the compiled acceptance screen against numpy


def _numpy_accepted(raw, theta, threshold):
    """The slack test as the numpy reference decides it: unit rows, then _passes."""
    return instances._passes(raw / instances._row_norms(raw)[:, None], theta, threshold)


# every synthetic instance the figures use: the base instance, the slack, K and
# d sweeps, and Figure 5's K = 9 instance (config/config.yaml)
FIGURE_INSTANCES = [(5, 5, 0.1), (5, 5, 0.05), (5, 5, 0.15), (3, 5, 0.1), (7, 5, 0.1), (9, 5, 0.1),
                    (5, 3, 0.1), (5, 10, 0.1), (5, 20, 0.1)]


@pytest.mark.parametrize("n_servers, dim, slack", FIGURE_INSTANCES)
@pytest.mark.parametrize("seed", [0, 1])
def test_compiled_screen_draws_the_instance_and_contexts_of_the_numpy_sampler(
        monkeypatch, n_servers, dim, slack, seed):
    """θ*, the acceptance rate and a run's contexts (T = 5000 at λ = 0.7) with the
    compiled screen, bit for bit those of the numpy reference on the same streams."""
    screened = synthetic_instance(n_servers, dim, 0.7, slack, stream(seed, "instance"))
    with monkeypatch.context() as patch:
        patch.setattr(instances, "_accepted", _numpy_accepted)
        reference = synthetic_instance(n_servers, dim, 0.7, slack, stream(seed, "instance"))
    assert screened.theta.tobytes() == reference.theta.tobytes()
    assert screened.accept_rate == reference.accept_rate
    args = (screened.theta, 0.7 + slack, 3500)
    compiled = instances._sample_accepted_contexts(*args, stream(seed, "contexts"), screened.accept_rate)
    numpy_path = instances._sample_accepted_contexts(*args, stream(seed, "contexts"), screened.accept_rate,
                                                     screen=False)
    assert compiled.shape == (3500, dim) and compiled.tobytes() == numpy_path.tobytes()


@pytest.mark.parametrize("slop", [0.0, 0.05])
def test_rows_the_screen_leaves_undecided_are_decided_by_numpy(monkeypatch, slop):
    """With the screen's band widened until a tenth of the rows are undecided
    (and at no slop at all), the mask is still numpy's row for row."""
    monkeypatch.setattr(instances, "SCREEN_SLOP", slop)
    rng = np.random.default_rng(7)
    theta = rng.uniform(-1, 1, size=(5, 5))
    raw = rng.uniform(-1, 1, size=(200000, 5))
    accepted = instances._accepted(raw, theta, 0.8)
    assert accepted.any() and np.array_equal(accepted, _numpy_accepted(raw, theta, 0.8))


def test_screen_codes_rows_against_its_two_cuts():
    from cqb.sim.core import core

    raw = np.array([[3.0, 4.0], [1.0, 0.0], [0.0, -2.0], [-3.0, -4.0]])  # best scaled scores 0.8, 1, 0, −0.6
    codes = np.empty(4, dtype=np.uint8)
    assert core().screen_contexts(raw, np.eye(2), 0.5, 0.9, codes) == 1
    assert codes.tolist() == [2, 1, 0, 0]
    # the best of K scores (not the first), at each cut exactly
    theta = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert core().screen_contexts(np.array([[1.0, 0.0], [0.6, 0.8]]), theta, 0.5, 0.9, codes[:2]) == 1
    assert codes[:2].tolist() == [1, 2]
    assert core().screen_contexts(np.array([[2.0, 0.0], [0.0, -1.0]]), theta, 0.0, 1.0, codes[:2]) == 1
    assert codes[:2].tolist() == [1, 0]
    with pytest.raises(ValueError, match="screen_contexts"):
        core().screen_contexts(raw, np.eye(3), 0.5, 0.9, codes)
