import math

import numpy as np
import pytest

from cqb.presentation import policy_styles

import cqb
from cqb.sim.instances import pool_instance, synthetic_instance
from cqb.sim.streams import instance_from_spec
from cqb.sim.runfile import load_run, save_run
from cqb.policies import PolicyEnv, builtin_policies, make_policy
from cqb.sim.policies import registry
from cqb.sim.rng import STREAM_NAMES, seed_streams, stream
from cqb.sim.simulate import RunResult, draw_trace, policy_env, run_policy, simulate
from cqb.config.experiments import BASE_INSTANCE

# The built-in policies, not the whole registry: listing it at collection
# would load (and test) whatever plugins the environment has installed.
BUILTIN_POLICIES = sorted(builtin_policies())

BASE = BASE_INSTANCE
SMALL = {"kind": "synthetic", "n_servers": 3, "dim": 3, "arrival_rate": 0.6, "slack": 0.15}


class Recorder:
    """Wraps a policy and records what it was shown."""

    def __init__(self, inner):
        self.inner, self.queues, self.decisions = inner, [], []

    def choose(self, t, queue, new_arrival):
        decision = self.inner.choose(t, queue, new_arrival)
        self.queues.append(queue.copy())
        self.decisions.append(decision)
        return decision

    def observe(self, t, job, server, success):
        self.inner.observe(t, job, server, success)


def _setup(spec=SMALL, horizon=600, seed=0):
    instance = instance_from_spec(spec, stream(seed, "instance"))
    return instance, draw_trace(instance, horizon, seed)


def test_streams_are_named_and_independent():
    streams = seed_streams(7)
    assert tuple(streams) == STREAM_NAMES
    draws = {name: gen.random(4) for name, gen in streams.items()}
    assert len({tuple(v) for v in draws.values()}) == len(STREAM_NAMES)
    np.testing.assert_array_equal(stream(7, "service").random(4), draws["service"])
    with pytest.raises(ValueError, match="'noise'"):
        stream(7, "noise")
    with pytest.raises(ValueError, match="-1"):
        stream(-1, "service")


@pytest.mark.parametrize("policy", BUILTIN_POLICIES)
def test_queue_recursion_holds_every_round(policy):
    instance, trace = _setup()
    horizon = trace.arrivals.shape[0]
    env = policy_env(instance, horizon)
    inner, _ = make_policy(policy, env, trace.contexts, stream(0, "policy"), None, trace.true_means)
    run = run_policy(inner, trace)
    assert run.queue[0] == 0
    arrivals = trace.arrivals.astype(int)
    departures = run.departures.astype(int)
    np.testing.assert_array_equal(run.queue[1:], np.maximum(run.queue[:-1] + arrivals[:-1] - departures[:-1], 0))
    assert not np.any(departures[run.queue == 0])  # nothing departs from an empty queue
    assert np.all(np.isnan(run.gap[run.queue == 0]))
    assert np.all(run.gap[run.queue > 0] >= 0)


def test_service_follows_the_shared_uniforms():
    instance, trace = _setup()
    inner, _ = make_policy("random", policy_env(instance, 600), trace.contexts, stream(0, "policy"))
    recorder = Recorder(inner)
    run = run_policy(recorder, trace)
    busy = np.flatnonzero(run.queue > 0)
    for round_index, queue, (position, server, _) in zip(busy, recorder.queues, recorder.decisions):
        job = queue[position]
        expected = trace.service_uniforms[round_index] <= trace.true_means[job, server]
        assert run.departures[round_index] == expected


def test_oracle_takes_best_pair_with_first_arrival_tie_break():
    true_means = np.array([[0.2, 0.5], [0.5, 0.1], [0.9, 0.9], [0.9, 0.3]])
    env = PolicyEnv(2, 2, 10, 0.5, 0.1)
    oracle, _ = make_policy("oracle", env, np.zeros((4, 2)), stream(0, "policy"), true_means=true_means)
    assert oracle.choose(1, np.array([0, 1]), False)[:2] == (0, 1)  # tie 0.5/0.5: earlier job
    assert oracle.choose(1, np.array([1, 2, 3]), False)[:2] == (1, 0)  # tie in job 2: lowest server
    assert oracle.choose(1, np.array([3, 2]), False)[:2] == (0, 0)  # queue order = arrival order


def test_oracle_in_simulation_always_picks_the_argmax():
    instance, trace = _setup()
    inner, _ = make_policy("oracle", policy_env(instance, 600), trace.contexts, stream(0, "policy"),
                           true_means=trace.true_means)
    recorder = Recorder(inner)
    run = run_policy(recorder, trace)
    for queue, (position, server, _) in zip(recorder.queues, recorder.decisions):
        means = trace.true_means[queue]
        best = means.max()
        first = np.flatnonzero(means.max(axis=1) == best)[0]
        assert (position, server) == (first, int(np.argmax(means[first])))
    assert np.nansum(run.gap) == 0


