"""The compiled kernel (cqb/sim/_kernel.c) against the numpy reference, every round.

Two copies of a policy, one per kernel, are driven by the same decisions (the
numpy copy's) on the same trace; after every update their whole state —
samples, MLE, projected θ, V⁻¹ and H⁻¹, β, the refit schedule, the cached
scores of the queued jobs, the refit and projection counts — must agree to
rounding, and the compiled copy must choose the same pair whenever the best
index beats the runner-up by more than rounding.
"""

import importlib

import numpy as np
import pytest

import cqb.sim.estimation as estimation
from cqb.sim.estimation import EstimatorConfig, LogisticEstimator
from cqb.sim.instances import instance_from_spec, pool_instance
from cqb.policies import make_policy
from cqb.sim.rng import stream
from cqb.sim.simulate import draw_trace, play, policy_env

SYNTHETIC = {"kind": "synthetic", "n_servers": 3, "dim": 5, "arrival_rate": 0.7, "slack": 0.15}


def sparse_pool(seed, dim=9, n_servers=3):
    """One-hot-like contexts (mostly zeros, like the Coupon features); d = 9 is not a
    multiple of the kernel's four partial sums."""
    rng = np.random.default_rng(seed)
    contexts = (rng.random((300, dim)) < 0.3).astype(float)
    contexts[:, 0] = 1.0
    contexts /= np.linalg.norm(contexts, axis=1).max()
    return pool_instance(rng.normal(size=(n_servers, dim)) * 2, contexts, 0.6)


CASES = [
    # (policy, params, instance, horizon, seed): every branch of the kernel is hit by some case
    ("cqb_opt", {"bonus_scale": 0.3}, SYNTHETIC, 500, 1),
    ("cqb_opt", {"norm_bound": 0.6}, SYNTHETIC, 400, 2),  # Filippi projections
    ("cqb_opt", {"norm_bound": 0.6, "projection": "euclidean"}, SYNTHETIC, 400, 3),
    ("cqb_opt", {"norm_bound_kind": "per_server"}, SYNTHETIC, 400, 4),
    ("cqb_opt", {"refit_growth": 0.0, "design_reg": "plain"}, SYNTHETIC, 300, 5),  # refit every sample
    ("cqb_opt", {"refit_min_samples": 3, "refit_growth": 1.0, "newton_max_iter": 2}, SYNTHETIC, 400, 6),
    ("cqb_eps", {"tau": 150, "explore_prob": 0.3}, SYNTHETIC, 500, 7),  # explored newcomers
    ("cqb_eta2", {"tau": 80, "eta": 0.3, "cutoff": 300}, SYNTHETIC, 400, 8),
    ("cqb_ts", {"bonus_scale": 0.3}, SYNTHETIC, 400, 9),
    ("cqb_ts", {"ts_mode": "parameter", "bonus_scale": 0.3}, SYNTHETIC, 300, 10),
    ("cqb_opt", {"bonus_scale": 0.3}, "sparse", 500, 11),
    ("cqb_eps_opt", {"explore_prob": 0.4}, "sparse", 400, 12),
]


def build(case):
    name, params, spec, horizon, seed = case
    instance = sparse_pool(seed) if spec == "sparse" else instance_from_spec(spec, stream(seed, "instance"))
    trace = draw_trace(instance, horizon, seed)
    env = policy_env(instance, horizon)
    policies = [make_policy(name, env, trace.contexts, stream(seed, "policy"), {**params, "kernel": kernel},
                            trace.true_means)[0] for kernel in ("numpy", "compiled")]
    return trace, policies


