"""The round loop of SPEC §1, with common random numbers.

Round t: the policy sees the queue, picks a (job, server) pair, the job
departs iff the service uniform U₂(t) ≤ μ(xᵀθ*_k); then a job arrives iff the
arrival uniform U₁(t) ≤ λ and waits from round t + 1 on. Q(1) = 0.

A :class:`Trace` holds everything random that is not the policy's own: the
arrival uniforms, the context of the i-th arrival and the service uniforms. It
is drawn once per seed, so every policy and the oracle face the same arrivals,
contexts and service coins, and Q(t) − Q*(t) per seed is a coupled, low-variance
regret estimate.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field, is_dataclass

import numpy as np

from .. import __version__
from .instances import Instance, check_positive_int, instance_from_spec
from .policies import PolicyEnv, get_spec, make_policy
from .rng import check_seed, stream


@dataclass(frozen=True)
class Trace:
    arrivals: np.ndarray  # (T,) bool: A(t)
    contexts: np.ndarray  # (number of arrivals, d), in arrival order
    service_uniforms: np.ndarray  # (T,): U₂(t)
    true_means: np.ndarray  # (number of arrivals, K): μ(xᵀθ*_k) of each arrival


def draw_trace(instance: Instance, horizon: int, seed: int) -> Trace:
    check_positive_int("horizon", horizon)
    arrivals = stream(seed, "arrivals").random(horizon) <= instance.arrival_rate
    contexts = instance.sample_contexts(int(arrivals.sum()), stream(seed, "contexts"))
    service = stream(seed, "service").random(horizon)
    return Trace(arrivals, contexts, service, instance.service_probabilities(contexts))


@dataclass
class PolicyRun:
    queue: np.ndarray  # (T,) Q(t), t = 1..T
    gap: np.ndarray  # (T,) best true mean in the queue minus the chosen pair's; NaN if empty
    explored: np.ndarray  # (T,) bool
    departures: np.ndarray  # (T,) bool: D(t)


# Set (to anything) by the start-up benchmark (cqb.benchmark.startup_times): run_policy
# then prints the wall-clock time at which its loop starts to stderr.
LOOP_START_PROBE = "CQB_REPORT_LOOP_START"


def run_policy(policy, trace: Trace, record: dict | None = None) -> PolicyRun:
    """Play one policy on a trace.

    ``record``, if a dict, receives what the loop actually consumed, for tests
    of the common random numbers: "arrivals" (A(t) of every round) and, per
    round with a decision, "rounds" (t), "new_arrival" (the flag the policy
    saw), "jobs" (the served arrival id) and "service" (the uniform U₂(t) used).
    """
    horizon = trace.arrivals.shape[0]
    queue = np.empty(horizon + 1, dtype=np.int64)  # arrival ids, oldest first
    length = 0
    next_id = 0
    queue_length = np.zeros(horizon, dtype=np.int64)
    gap = np.full(horizon, np.nan)
    explored = np.zeros(horizon, dtype=bool)
    departures = np.zeros(horizon, dtype=bool)
    arrivals = trace.arrivals.tolist()
    service = trace.service_uniforms.tolist()
    true_means = trace.true_means
    best_mean = true_means.max(axis=1).tolist()  # [] when nothing arrives
    # The best true mean in the queue, for the gap: a max-heap of the waiting
    # jobs' best means, departed jobs dropped lazily when they reach the top
    # (one numpy max over the queue per round cost more than the policy's loop).
    best_waiting: list[tuple[float, int]] = []
    departed = [False] * len(best_mean)
    recording = record is not None
    if recording:
        record.update(arrivals=arrivals, rounds=[], new_arrival=[], jobs=[], service=[])
    if os.environ.get(LOOP_START_PROBE):  # once per run, outside the loop
        print(f"cqb: loop start {time.time():.6f}", file=sys.stderr, flush=True)
    for t in range(1, horizon + 1):
        queue_length[t - 1] = length
        if length:
            waiting = queue[:length]
            new_arrival = t >= 2 and arrivals[t - 2]
            position, server, explored[t - 1] = policy.choose(t, waiting, new_arrival)
            job = int(waiting[position])
            chosen_mean = true_means[job, server]
            while departed[best_waiting[0][1]]:
                heapq.heappop(best_waiting)
            gap[t - 1] = -best_waiting[0][0] - chosen_mean
            success = service[t - 1] <= chosen_mean
            if recording:
                record["rounds"].append(t)
                record["new_arrival"].append(new_arrival)
                record["jobs"].append(job)
                record["service"].append(service[t - 1])
            policy.observe(t, job, server, success)
            if success:
                departures[t - 1] = True
                departed[job] = True
                queue[position:length - 1] = queue[position + 1:length]
                length -= 1
        if arrivals[t - 1]:
            queue[length] = next_id
            heapq.heappush(best_waiting, (-best_mean[next_id], next_id))
            next_id += 1
            length += 1
    return PolicyRun(queue_length, gap, explored, departures)


def oracle_queue(trace: Trace) -> np.ndarray:
    """Q*(t), t = 1..T: the optimal policy π* (policies.baselines.OraclePolicy:
    the waiting job of highest best true mean, the earliest arrival on ties,
    at its best server) played on ``trace`` with a heap keyed (−mean, arrival
    id) instead of a scan of the queue per round: the same choices, so the
    same path (tests/test_simulate.py compares it with run_policy's)."""
    horizon = trace.arrivals.shape[0]
    best_mean = trace.true_means.max(axis=1).tolist()
    arrivals = trace.arrivals.tolist()
    service = trace.service_uniforms.tolist()
    queue_length = np.zeros(horizon, dtype=np.int64)
    waiting: list[tuple[float, int]] = []
    next_id = 0
    for t in range(horizon):
        queue_length[t] = len(waiting)
        if waiting and service[t] <= -waiting[0][0]:
            heapq.heappop(waiting)
        if arrivals[t]:
            heapq.heappush(waiting, (-best_mean[next_id], next_id))
            next_id += 1
    return queue_length


@dataclass
class RunResult:
    queue: np.ndarray
    oracle_queue: np.ndarray
    gap: np.ndarray
    explored: np.ndarray
    metadata: dict = field(default_factory=dict)

    @property
    def regret(self) -> np.ndarray:
        return self.queue - self.oracle_queue


def policy_env(instance: Instance, horizon: int) -> PolicyEnv:
    return PolicyEnv(instance.n_servers, instance.dim, horizon, instance.arrival_rate, instance.slack,
                     instance.norm_bound, instance.server_norms)


def play(instance: Instance, trace: Trace, policy_name: str, policy_params: dict | None,
         seed: int, record: dict | None = None) -> tuple[PolicyRun, dict]:
    """Build the policy on its own stream and play it on ``trace``; ``record``
    as in :func:`run_policy`, plus "contexts" (the matrix the policy was given)."""
    horizon = trace.arrivals.shape[0]
    policy, resolved = make_policy(policy_name, policy_env(instance, horizon), trace.contexts,
                                   stream(seed, "policy"), policy_params,
                                   true_means=trace.true_means)
    resolved = asdict(resolved) if is_dataclass(resolved) else dict(resolved)
    if record is not None:
        record["contexts"] = trace.contexts
    return run_policy(policy, trace, record), resolved


def simulate(instance_spec: dict | Instance, policy: str, policy_params: dict | None,
             horizon: int, seed: int, record: dict | None = None, *,
             blas_threads_pinned: bool = False) -> RunResult:
    """One run: the policy and the oracle on the same trace of ``seed``.

    ``record``, if a dict, gets "policy" and "oracle": what each run consumed
    (see :func:`play`), so a test can check that both faced the same trace.
    ``blas_threads_pinned``: the caller set BLAS to one thread before numpy
    was imported (cqb.cli.pin_blas_to_one_thread), so threadpoolctl is not needed."""
    get_spec(policy)  # unknown names fail before any work
    check_positive_int("horizon", horizon)
    seed = check_seed(seed)
    if isinstance(instance_spec, Instance):
        instance, spec = instance_spec, None
    else:
        instance, spec = instance_from_spec(instance_spec, stream(seed, "instance")), instance_spec
    trace = draw_trace(instance, horizon, seed)
    # One BLAS thread: the matrices are small (d ≤ a few hundred) and a run is
    # one single-threaded job; multithreaded BLAS on a loaded machine was
    # measured 10× slower at d = 120.
    with contextlib.nullcontext() if blas_threads_pinned else _one_blas_thread():
        policy_record = oracle_record = None
        if record is not None:
            policy_record, oracle_record = record.setdefault("policy", {}), record.setdefault("oracle", {})
        run, resolved = play(instance, trace, policy, policy_params, seed, policy_record)
        if policy == "oracle":
            oracle_queue_lengths = run.queue
            if record is not None:
                oracle_record.update(policy_record)
        elif record is not None:  # what the oracle consumed, through the policy interface
            oracle_queue_lengths = play(instance, trace, "oracle", None, seed, oracle_record)[0].queue
        else:
            oracle_queue_lengths = oracle_queue(trace)
    metadata = {
        "policy": policy,
        "policy_params": resolved,
        "instance_spec": spec,
        "instance": {**instance.summary(), **instance.diagnostics(trace.contexts)},
        "seed": seed,
        "horizon": horizon,
        "arrivals": int(trace.arrivals.sum()),
        "package_version": __version__,
    }
    return RunResult(run.queue, oracle_queue_lengths, run.gap, run.explored, _json_safe(metadata))


def _one_blas_thread():
    from threadpoolctl import threadpool_limits  # here: `cqb run` pins BLAS without it

    return threadpool_limits(limits=1, user_api="blas")


def _json_safe(value):
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