def _assert_same_trace_consumed(a, b):
    """Two runs' records (simulate's ``record``) consumed the same arrivals,
    the same service uniform in every round where both decided, and the same
    context for every arrival id both served."""
    assert a["arrivals"] == b["arrivals"]
    service_a = dict(zip(a["rounds"], a["service"]))
    service_b = dict(zip(b["rounds"], b["service"]))
    common_rounds = sorted(service_a.keys() & service_b.keys())
    assert len(common_rounds) > 50  # the comparison is not vacuous
    assert [service_a[t] for t in common_rounds] == [service_b[t] for t in common_rounds]
    common_jobs = sorted(set(a["jobs"]) & set(b["jobs"]))
    assert len(common_jobs) > 20
    np.testing.assert_array_equal(a["contexts"][common_jobs], b["contexts"][common_jobs])


@pytest.mark.parametrize("policy", BUILTIN_POLICIES)
def test_policy_and_oracle_consume_the_same_arrivals_contexts_and_service_uniforms(policy):
    record = {}
    result = simulate(SMALL, policy, None, 400, 3, record=record)
    _assert_same_trace_consumed(record["policy"], record["oracle"])
    for name, consumed in record.items():
        arrivals = consumed["arrivals"]
        # the flag shown to the policy is A(t − 1), the arrival that just joined
        assert consumed["new_arrival"] == [t >= 2 and arrivals[t - 2] for t in consumed["rounds"]]
    # and the trace consumed is the one of seed 3
    trace = draw_trace(instance_from_spec(SMALL, stream(3, "instance")), 400, 3)
    assert record["oracle"]["arrivals"] == trace.arrivals.tolist()
    rounds = np.array(record["oracle"]["rounds"])
    np.testing.assert_array_equal(record["oracle"]["service"], trace.service_uniforms[rounds - 1])
    np.testing.assert_array_equal(record["oracle"]["contexts"], trace.contexts)
    assert result.metadata["arrivals"] == trace.arrivals.sum()


def test_recording_leaves_the_run_bit_identical():
    plain = simulate(SMALL, "cqb_eps", None, 300, 4)
    recorded = simulate(SMALL, "cqb_eps", None, 300, 4, record={})
    for key in ("queue", "oracle_queue", "gap", "explored"):
        assert getattr(plain, key).tobytes() == getattr(recorded, key).tobytes()


def test_oracle_queue_is_the_same_for_every_policy_of_a_seed():
    oracle_queues = {p: simulate(SMALL, p, None, 400, 5).oracle_queue for p in ("random", "cqb_opt", "q_ucb")}
    first = next(iter(oracle_queues.values()))
    for queue in oracle_queues.values():
        np.testing.assert_array_equal(queue, first)
    np.testing.assert_array_equal(simulate(SMALL, "oracle", None, 400, 5).queue, first)


@pytest.mark.parametrize("policy", BUILTIN_POLICIES)
def test_same_seed_twice_is_bit_identical(policy, tmp_path):
    a = simulate(SMALL, policy, None, 300, 11)
    b = simulate(SMALL, policy, None, 300, 11)
    save_run(tmp_path / "a.npz", a)
    save_run(tmp_path / "b.npz", b)
    ra, rb = load_run(tmp_path / "a.npz"), load_run(tmp_path / "b.npz")
    for key in ("queue", "oracle_queue", "gap", "explored"):
        assert ra[key].tobytes() == rb[key].tobytes()
    assert ra["metadata"] == rb["metadata"]


def test_different_seeds_differ():
    assert not np.array_equal(simulate(SMALL, "random", None, 300, 1).queue,
                              simulate(SMALL, "random", None, 300, 2).queue)


def test_synthetic_instance_enforces_slack():
    instance = synthetic_instance(5, 5, 0.7, 0.1, np.random.default_rng(0))
    contexts = sample_contexts(instance, 3000, np.random.default_rng(1))
    np.testing.assert_allclose(np.linalg.norm(contexts, axis=1), 1.0)
    assert instance.service_probabilities(contexts).max(axis=1).min() >= 0.8
    assert instance.accept_rate >= 0.005
    assert np.all(np.abs(instance.theta) <= 1)


def test_pool_instance_samples_the_pool():
    pool = np.eye(3)[[0, 1, 2, 0]] * 0.5
    instance = pool_instance(np.ones((2, 3)), pool, 0.3)
    drawn = sample_contexts(instance, 50, np.random.default_rng(0))
    assert all(any(np.array_equal(row, p) for p in pool) for row in drawn)
    assert instance.n_servers == 2 and instance.dim == 3


def test_instance_diagnostics_measure_slack_and_kappa_of_the_sample():
    theta = np.array([[2.0, 0.0], [0.0, -1.0], [0.5, 0.5]])
    contexts = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, -0.8]])
    instance = pool_instance(theta, contexts, 0.4, slack=0.05, description={"source": "test"})
    probs = 1 / (1 + np.exp(-contexts @ theta.T))
    diagnostics = instance.diagnostics(contexts)
    assert diagnostics["measured_slack"] == pytest.approx(probs.max(axis=1).min() - 0.4, rel=1e-12)
    assert diagnostics["measured_kappa"] == pytest.approx(1 / (probs * (1 - probs)).min(), rel=1e-12)
    assert instance.diagnostics(np.zeros((0, 2))) == {"measured_slack": None, "measured_kappa": None}
    assert instance.slack == 0.05 and instance.pool.dtype == np.float64
    assert instance.summary()["kind"] == "pool"
    assert instance.description == {"source": "test", "pool_size": 3}