def assert_same_state(reference, compiled, queue, where):
    a, b = reference.scorer.estimator, compiled.scorer.estimator
    for field in ("counts", "next_refit"):
        np.testing.assert_array_equal(getattr(b, field), getattr(a, field), err_msg=f"{field} {where}")
    assert (b.refits, b.projections) == (a.refits, a.projections), where
    for field in ("features", "outcomes", "widths"):
        np.testing.assert_array_equal(getattr(b, field), getattr(a, field), err_msg=f"{field} {where}")
    scale = np.abs(a.inverses).max(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(b.inverses / scale, a.inverses / scale, rtol=0, atol=1e-11,
                               err_msg=f"V⁻¹ or H⁻¹ {where}")
    np.testing.assert_allclose(b.mle, a.mle, rtol=0, atol=1e-9, err_msg=f"MLE {where}")
    # A projected θ (and the scores made from it) agree to SLSQP's tolerance, not to
    # rounding: SLSQP turns a 1e-16 change of its input (even numpy's BLAS thread
    # count) into up to ~1e-7. Unprojected, θ is the MLE, checked to 1e-9 above.
    np.testing.assert_allclose(b.theta, a.theta, rtol=0, atol=1e-6, err_msg=f"θ {where}")
    if len(queue):
        reference.scorer.refresh(queue)
        compiled.scorer.refresh(queue)
        for field in ("means", "bonuses", "ucb"):
            np.testing.assert_allclose(getattr(compiled.scorer, field)[queue], getattr(reference.scorer, field)[queue],
                                       rtol=0, atol=1e-6, err_msg=f"{field} {where}")


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case[0]}-{case[4]}")
def test_compiled_kernel_matches_numpy_every_round(case):
    trace, (reference, compiled) = build(case)
    arrivals, service, true_means = trace.arrivals, trace.service_uniforms, trace.true_means
    queue, next_id, compared, clear = [], 0, 0, 0
    for t in range(1, len(arrivals) + 1):
        if queue:
            waiting = np.array(queue, dtype=np.int64)
            new_arrival = t >= 2 and bool(arrivals[t - 2])
            expected = reference.choose(t, waiting, new_arrival)
            got = compiled.choose(t, waiting, new_arrival)
            assert got[2] == expected[2], f"round {t}: exploration differs"
            scores = np.sort(reference.scorer.ucb[waiting].ravel())[::-1]
            if not expected[2] and case[0] != "cqb_ts" and (len(scores) == 1 or scores[0] - scores[1] > 1e-9):
                assert got[:2] == expected[:2], f"round {t}: chose {got[:2]}, numpy {expected[:2]}"
                clear += 1
            position, server = expected[:2]
            job = queue[position]
            success = bool(service[t - 1] <= true_means[job, server])
            reference.observe(t, job, server, success)
            compiled.observe(t, job, server, success)
            assert_same_state(reference, compiled, waiting, f"after round {t}")
            compared += 1
            if success:
                queue.pop(position)
        if arrivals[t - 1]:
            queue.append(next_id)
            next_id += 1
    assert compared > 200
    estimator = reference.scorer.estimator
    assert estimator.refits >= 8
    if case[1].get("norm_bound") == 0.6:
        assert estimator.projections > 20  # the projection branch really ran
    if case[0] not in ("cqb_ts", "cqb_eps", "cqb_eta2", "cqb_eps_opt"):
        assert clear > 100


