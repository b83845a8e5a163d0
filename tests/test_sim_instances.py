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
    """A stand-in for the slack test that returns the given masks in turn."""
    calls = iter(masks)
    return lambda batch, theta, threshold: next(calls)(batch.shape[0])


def test_synthetic_instance_is_labelled_and_counts_its_theta_redraws(monkeypatch):
    reject = lambda n: np.zeros(n, bool)  # noqa: E731
    accept = lambda n: np.ones(n, bool)  # noqa: E731
    monkeypatch.setattr(instances, "_passes", _passes_by_call([reject, reject, accept]))
    instance = synthetic_instance(3, 2, 0.5, 0.1, np.random.default_rng(1))
    assert instance.kind == "synthetic"
    assert instance.description == {"theta_redraws": 2}
    assert instance.accept_rate == 1.0


def test_acceptance_exactly_at_the_minimum_rate_is_enough(monkeypatch):
    def exactly_100_of_20000(n):
        mask = np.zeros(n, bool)
        mask[:100] = True
        return mask

    monkeypatch.setattr(instances, "_passes", _passes_by_call([exactly_100_of_20000]))
    instance = synthetic_instance(3, 2, 0.5, 0.1, np.random.default_rng(1), min_accept_rate=0.005)
    assert instance.accept_rate == 0.005 and instance.description == {"theta_redraws": 0}


def test_unreachable_slack_says_so_after_the_last_redraw(monkeypatch):
    monkeypatch.setattr(instances, "_passes", lambda batch, theta, threshold: np.zeros(batch.shape[0], bool))
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