@pytest.mark.parametrize("theta,contexts,needle", [
    (np.ones(3), np.ones((2, 3)) / 2, "matrices"),
    (np.ones((2, 3)), np.ones(3) / 2, "matrices"),
    (np.ones((2, 3)), np.zeros((0, 3)), "^the context pool is empty$"),
    (np.ones((2, 2)), np.array([[0.6, 0.8], [0.0, 1.0 + 1e-6]]), "norm"),
])
def test_pool_instance_rejects_bad_shapes_and_norms(theta, contexts, needle):
    with pytest.raises(ValueError, match=needle):
        pool_instance(theta, contexts, 0.5)
    if needle == "norm":  # a unit-norm row up to rounding is accepted
        pool_instance(theta, np.array([[0.6, 0.8], [0.0, 1.0 + 1e-12]]), 0.5)


def test_pool_instance_from_file(tmp_path):
    contexts = np.random.default_rng(0).normal(size=(40, 4))
    contexts /= np.linalg.norm(contexts, axis=1, keepdims=True)
    np.savez(tmp_path / "pool.npz", contexts=contexts, theta=np.ones((3, 4)), labels=np.zeros(40, int),
             report=np.array("{}"))
    result = simulate({"kind": "pool", "pool": str(tmp_path / "pool.npz"), "arrival_rate": 0.3},
                      "cqb_eps", {"tau": 20}, 200, 0)
    assert result.metadata["instance"]["kind"] == "pool"
    assert result.metadata["policy_params"]["tau"] == 20


def test_pool_instance_summary_lists_every_field():
    theta = np.array([[2.0, 0.0], [0.0, -1.0], [0.5, 0.5]])
    instance = pool_instance(theta, np.eye(2), 0.4, slack=0.05, description={"source": "test"})
    assert instance.summary() == {"kind": "pool", "n_servers": 3, "dim": 2, "arrival_rate": 0.4, "slack": 0.05,
                                  "theta_max_norm": 2.0, "norm_bound": 2.0, "accept_rate": None,
                                  "source": "test", "pool_size": 2}


def test_pool_of_float32_or_integers_becomes_the_same_float64_instance():
    contexts = np.array([[0.5, 0.5], [1.0, 0.0]])  # exact in float32
    reference = pool_instance(np.array([[1.0, -2.0]]), contexts, 0.5)
    for cast in (np.float32, np.int64):
        other = pool_instance(np.array([[1, -2]], dtype=cast), contexts.astype(np.float32) if cast is np.float32
                              else np.array([[0, 1], [1, 0]]), 0.5)
        assert other.theta.dtype == other.pool.dtype == np.float64
        np.testing.assert_array_equal(other.theta, reference.theta)
        np.testing.assert_array_equal(other.pool, contexts if cast is np.float32 else [[0, 1], [1, 0]])
    # the norm tolerance is inclusive: a row of norm exactly 1 + 1e-9 is accepted
    pool_instance(np.ones((1, 2)), np.array([[0.0, 1 + 1e-9]]), 0.5)


def test_pool_file_without_contexts_or_theta_is_refused_by_name(tmp_path):
    np.savez(tmp_path / "pool.npz", contexts=np.eye(2))
    with pytest.raises(ValueError, match=r"pool\.npz lacks \['theta'\]"):
        instance_from_spec({"kind": "pool", "pool": str(tmp_path / "pool.npz"), "arrival_rate": 0.3}, stream(0, "instance"))


def test_pool_file_holding_pickled_objects_is_not_unpickled(tmp_path):
    np.savez(tmp_path / "pool.npz", contexts=np.array([np.eye(2)[0], np.eye(2)[1]], dtype=object),
             theta=np.ones((1, 2)))
    with pytest.raises(ValueError, match="allow_pickle"):
        instance_from_spec({"kind": "pool", "pool": str(tmp_path / "pool.npz"), "arrival_rate": 0.3}, stream(0, "instance"))


def test_raw_contexts_are_uniform_cube_draws_scaled_to_unit_norm():
    """docs/model.md#synthetic-instances: u ~ U(−1, 1)^d scaled to norm 1: symmetric about 0 in every coordinate."""
    from cqb.sim.instances import _unit_rows

    rows = _unit_rows(20000, 3, np.random.default_rng(0))
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-12)
    assert np.abs(rows.mean(axis=0)).max() < 0.02
    assert abs((rows > 0).all(axis=1).mean() - 1 / 8) < 0.01  # each orthant equally likely


# -------------------------------------------------------------------- policies' exploration


def test_q_ucb_exploration_frequency_matches_schedule():
    horizon, n_servers = 4000, 5
    env = PolicyEnv(n_servers, 2, horizon, 0.5, None)
    runs = 20
    explored = np.zeros(horizon)
    for seed in range(runs):
        policy, _ = make_policy("q_ucb", env, np.zeros((1, 2)), stream(seed, "policy"), {"explore_constant": 3.0})
        for t in range(1, horizon + 1):
            _, server, flag = policy.choose(t, np.array([0]), False)
            explored[t - 1] += flag
            policy.observe(t, 0, server, bool(t % 2))
    t = np.arange(1, horizon + 1)
    probability = np.minimum(1.0, 3 * n_servers * np.log(t) ** 2 / t)
    expected = probability.sum() * runs
    sd = math.sqrt((probability * (1 - probability)).sum() * runs)
    assert abs(explored.sum() - expected) < 4 * sd
    late = t > 2000
    assert explored[late].sum() == pytest.approx(probability[late].sum() * runs, rel=0.1)
    assert explored[late].sum() > 0  # a published implementation never explored


