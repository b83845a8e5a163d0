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
    """A stand-in for the draws and slack test that keeps the rows of the given
    masks in turn (of ``size`` rows of zeros)."""
    calls = iter(masks)

    def draw_accepted(rng, size, theta, threshold):
        return np.zeros((size, theta.shape[1]))[next(calls)(size)]

    return draw_accepted


def test_synthetic_instance_is_labelled_and_counts_its_theta_redraws(monkeypatch):
    reject = lambda n: np.zeros(n, bool)  # noqa: E731
    accept = lambda n: np.ones(n, bool)  # noqa: E731
    monkeypatch.setattr(instances, "_draw_accepted", _passes_by_call([reject, reject, accept]))
    instance = synthetic_instance(3, 2, 0.5, 0.1, np.random.default_rng(1))
    assert instance.kind == "synthetic"
    assert instance.description == {"theta_redraws": 2}
    assert instance.accept_rate == 1.0


def test_acceptance_exactly_at_the_minimum_rate_is_enough(monkeypatch):
    def exactly_100_of_20000(n):
        mask = np.zeros(n, bool)
        mask[:100] = True
        return mask

    monkeypatch.setattr(instances, "_draw_accepted", _passes_by_call([exactly_100_of_20000]))
    instance = synthetic_instance(3, 2, 0.5, 0.1, np.random.default_rng(1), min_accept_rate=0.005)
    assert instance.accept_rate == 0.005 and instance.description == {"theta_redraws": 0}


def test_unreachable_slack_says_so_after_the_last_redraw(monkeypatch):
    monkeypatch.setattr(instances, "_draw_accepted", lambda rng, size, theta, threshold: np.zeros((0, 2)))
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
    drawn = sample_contexts(instance, 3000, stream(seed, "contexts"))
    reference = _reference_contexts(instance.theta, 0.8, 3000, stream(seed, "contexts"), instance.accept_rate)
    assert drawn.tobytes() == reference.tobytes()


# ------------------------------------ the compiled draws and screen against numpy


def _numpy_accepted(raw, theta, threshold):
    """The slack test as the numpy reference decides it: unit rows, then _passes."""
    return instances._passes(raw / instances._row_norms(raw)[:, None], theta, threshold)


def _numpy_draw_accepted(rng, size, theta, threshold):
    """_draw_accepted as numpy does it: the raw draws of _unit_rows, then the reference test."""
    raw = rng.uniform(-1.0, 1.0, size=(size, theta.shape[1]))
    return raw[_numpy_accepted(raw, theta, threshold)]


# every synthetic instance the figures use: the base instance, the slack, K and
# d sweeps, and Figure 5's K = 9 instance (config/config.yaml)
FIGURE_INSTANCES = [(5, 5, 0.1), (5, 5, 0.05), (5, 5, 0.15), (3, 5, 0.1), (7, 5, 0.1), (9, 5, 0.1),
                    (5, 3, 0.1), (5, 10, 0.1), (5, 20, 0.1)]


@pytest.mark.parametrize("n_servers, dim, slack", FIGURE_INSTANCES)
@pytest.mark.parametrize("seed", [0, 1])
def test_compiled_screen_draws_the_instance_and_contexts_of_the_numpy_sampler(
        monkeypatch, n_servers, dim, slack, seed):
    """θ*, the acceptance rate and a run's contexts (T = 5000 at λ = 0.7) with the
    compiled draws and screen, bit for bit those of the numpy reference on the
    same streams, which are left at the same place."""
    screened = synthetic_instance(n_servers, dim, 0.7, slack, stream(seed, "instance"))
    with monkeypatch.context() as patch:
        patch.setattr(instances, "_draw_accepted", _numpy_draw_accepted)
        reference = synthetic_instance(n_servers, dim, 0.7, slack, stream(seed, "instance"))
    assert screened.theta.tobytes() == reference.theta.tobytes()
    assert screened.accept_rate == reference.accept_rate
    args = (screened.theta, 0.7 + slack, 3500)
    compiled_stream, numpy_stream = stream(seed, "contexts"), stream(seed, "contexts")
    compiled = instances._sample_accepted_contexts(*args, compiled_stream, screened.accept_rate)
    numpy_path = instances._sample_accepted_contexts(*args, numpy_stream, screened.accept_rate, screen=False)
    assert compiled.shape == (3500, dim) and compiled.tobytes() == numpy_path.tobytes()
    assert compiled_stream.random() == numpy_stream.random()


@pytest.mark.parametrize("slop", [0.0, 0.05])
def test_rows_the_screen_leaves_undecided_are_decided_by_numpy(monkeypatch, slop):
    """With the screen's band widened until a tenth of the rows are undecided
    (and at no slop at all), the kept rows are still numpy's, row for row."""
    monkeypatch.setattr(instances, "SCREEN_SLOP", slop)
    theta = np.random.default_rng(7).uniform(-1, 1, size=(5, 5))
    kept = instances._draw_accepted(np.random.default_rng(8), 200000, theta, 0.8)
    reference = _numpy_draw_accepted(np.random.default_rng(8), 200000, theta, 0.8)
    assert kept.shape[0] > 1000 and kept.tobytes() == reference.tobytes()