def test_estimator_update_matches_numpy_on_any_samples():
    """The bare estimator (no scorer): non-contiguous and list inputs, huge contexts
    whose μ̇ rounds to 0 (the Sherman–Morrison branch without H), refits every sample
    at first, per-server bounds."""
    rng = np.random.default_rng(0)
    config = dict(norm_bound=(0.8, 50.0), refit_min_samples=4, refit_growth=0.5)
    reference = LogisticEstimator(2, 6, 200, EstimatorConfig(**config, kernel="numpy"))
    compiled = LogisticEstimator(2, 6, 200, EstimatorConfig(**config, kernel="compiled"))
    block = rng.normal(size=(200, 12))
    for i in range(200):
        server = int(rng.integers(2))
        x = block[i, ::2] * (40.0 if i % 17 == 5 else 0.5)  # a strided view; sometimes huge
        outcome = float(rng.random() < 0.5)
        reference.update(server, x, outcome)
        compiled.update(server, list(x) if i % 3 == 0 else x, outcome)
        np.testing.assert_array_equal(compiled.features, reference.features)
        np.testing.assert_array_equal(compiled.widths, reference.widths)
        np.testing.assert_array_equal(compiled.next_refit, reference.next_refit)
        np.testing.assert_allclose(compiled.inverses, reference.inverses, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(compiled.mle, reference.mle, rtol=1e-10, atol=1e-12)
        # SLSQP's tolerance, not the kernel's rounding, bounds the projected θ
        np.testing.assert_allclose(compiled.theta, reference.theta, rtol=1e-6, atol=1e-6)
    assert (compiled.refits, compiled.projections) == (reference.refits, reference.projections)
    assert reference.projections > 10  # S_1 = 0.8 is active
    assert reference.refits > 20


def test_compiled_inverses_are_exactly_symmetric_after_refits_and_rank_one_updates():
    rng = np.random.default_rng(1)
    est = LogisticEstimator(1, 7, 300, EstimatorConfig(kernel="compiled"))
    for _ in range(300):
        est.update(0, rng.normal(size=7), float(rng.random() < 0.3))
        np.testing.assert_array_equal(est.inverses[0, 0], est.inverses[0, 0].T)
        np.testing.assert_array_equal(est.inverses[0, 1], est.inverses[0, 1].T)
    np.testing.assert_allclose(est.inverses[0, 0] @ est.design(0), np.eye(7), atol=1e-9)


def choose_on(contexts, kernel, queue):
    """A CQB-Opt decision before any sample: θ = 0 and V⁻¹ = I/(κλ₀) for every server."""
    instance = pool_instance(np.ones((3, contexts.shape[1])), contexts, 0.5)
    policy, _ = make_policy("cqb_opt", policy_env(instance, 10), contexts, stream(0, "policy"),
                            {"kernel": kernel})
    return policy.choose(1, np.asarray(queue, dtype=np.int64), False)


@pytest.mark.parametrize("kernel", ["numpy", "compiled"])
def test_exact_ties_go_to_the_earliest_job_then_the_lowest_server(kernel):
    contexts = np.tile([0.3, 0.4], (5, 1))  # identical jobs: every (job, server) ties
    assert choose_on(contexts, kernel, [1, 3, 4]) == (0, 0, False)
    contexts[3] = [0.4, 0.3]  # the same norm, so the same index: still one tie
    assert choose_on(contexts, kernel, [1, 3, 4]) == (0, 0, False)
    contexts[4] = [0.6, 0.8]  # longer: a larger bonus on every server
    assert choose_on(contexts, kernel, [1, 3, 4]) == (2, 0, False)


@pytest.mark.parametrize("kernel", ["numpy", "compiled"])
def test_a_nan_index_wins_the_argmax_as_in_numpy(kernel):
    contexts = np.tile([0.3, 0.4], (5, 1))
    contexts[3] = [np.nan, 0.5]
    assert choose_on(contexts, kernel, [1, 3, 4]) == (1, 0, False)


def test_same_seed_same_run_and_kernels_agree_on_a_whole_run():
    spec = {"kind": "synthetic", "n_servers": 4, "dim": 3, "arrival_rate": 0.6, "slack": 0.1}
    instance = instance_from_spec(spec, stream(4, "instance"))
    trace = draw_trace(instance, 1500, 4)
    first, _ = play(instance, trace, "cqb_opt", None, 4)
    again, _ = play(instance, trace, "cqb_opt", None, 4)
    reference, _ = play(instance, trace, "cqb_opt", {"kernel": "numpy"}, 4)
    for field in ("queue", "gap", "explored", "departures"):
        np.testing.assert_array_equal(getattr(again, field), getattr(first, field))
    # no exact ties on this seed: the two kernels take every decision alike
    np.testing.assert_array_equal(first.queue, reference.queue)
    np.testing.assert_allclose(first.gap, reference.gap, rtol=0, atol=1e-12)


def test_bad_inputs_get_one_clear_error():
    est = LogisticEstimator(2, 3, 2, EstimatorConfig())
    with pytest.raises(ValueError, match="3 contiguous float64"):
        est.core.update(0, np.zeros(4), 1.0)
    with pytest.raises(IndexError, match="server 2 out of range"):
        est.update(2, np.zeros(3), 1.0)
    est.update(0, np.ones(3), 1.0)
    est.update(0, np.ones(3), 0.0)
    with pytest.raises(IndexError, match="room for 2 samples"):
        est.update(0, np.ones(3), 1.0)
    with pytest.raises(ValueError, match="kernel must be one of"):
        EstimatorConfig(kernel="fortran")
    contexts = np.full((4, 3), 0.5)
    policy, _ = make_policy("cqb_opt", policy_env(pool_instance(np.ones((2, 3)), contexts, 0.5), 4),
                            contexts, stream(0, "policy"))
    with pytest.raises(TypeError, match="int64"):
        policy.choose(1, np.array([0, 1], dtype=np.int32), False)
    with pytest.raises(IndexError, match="arrival id 4 out of range"):
        policy.choose(1, np.array([0, 4]), False)


def test_a_stale_build_is_refused(monkeypatch):
    kernel = importlib.import_module("cqb.sim._kernel")
    monkeypatch.setattr(estimation, "_KERNEL", None)
    monkeypatch.setattr(kernel, "SOURCE_HASH", "0" * 64)
    with pytest.raises(ImportError, match="built from another version"):
        LogisticEstimator(1, 2, 3, EstimatorConfig())
    monkeypatch.setattr(estimation, "_KERNEL", None)
    monkeypatch.undo()
    assert LogisticEstimator(1, 2, 3, EstimatorConfig()).core is not None


def test_kernel_flags_match_the_python_side():
    kernel = importlib.import_module("cqb.sim._kernel")
    assert (kernel.REFITTED, kernel.OUTSIDE_BALL) == (estimation._REFITTED, estimation._OUTSIDE_BALL)


def test_benchmark_times_both_kernels_side_by_side():
    from cqb.bench.benchmark import BASE, coupon_sized_instance, seeds_table, time_policy

    instance = instance_from_spec(BASE, stream(0, "instance"))
    trace = draw_trace(instance, 300, 0)
    seconds, runs = time_policy(instance, trace, "cqb_opt", None, 1)
    assert set(seconds) == {"numpy", "compiled"} and all(value > 0 for value in seconds.values())
    assert runs["numpy"].queue.shape == runs["compiled"].queue.shape == (300,)
    seconds, runs = time_policy(instance, trace, "q_ucb", None, 1)
    assert set(seconds) == {None}
    rows = seeds_table(1, seeds=range(2), horizon=300)
    assert rows[0].startswith("### CQB-Opt at the base instance, seeds 0–1 (T=300; defaults)")
    assert [row.split(" | ")[0] for row in rows[4:7]] == ["| 0", "| 1", "| all"]
    coupon = coupon_sized_instance(0)
    assert coupon.dim == 120 and coupon.n_servers == 2
    assert coupon.service_probabilities(coupon.sample_contexts(500, np.random.default_rng(0))).max(axis=1).mean() > 0.4


@pytest.mark.parametrize("kernel", ["numpy", "compiled"])
def test_both_kernels_report_how_far_rows_are_scored(kernel):
    contexts = np.full((6, 3), 0.5)
    policy, _ = make_policy("cqb_opt", policy_env(pool_instance(np.ones((2, 3)), contexts, 0.5), 6),
                            contexts, stream(0, "policy"), {"kernel": kernel})
    assert policy.scorer.scored_until == 0
    policy.choose(1, np.array([0, 1, 2]), False)
    assert policy.scorer.scored_until == 3
    policy.choose(2, np.array([1, 4]), False)
    assert policy.scorer.scored_until == 5


def test_an_arrival_id_out_of_range_anywhere_in_the_queue_is_refused():
    contexts = np.full((4, 3), 0.5)
    policy, _ = make_policy("cqb_opt", policy_env(pool_instance(np.ones((2, 3)), contexts, 0.5), 4),
                            contexts, stream(0, "policy"))
    with pytest.raises(IndexError, match="arrival id 9 out of range"):
        policy.choose(1, np.array([0, 9, 2]), False)
    with pytest.raises(IndexError, match="arrival id -1 out of range"):
        policy.choose(1, np.array([-1, 2]), False)


@pytest.mark.parametrize("dim", [5, 16])
def test_dense_four_job_refresh_equals_the_single_job_scores_bit_for_bit(dim):
    """The stale-column refresh scores dense jobs four at a time (score4); a row
    scored on arrival takes the one-job path (score). Same estimator state, so
    the same bits."""
    rng = np.random.default_rng(dim)
    contexts = rng.normal(size=(40, dim))
    contexts /= np.linalg.norm(contexts, axis=1, keepdims=True)
    contexts[5, : dim // 2] = 0.0  # still dense (less than half zeros)
    contexts[6, 1:] = 0.0  # sparse: the one-job path inside the refresh
    instance = pool_instance(rng.normal(size=(3, dim)), contexts, 0.5)
    queue = np.arange(1, 12)  # 11 jobs: two blocks of four, the sparse job, two left over
    samples = [(int(rng.integers(40)), int(rng.integers(3)), bool(rng.random() < 0.5)) for _ in range(30)]

    def policy():
        return make_policy("cqb_opt", policy_env(instance, 40), contexts, stream(0, "policy"))[0]

    refreshed = policy()
    refreshed.choose(1, queue, False)  # every row scored on arrival
    for job, server, success in samples:
        refreshed.observe(2, job, server, success)  # every column stale
    refreshed.scorer.refresh(queue)
    fresh = policy()
    for job, server, success in samples:
        fresh.observe(2, job, server, success)
    fresh.scorer.refresh(queue)  # rows scored now, one job at a time
    for field in ("means", "bonuses", "ucb"):
        np.testing.assert_array_equal(getattr(refreshed.scorer, field)[queue], getattr(fresh.scorer, field)[queue])


LOOP_CASES = [case for case in CASES if case[1].get("ts_mode") != "parameter"] + [
    ("cqb_eps", {"phase1_server": "uniform", "tau": 120, "explore_prob": 0.2}, SYNTHETIC, 400, 13),
    ("cqb_eta2", {"tau": 60, "eta": 0.4, "cutoff": 250, "phase1_server": "uniform"}, "sparse", 400, 14),
]


@pytest.mark.parametrize("case", LOOP_CASES, ids=lambda case: f"{case[0]}-{case[4]}")
def test_the_compiled_round_loop_is_run_policys_round_for_round(case):
    """Core.play against cqb.sim.simulate.run_policy's Python loop (a record
    forces it), both on the compiled kernel: the same queue length, gap,
    exploration flag and departure in every round, the same estimator state
    and generator state at the end, bit for bit."""
    from cqb.sim.simulate import run_policy

    name, params, spec, horizon, seed = case
    trace, (_, looped) = build(case)
    _, (_, reference) = build(case)
    assert looped.compiled_play is not None
    compiled_run = run_policy(looped, trace)
    python_run = run_policy(reference, trace, record={})
    for field in ("queue", "gap", "explored", "departures"):
        np.testing.assert_array_equal(getattr(compiled_run, field), getattr(python_run, field), err_msg=field)
    assert compiled_run.departures.sum() > 50
    a, b = looped.scorer.estimator, reference.scorer.estimator
    for field in ("features", "outcomes", "counts", "mle", "theta", "inverses", "widths", "next_refit"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert (a.refits, a.projections) == (b.refits, b.projections)
    if hasattr(looped, "rng"):
        assert looped.rng.bit_generator.state == reference.rng.bit_generator.state
    if hasattr(looped, "phase1_visits"):
        assert looped.phase1_visits == reference.phase1_visits
    if name in ("cqb_eps", "cqb_eta2", "cqb_eps_opt"):
        assert compiled_run.explored.sum() > 10  # the exploration branch ran


def test_the_python_loop_runs_where_the_kernel_has_no_loop():
    """The numpy kernel and CQB-TS's parameter mode have no compiled loop."""
    trace, (numpy_kernel, compiled_kernel) = build(("cqb_ts", {}, SYNTHETIC, 50, 1))
    assert numpy_kernel.compiled_play(trace) is None
    assert compiled_kernel.compiled_play(trace) is not None
    trace, (_, parameter_mode) = build(("cqb_ts", {"ts_mode": "parameter"}, SYNTHETIC, 50, 1))
    assert parameter_mode.compiled_play(trace) is None


@pytest.mark.parametrize("name, params, spec, seed", [
    ("q_ucb", {}, SYNTHETIC, 1), ("q_ucb", {"explore_constant": 0.1}, "sparse", 2),
    ("q_ths", {}, SYNTHETIC, 3), ("q_ths", {"explore_constant": 1.0}, "sparse", 4),
])
def test_the_compiled_queue_bandit_loop_is_run_policys_round_for_round(name, params, spec, seed):
    """play_queue_bandit against run_policy's Python loop (Q-UCB, Q-ThS): every
    round's outputs, the success and trial counts and the generator state at
    the end, bit for bit; both the exploration and the index branch ran."""
    from cqb.sim.simulate import run_policy

    instance = sparse_pool(seed) if spec == "sparse" else instance_from_spec(spec, stream(seed, "instance"))
    trace = draw_trace(instance, 600, seed)
    env = policy_env(instance, 600)
    looped, reference = (make_policy(name, env, trace.contexts, stream(seed, "policy"), params, trace.true_means)[0]
                         for _ in range(2))
    compiled_run = run_policy(looped, trace)
    python_run = run_policy(reference, trace, record={})
    for field in ("queue", "gap", "explored", "departures"):
        np.testing.assert_array_equal(getattr(compiled_run, field), getattr(python_run, field), err_msg=field)
    np.testing.assert_array_equal(looped.successes, reference.successes)
    np.testing.assert_array_equal(looped.trials, reference.trials)
    assert looped.rng.bit_generator.state == reference.rng.bit_generator.state
    decisions = int(np.isfinite(python_run.gap).sum())
    assert 10 < int(python_run.explored.sum()) < decisions - 10


@pytest.mark.parametrize("dim", [1, 2, 3, 4, 7, 8, 13, 49])
def test_compiled_refits_match_numpy_at_every_block_remainder(dim):
    """The kernel's Cholesky and inverse work on four rows or columns at a time
    with a remainder block: at every remainder (and d < 4, one block) its V⁻¹,
    H⁻¹ and MLE after refits at every sample agree with numpy's to rounding,
    and its inverses are exactly symmetric."""
    rng = np.random.default_rng(dim)
    config = dict(refit_growth=0.0, norm_bound=1e6)
    reference = LogisticEstimator(1, dim, 120, EstimatorConfig(**config, kernel="numpy"))
    compiled = LogisticEstimator(1, dim, 120, EstimatorConfig(**config, kernel="compiled"))
    theta = rng.normal(size=dim) / np.sqrt(dim)
    for _ in range(120):
        x = rng.normal(size=dim) / np.sqrt(dim)
        outcome = float(rng.random() < 1 / (1 + np.exp(-x @ theta)))
        reference.update(0, x, outcome)
        compiled.update(0, x, outcome)
        scale = np.abs(reference.inverses).max(axis=(2, 3), keepdims=True)
        np.testing.assert_allclose(compiled.inverses / scale, reference.inverses / scale, rtol=0, atol=1e-11)
        np.testing.assert_allclose(compiled.mle, reference.mle, rtol=1e-9, atol=1e-10)
    for inverse in compiled.inverses[0]:
        np.testing.assert_array_equal(inverse, inverse.T)
    assert compiled.refits == 120