def test_q_policies_serve_the_oldest_job():
    env = PolicyEnv(3, 2, 100, 0.5, None)
    for name in ("q_ucb", "q_ths"):
        policy, _ = make_policy(name, env, np.zeros((10, 2)), stream(0, "policy"))
        for t in range(1, 100):
            position, server, _ = policy.choose(t, np.array([3, 5, 8]), True)
            assert position == 0
            policy.observe(t, 3, server, server == 1)


def test_q_ucb_exploits_best_server():
    env = PolicyEnv(3, 2, 3000, 0.5, None)
    policy, _ = make_policy("q_ucb", env, np.zeros((1, 2)), stream(0, "policy"))
    rng = np.random.default_rng(0)
    rates = np.array([0.2, 0.8, 0.5])
    late = []
    for t in range(1, 3001):
        _, server, flag = policy.choose(t, np.array([0]), False)
        policy.observe(t, 0, server, rng.random() < rates[server])
        if t > 2000 and not flag:
            late.append(server)
    assert np.mean(np.array(late) == 1) > 0.8


def test_cqb_eps_phase_one_explores_newest_job_round_robin_for_tau_rounds():
    instance, trace = _setup(spec=BASE, horizon=1500, seed=2)
    env = policy_env(instance, 1500)
    inner, params = make_policy("cqb_eps", env, trace.contexts, stream(2, "policy"), None, trace.true_means)
    assert params.tau == math.ceil(3e-4 * 125 * math.log(1500) * 5 / 0.7 / (0.1 - 2 / math.sqrt(1500)) ** 2)
    recorder = Recorder(inner)
    run = run_policy(recorder, trace)
    busy = np.flatnonzero(run.queue > 0) + 1  # rounds with a decision
    servers_phase1 = []
    for t, queue, (position, server, flag) in zip(busy, recorder.queues, recorder.decisions):
        new_arrival = t >= 2 and trace.arrivals[t - 2]
        if t <= params.tau:
            assert flag == new_arrival
        if flag:
            assert position == len(queue) - 1  # the newest job
            if t <= params.tau:
                servers_phase1.append(server)
        if t > params.tau and not new_arrival:
            assert not flag
    assert servers_phase1 == [i % 5 for i in range(len(servers_phase1))]
    phase1_explorations = sum(1 for t in busy if t <= params.tau and t >= 2 and trace.arrivals[t - 2])
    assert len(servers_phase1) == phase1_explorations
    late_rate = run.explored[params.tau:].sum() / trace.arrivals[params.tau - 1:-1].sum()
    assert late_rate == pytest.approx(params.explore_prob, abs=0.02)


def test_tau_formula_matches_spec_values():
    from cqb.policies import resolve_params

    taus = {slack: resolve_params("cqb_eps", None, PolicyEnv(5, 5, 5000, 0.7, slack)).tau
            for slack in (0.05, 0.1, 0.15)}
    assert taus[0.1] == pytest.approx(444, abs=1)
    assert taus[0.15] == pytest.approx(154, abs=1)
    assert taus[0.05] == pytest.approx(4838, abs=2)


def test_cqb_eps_opt_is_cqb_eps_without_phase_one():
    from cqb.policies import resolve_params

    params = resolve_params("cqb_eps_opt", None, PolicyEnv(5, 5, 2500, 0.7, 0.1))
    assert params.explore_prob == pytest.approx(2500 ** -0.5)


def test_cqb_eta2_phases():
    from cqb.policies import resolve_params

    params = resolve_params("cqb_eta2", {"cutoff_constant": 32.0}, PolicyEnv(5, 5, 50_000, 0.7, 0.1))
    assert params.eta == pytest.approx(0.025)
    assert params.cutoff == 50_000 - math.ceil(3200 * math.log(50_000))
    short = resolve_params("cqb_eta2", {"cutoff_constant": 32.0}, PolicyEnv(5, 5, 5000, 0.7, 0.1))
    assert short.cutoff == short.tau  # the theory's constant clips the cutoff to τ at short horizons
    instance, trace = _setup(spec=BASE, horizon=1200, seed=4)
    inner, params = make_policy("cqb_eta2", policy_env(instance, 1200), trace.contexts, stream(4, "policy"),
                                {"tau": 100, "cutoff": 700, "eta": 0.3}, trace.true_means)
    run = run_policy(inner, trace)
    rounds = np.arange(1, 1201)
    new_arrival = np.concatenate([[False], trace.arrivals[:-1]])
    assert np.array_equal(run.explored[rounds <= 100], new_arrival[rounds <= 100])
    middle = (rounds > 100) & (rounds <= 700)
    assert 0.15 < run.explored[middle].sum() / new_arrival[middle].sum() < 0.45
    assert not run.explored[rounds > 700].any()