def _screen_codes(raw, theta, low, high):
    """draw_screened's codes, by numpy: the best score of each row over its norm against the two cuts."""
    best = (raw @ theta.T).max(axis=1) / np.linalg.norm(raw, axis=1)
    return np.where(best >= high, 1, np.where(best <= low, 0, 2))


@pytest.mark.parametrize("n_servers, dim, n_rows, low, high", [(5, 5, 30000, 0.3, 1.2), (1, 1, 500, 0.0, 0.01),
                                                               (9, 20, 4000, 0.6, 1.0), (3, 2, 0, 0.3, 0.5)])
def test_the_draws_are_the_generators_uniforms_and_their_codes_the_cuts(n_servers, dim, n_rows, low, high):
    """draw_screened's rows are rng.uniform(-1, 1)'s, in draw order, the rows
    coded 0 left out; the stream is left where numpy's draw leaves it. The
    cuts are wide enough that all three codes occur, and more rows are kept
    than its first allocation holds."""
    from cqb.sim.core import core

    theta = np.random.default_rng(dim).uniform(-1, 1, size=(n_servers, dim))
    rng, reference_rng = np.random.default_rng(11), np.random.default_rng(11)
    rows, codes = core().draw_screened(rng, n_rows, theta, low, high)
    raw = reference_rng.uniform(-1.0, 1.0, size=(n_rows, dim))
    expected = _screen_codes(raw, theta, low, high)
    assert rows.tobytes() == raw[expected > 0].tobytes()
    assert codes.dtype == np.uint8 and codes.tolist() == expected[expected > 0].tolist()
    assert rng.random() == reference_rng.random()
    if n_rows > 1000:
        assert {0, 1, 2} <= set(expected.tolist()) and rows.shape[0] > n_rows // 16 + 16


def _untemper(y: int) -> int:
    """The MT19937 state word whose tempered output is y: its four steps undone
    in reverse order (a shift-xor is undone by iterating it to its fixed point)."""
    y ^= y >> 18
    y ^= (y << 15) & 0xEFC60000
    x = y
    for _ in range(5):
        x = y ^ ((x << 7) & 0x9D2C5680)
    x &= 0xFFFFFFFF
    z = x
    for _ in range(3):
        z = x ^ (z >> 11)
    return z


def _ReplayGenerator(uniforms):
    """A numpy Generator whose next doubles are ``uniforms`` (each a multiple of
    2⁻⁵³): an MT19937 whose state words temper to the two 32-bit halves that
    its next_double combines, (a >> 5, b >> 6)."""
    words = []
    for u in uniforms:
        m = int(u * 2.0 ** 53)
        assert m / 2.0 ** 53 == u
        words += [_untemper((m >> 26) << 5), _untemper((m & (2 ** 26 - 1)) << 6)]
    key = np.zeros(624, dtype=np.uint32)
    key[:len(words)] = words
    bits = np.random.MT19937(0)
    bits.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": 0}}
    return np.random.Generator(bits)


def test_the_replay_generator_gives_its_uniforms():
    uniforms = [0.5, 0.0, 0.8125, 0.999755859375, 2.0 ** -53, 0.3125]
    assert _ReplayGenerator(uniforms).random(len(uniforms)).tolist() == uniforms


def test_screen_codes_rows_against_its_two_cuts():
    """Codes at the cuts exactly, and the best of K scores (not the first), on
    rows chosen by hand: a stand-in generator whose bit generator gives the
    uniforms of those rows."""
    from cqb.sim.core import core

    def codes_of(rows, theta, low, high):
        rows = np.asarray(rows, dtype=np.float64)
        uniforms = (rows.ravel() + 1.0) / 2.0  # exact for these values: −1 + 2u gives the rows back
        generator = _ReplayGenerator(uniforms)
        kept, codes = core().draw_screened(generator, rows.shape[0], theta, low, high)
        assert kept.tobytes() == rows[_screen_codes(rows, theta, low, high) > 0].tobytes()
        return codes.tolist()

    # rows of dyadic entries (−1 + 2u is exact), scaled 3-4-5 triangles: best scaled scores 0.8, 1, 0, −0.6
    triangle = [[0.375, 0.5], [0.5, 0.0], [0.0, -0.5], [-0.375, -0.5]]
    assert codes_of(triangle, np.eye(2), 0.5, 0.9) == [2, 1]
    assert codes_of(triangle, np.eye(2), 0.8, 0.9) == [1]  # 0.8 at the low cut exactly: rejected
    theta = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert codes_of([[0.5, 0.0], [0.375, 0.5]], theta, 0.5, 0.9) == [1, 2]  # the best of K, not the first
    assert codes_of([[0.5, 0.0], [0.375, 0.5]], theta, 0.5, 0.8) == [1, 1]  # at the high cut exactly: accepted
    assert codes_of([[0.5, 0.0], [0.0, -0.5]], theta, 0.0, 1.0) == [1]  # 0 at the low cut exactly: rejected
    with pytest.raises(ValueError, match="draw_screened"):
        core().draw_screened(np.random.default_rng(0), 3, np.ones(3), 0.5, 0.9)


def sample_contexts(instance, n, rng):
    """n arrivals' contexts from the instance's stream, one per round 1..n."""
    from cqb.sim.streams import draw_contexts

    return draw_contexts(instance, np.arange(1, n + 1), n, rng)[0]