def test_cqb_eta2_default_has_three_nonempty_phases_at_the_base_instance():
    """At T = 5000 on the base instance: τ < t_c < T, every fresh arrival is
    explored in phase 1, about a share η of them in the η-phase, none after t_c."""
    from cqb.policies import EtaParams

    horizon = 5000
    instance, trace = _setup(spec=BASE, horizon=horizon, seed=0)
    inner, params = make_policy("cqb_eta2", policy_env(instance, horizon), trace.contexts,
                                stream(0, "policy"), None, trace.true_means)
    length = math.ceil(EtaParams().cutoff_constant / 0.1 ** 2 * math.log(horizon))
    assert params.tau < params.cutoff == horizon - length < horizon
    run = run_policy(inner, trace)
    rounds = np.arange(1, horizon + 1)
    new_arrival = np.concatenate([[False], trace.arrivals[:-1]]) & (run.queue > 0)
    phase1, middle, last = rounds <= params.tau, (rounds > params.tau) & (rounds <= params.cutoff), rounds > params.cutoff
    assert np.array_equal(run.explored[phase1], new_arrival[phase1])
    n_middle = int(new_arrival[middle].sum())
    assert n_middle > 1000 and last.sum() > 500  # both later phases hold many rounds
    share = run.explored[middle].sum() / n_middle
    sd = math.sqrt(params.eta * (1 - params.eta) / n_middle)
    assert abs(share - params.eta) < 4 * sd
    assert not run.explored[last].any()


def test_thompson_parameter_mode_runs_and_differs_from_score_mode():
    a = simulate(SMALL, "cqb_ts", {"ts_mode": "score"}, 300, 0)
    b = simulate(SMALL, "cqb_ts", {"ts_mode": "parameter"}, 300, 0)
    assert not np.array_equal(a.queue, b.queue)
    np.testing.assert_array_equal(b.queue, simulate(SMALL, "cqb_ts", {"ts_mode": "parameter"}, 300, 0).queue)


# -------------------------------------------------------------------- behaviour


def test_behaviour_on_small_instance():
    seeds = range(4)
    final = {p: np.mean([simulate(BASE, p, None, 2500, s).queue[-200:].mean() for s in seeds])
             for p in ("oracle", "cqb_opt", "cqb_eps", "random")}
    assert final["oracle"] <= final["cqb_opt"] + 0.5
    assert final["cqb_eps"] < final["random"]
    assert final["cqb_opt"] < 0.1 * final["random"]


def test_random_policy_queue_grows_at_lambda_minus_its_service_rate():
    horizon, slopes, predicted = 3000, [], []
    for seed in range(3):
        instance = instance_from_spec(BASE, stream(seed, "instance"))
        result = simulate(instance, "random", None, horizon, seed)
        contexts = sample_contexts(instance, 20000, np.random.default_rng(seed))
        mean_service = instance.service_probabilities(contexts).mean()
        slopes.append((result.queue[-1] - result.queue[horizon // 2]) / (horizon - horizon // 2 - 1))
        predicted.append(0.7 - mean_service)
    assert np.mean(slopes) == pytest.approx(np.mean(predicted), abs=0.03)


# -------------------------------------------------------------------- bad input


@pytest.mark.parametrize("change,needle", [
    ({"arrival_rate": -0.2}, "-0.2"),
    ({"arrival_rate": 1.0}, "1.0"),
    ({"arrival_rate": 1.3}, "1.3"),
    ({"slack": 0.5}, "0.5"),
    ({"n_servers": 0}, "n_servers"),
    ({"kind": "weird"}, "weird"),
    ({"colour": "red"}, "colour"),
])
def test_bad_instance_values_raise_naming_the_value(change, needle):
    with pytest.raises(ValueError, match=needle):
        simulate({**BASE, **change}, "random", None, 10, 0)


def test_unknown_policy_and_parameter():
    with pytest.raises(ValueError, match="'greedy'"):
        simulate(BASE, "greedy", None, 10, 0)
    with pytest.raises(ValueError, match="bonus_scal"):
        simulate(BASE, "cqb_opt", {"bonus_scal": 0.1}, 10, 0)
    with pytest.raises(ValueError, match="explore_prob"):
        simulate(BASE, "cqb_eps", {"explore_prob": 2.0}, 10, 0)


@pytest.mark.parametrize("horizon", [0, -5])
def test_non_positive_horizon(horizon):
    with pytest.raises(ValueError, match=str(horizon)):
        simulate(BASE, "random", None, horizon, 0)


def test_dimension_mismatch_between_theta_and_contexts():
    with pytest.raises(ValueError, match="d=3.*d=4"):
        pool_instance(np.ones((2, 3)), np.zeros((5, 4)), 0.5)


def test_pool_contexts_must_lie_in_unit_ball():
    with pytest.raises(ValueError, match="norm"):
        pool_instance(np.ones((2, 2)), np.array([[3.0, 0.0]]), 0.5)


def test_tau_formula_needs_slack():
    with pytest.raises(ValueError, match="tau"):
        make_policy("cqb_eps", PolicyEnv(2, 2, 100, 0.5, None), np.zeros((1, 2)), stream(0, "policy"))


def test_run_result_regret():
    result = RunResult(np.array([0, 3, 5]), np.array([0, 1, 5]), np.zeros(3), np.zeros(3, bool))
    np.testing.assert_array_equal(result.regret, [0, 2, 0])


def test_plugin_policies_register_through_entry_points(tmp_path, monkeypatch):
    from importlib.metadata import EntryPoint

    from cqb.policies import DISPLAY_NAMES, load_plugin_policies

    (tmp_path / "my_plugin_policies.py").write_text(
        "from dataclasses import dataclass\n"
        "from cqb.policies import register_policy\n"
        "@dataclass(frozen=True)\n"
        "class Params:\n"
        "    pass\n"
        "class OldestFirst:\n"
        "    def __init__(self, env, rng):\n"
        "        self.env, self.rng = env, rng\n"
        "    def choose(self, t, queue, new_arrival):\n"
        "        return 0, int(self.rng.integers(self.env.n_servers)), False\n"
        "    def observe(self, t, job, server, success):\n"
        "        pass\n"
        "@register_policy('test_oldest_first', 'Oldest first', Params)\n"
        "def make(env, contexts, rng, params):\n"
        "    return OldestFirst(env, rng)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = EntryPoint("oldest", "my_plugin_policies", "cqb.policies")
    try:
        assert load_plugin_policies([entry]) == ["oldest"]
        assert DISPLAY_NAMES["test_oldest_first"] == "Oldest first"
        result = simulate(SMALL, "test_oldest_first", None, 200, 0)
        assert result.queue.shape == (200,)
    finally:
        registry._specs.pop("test_oldest_first", None)
        policy_styles._styles.pop("test_oldest_first", None)
    broken = EntryPoint("broken", "no_such_module_here", "cqb.policies")
    with pytest.raises(ImportError, match="broken"):
        load_plugin_policies([broken])


# -------------------------------------------------------------------- loop and metadata details


def test_queue_buffer_holds_an_arrival_every_round_with_no_service():
    from cqb.sim.simulate import Trace

    horizon = 12
    contexts = np.tile([[1.0, 0.0]], (horizon, 1))
    trace = Trace(np.ones(horizon, bool), contexts, np.ones(horizon), np.full((horizon, 2), 0.5))
    policy, _ = make_policy("random", PolicyEnv(2, 2, horizon, 0.5, 0.1), contexts, stream(0, "policy"))
    run = run_policy(policy, trace)
    np.testing.assert_array_equal(run.queue, np.arange(horizon))  # Q(t) = t − 1: nothing ever leaves
    assert run.queue.dtype == np.int64 and not run.departures.any()
    assert run.explored.dtype == run.departures.dtype == bool


def test_run_metadata_names_every_field():
    result = simulate(BASE, "random", None, 50, 3)
    assert result.queue.dtype == result.oracle_queue.dtype == np.int64
    metadata = result.metadata
    assert set(metadata) == {"policy", "policy_params", "instance_spec", "instance", "seed", "horizon", "arrivals",
                             "trace_hash", "package_version"}
    assert (metadata["policy"], metadata["seed"], metadata["horizon"]) == ("random", 3, 50)
    assert metadata["instance_spec"] == BASE and metadata["package_version"] == cqb.__version__


def test_json_safe_converts_nested_numpy_values_and_non_finite_floats():
    from cqb.sim.simulate import _json_safe

    assert _json_safe({"a": [np.float64(1.5), float("nan"), 2.5], 1: (np.int64(2), float("inf"))}) == {
        "a": [1.5, None, 2.5], "1": [2, None]}


def test_params_resolved_to_a_mapping_are_recorded_as_a_dict():
    from dataclasses import dataclass

    from cqb.sim.policies import registry

    @dataclass(frozen=True)
    class MappingParams:
        width: int = 2

        def resolve(self, env):
            return {"width": self.width, "horizon": env.horizon}

    name = "test_mapping_params"
    policies_random = registry.get_spec("random").factory
    registry.register_policy(name, MappingParams)(
        lambda env, contexts, rng, params: policies_random(env, contexts, rng, None))
    try:
        result = simulate(BASE, name, {"width": 5}, 30, 0)
    finally:
        registry._specs.pop(name)
    assert result.metadata["policy_params"] == {"width": 5, "horizon": 30}


def test_random_policy_always_explores_and_the_oracle_never_does():
    for policy, flag in (("random", True), ("oracle", False)):
        result = simulate(BASE, policy, None, 300, 1)
        busy = result.queue > 0  # a decision is made in rounds that start with a job waiting
        assert busy.any() and (result.explored[busy] == flag).all()
        assert not result.explored[~busy].any()


def test_cqb_eps_uniform_phase_one_spreads_the_newest_job_over_every_server():
    env = PolicyEnv(4, 2, 2000, 0.5, 0.1)
    contexts = np.tile([[0.6, 0.8]], (400, 1))
    policy, resolved = make_policy("cqb_eps", env, contexts, stream(0, "policy"),
                                   {"tau": 400, "phase1_server": "uniform"})
    servers = [policy.choose(t, np.array([t - 2]), True)[1] for t in range(2, 401)]  # t ≤ τ
    counts = np.bincount(servers, minlength=4)
    assert resolved.phase1_server == "uniform" and counts.min() > 60  # ≈ 100 each; round robin would be 100 exactly
    assert len(set(np.diff(servers) % 4)) > 1  # not a fixed cycle


@pytest.mark.parametrize("n_servers, dim, name, value", [(0, 3, "n_servers", 0), (2, -1, "dim", -1)])
def test_synthetic_instance_names_a_bad_size(n_servers, dim, name, value):
    with pytest.raises(ValueError, match=rf"^{name} must be a positive integer, got {value}$"):
        synthetic_instance(n_servers, dim, 0.5, 0.1, np.random.default_rng(0))


def test_an_unreachable_slack_gives_up_after_200_draws():
    # max μ over unit x and θ* ∈ [−1, 1]² is σ(√2) ≈ 0.80 < 0.5 + 0.45
    with pytest.raises(ValueError, match=r"in 200 draws for K=1, d=2, arrival_rate=0.5, slack=0.45"):
        synthetic_instance(1, 2, 0.5, 0.45, np.random.default_rng(0))


def test_no_arrivals_draw_an_empty_context_matrix():
    instance = synthetic_instance(2, 3, 0.5, 0.1, np.random.default_rng(0))
    assert sample_contexts(instance, 0, np.random.default_rng(1)).shape == (0, 3)


@pytest.mark.parametrize("slack", [0.0, 0.5, 0.7])
def test_synthetic_slack_must_lie_strictly_inside_0_to_1_minus_lambda(slack):
    with pytest.raises(ValueError, match=rf"^slack must lie in \(0, 1 - arrival_rate\) = \(0, 0.5\), got {slack}$"):
        synthetic_instance(2, 2, 0.5, slack, np.random.default_rng(0))


@pytest.mark.parametrize("rate", [0.0, 1.0, 1.5])
def test_min_accept_rate_must_lie_strictly_inside_0_to_1(rate):
    with pytest.raises(ValueError, match=rf"^min_accept_rate must lie in \(0, 1\), got {rate}$"):
        synthetic_instance(2, 2, 0.5, 0.1, np.random.default_rng(0), min_accept_rate=rate)


def test_draw_trace_names_a_bad_horizon():
    instance = synthetic_instance(2, 2, 0.5, 0.1, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"^horizon must be a positive integer, got 0$"):
        draw_trace(instance, 0, 0)


def test_policy_env_carries_a_pool_instance_norm_bound():
    instance = pool_instance(np.array([[3.0, 4.0], [1.0, 0.0]]), np.eye(2), 0.4)
    assert policy_env(instance, 100).norm_bound == 5.0


def test_run_policy_tells_the_policy_the_round_of_each_outcome():
    class FirstJobFirstServer:
        def __init__(self):
            self.observed = []

        def choose(self, t, queue, new_arrival):
            return 0, 0, False

        def observe(self, t, job, server, success):
            self.observed.append(t)

    from cqb.sim.simulate import Trace

    policy = FirstJobFirstServer()
    trace = Trace(np.array([True, False, True, False]), np.eye(2), np.full(4, 0.9), np.full((2, 2), 0.5))
    run_policy(policy, trace)
    assert policy.observed == [2, 3, 4]  # every round that starts with a job waiting


def test_pool_spec_records_its_file_and_name(tmp_path):
    np.savez(tmp_path / "pool.npz", contexts=np.eye(2) * 0.5, theta=np.ones((1, 2)))
    spec = {"kind": "pool", "pool": str(tmp_path / "pool.npz"), "arrival_rate": 0.3, "name": "tiny"}
    instance = instance_from_spec(spec, stream(0, "instance"))
    assert instance.description == {"pool": str(tmp_path / "pool.npz"), "name": "tiny", "pool_size": 2}


def test_synthetic_spec_passes_min_accept_rate_and_needs_its_keys():
    spec = {"kind": "synthetic", "n_servers": 1, "dim": 2, "arrival_rate": 0.5, "slack": 0.1, "min_accept_rate": 0.9}
    with pytest.raises(ValueError, match=r"^no θ\* with acceptance rate ≥ 0.9 in 200 draws"):
        instance_from_spec(spec, stream(0, "instance"))
    with pytest.raises(ValueError, match=r"^instance spec lacks \['slack'\]$"):
        instance_from_spec({"kind": "synthetic", "n_servers": 1, "dim": 2, "arrival_rate": 0.5}, stream(0, "instance"))


def test_pool_sampling_reaches_every_row():
    instance = pool_instance(np.ones((1, 2)), np.array([[0.5, 0], [0, 0.5], [0.1, 0], [0, 0.1]]), 0.5)
    drawn = sample_contexts(instance, 200, np.random.default_rng(0))
    assert len({tuple(row) for row in drawn}) == 4


def test_exploration_phases_end_exactly_at_their_last_round():
    """Round τ is still phase 1 and round t_c still the η-phase (t ≤ bound, not <):
    a fresh arrival at τ is explored even when η is tiny; with η = 1 one at t_c
    is explored, one at t_c + 1 is not."""
    instance, trace = _setup(spec=BASE, horizon=200, seed=4)
    queue = np.array([0, 1, 2])

    def eta2(eta):
        return make_policy("cqb_eta2", policy_env(instance, 200), trace.contexts, stream(4, "policy"),
                           {"tau": 20, "cutoff": 60, "eta": eta}, trace.true_means)[0]

    assert eta2(1e-12).choose(20, queue, True) == (2, 0, True)  # phase 1: the newest job, round robin
    policy = eta2(1.0)
    assert policy.choose(60, queue, True)[2]
    assert not policy.choose(61, queue, True)[2]


def test_context_sampler_draws_again_until_it_has_every_requested_context(monkeypatch):
    """A first batch that accepts one context too few must be topped up by a
    second batch (the count starts at zero)."""
    import cqb.sim.instances as instances

    calls = []

    def accept_first_rows(rng, size, theta, threshold):
        calls.append(size)
        return np.ones((9 if len(calls) == 1 else size, theta.shape[1]))  # 9 of the 10 wanted, then all

    monkeypatch.setattr(instances, "_draw_accepted", accept_first_rows)
    contexts = instances._sample_accepted_contexts(np.ones((2, 3)), 0.5, 10, np.random.default_rng(0), 0.5)
    assert contexts.shape == (10, 3) and len(calls) == 2


# ------------------------------------------------- fast paths against their references


def _reference_passes(contexts, theta, threshold):
    from cqb.sim.estimation import logistic

    return logistic(contexts @ theta.T).max(axis=1) >= threshold


@pytest.mark.parametrize("dim, n_servers, threshold", [(3, 3, 0.85), (5, 5, 0.8), (20, 5, 0.75), (5, 9, 0.6)])
def test_slack_test_decides_every_row_as_mu_on_every_entry(dim, n_servers, threshold):
    from cqb.sim.instances import _passes, _unit_rows

    rng = np.random.default_rng(dim * 100 + n_servers)
    theta = rng.uniform(-1, 1, size=(n_servers, dim))
    rows = _unit_rows(50000, dim, rng)
    assert np.array_equal(_passes(rows, theta, threshold), _reference_passes(rows, theta, threshold))


@pytest.mark.parametrize("threshold", [0.51, 0.6, 0.75, 0.8, 0.85, 0.95])
def test_slack_test_at_the_cut_itself_decides_as_mu(threshold):
    """Rows whose best score lies within 200 ulps of logit(threshold): there
    μ's rounding and the score comparison disagree for some rows (a score a
    few ulps below the cut can round to μ = threshold), so these rows must be
    decided by μ itself, as before."""
    from cqb.sim.instances import _passes

    cut = math.log(threshold) - math.log1p(-threshold)
    scores = cut + np.arange(-200, 201) * np.spacing(cut)
    rows = np.column_stack([scores, np.zeros_like(scores)])
    theta = np.array([[1.0, 0.0], [-0.5, 0.5]])  # the second server never scores higher here
    assert np.array_equal(_passes(rows, theta, threshold), _reference_passes(rows, theta, threshold))


@pytest.mark.parametrize("policy", ["random", "cqb_opt", "q_ucb", "oracle"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gap_heap_equals_a_scan_of_the_queue_every_round(policy, seed):
    """The gap of every decision round against the scan it replaced:
    max of the best means over the queue the policy saw, minus the chosen
    pair's mean, to the bit; NaN exactly on the rounds with an empty queue."""
    instance, trace = _setup(SMALL, horizon=800, seed=seed)
    recorder = Recorder(make_policy(policy, policy_env(instance, 800), trace.contexts, stream(seed, "policy"),
                                    None, true_means=trace.true_means)[0])
    run = run_policy(recorder, trace)
    best_mean = trace.true_means.max(axis=1)
    decided = np.flatnonzero(run.queue > 0)
    assert len(decided) == len(recorder.queues)
    for t, queue, (position, server, _) in zip(decided, recorder.queues, recorder.decisions):
        assert run.gap[t] == best_mean[queue].max() - trace.true_means[queue[position], server]
    assert np.isnan(run.gap[run.queue == 0]).all()


@pytest.mark.parametrize("spec", [SMALL, BASE, {**BASE, "n_servers": 9, "slack": 0.05}])
@pytest.mark.parametrize("seed", range(4))
def test_heap_oracle_takes_the_path_of_the_oracle_policy(spec, seed):
    from cqb.sim.simulate import oracle_queue, play

    instance, trace = _setup(spec, horizon=3000, seed=seed)
    assert np.array_equal(oracle_queue(trace), play(instance, trace, "oracle", None, seed)[0].queue)


def test_heap_oracle_breaks_ties_like_the_oracle_policy():
    """A pool of four contexts, three of them sharing a best mean exactly: the
    path under heavy ties. (Which of two tied jobs is served cannot show in
    Q*(t): both leave the same multiset of means behind, so a reversed
    tie-break is an equivalent mutant of oracle_queue.)"""
    from cqb.sim.simulate import oracle_queue, play

    contexts = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.6, 0.8]])
    theta = np.array([[0.3, 1.2], [1.2, 0.3]])  # servers mirror each other: equal best means
    for seed in range(5):
        instance = pool_instance(theta, contexts, 0.6)
        trace = draw_trace(instance, 2000, seed)
        assert np.array_equal(oracle_queue(trace), play(instance, trace, "oracle", None, seed)[0].queue)


def test_simulate_uses_the_heap_oracle_and_records_through_the_policy():
    result = simulate(SMALL, "random", None, 700, 3)
    instance, trace = _setup(SMALL, horizon=700, seed=3)
    from cqb.sim.simulate import oracle_queue

    assert np.array_equal(result.oracle_queue, oracle_queue(trace))
    recorded = simulate(SMALL, "random", None, 700, 3, record={})
    assert np.array_equal(recorded.oracle_queue, result.oracle_queue)


def sample_contexts(instance, n, rng):
    """n arrivals' contexts from the instance's stream, one per round 1..n."""
    from cqb.sim.streams import draw_contexts

    return draw_contexts(instance, np.arange(1, n + 1), n, rng)[0]
