"""The round loop of docs/model.md#the-queue-and-its-rounds, with common random numbers.

Round t: the policy sees the queue, picks a (job, server) pair, the job
departs iff the service uniform U₂(t) ≤ μ(xᵀθ*_k); then a job arrives iff the
arrival uniform U₁(t) ≤ λ and waits from round t + 1 on. Q(1) = 0.

Every policy and the oracle play on the seed's trace (cqb.sim.trace: arrivals,
contexts, service uniforms), drawn here, read from its trace file, or read
from a trace cache that the first run of the seed draws (:func:`cached_trace`).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from dataclasses import asdict, dataclass, field, is_dataclass

import numpy as np

from .. import __version__
from .core import core
from .instances import Instance, check_positive_int
from .policies import PolicyEnv, get_spec, make_policy
from .rng import check_seed, stream
from .streams import instance_from_spec
from .trace import (CorruptTrace, StaleTrace, Trace, content_hash, draw_trace, load_trace, oracle_queue,  # noqa: F401
                    save_trace, trace_arrays)


@dataclass
class PolicyRun:
    queue: np.ndarray  # (T,) Q(t), t = 1..T
    gap: np.ndarray  # (T,) best true mean in the queue minus the chosen pair's; NaN if empty
    explored: np.ndarray  # (T,) bool
    departures: np.ndarray  # (T,) bool: D(t)
    # a CQB policy's projections: how many ran and how many ended uncertified
    projection_counts: dict = field(default_factory=dict)


def run_policy(policy, trace: Trace, record: dict | None = None) -> PolicyRun:
    """Play one policy on a trace, through the round loop of cqb.sim._rounds
    (play_rounds): a built-in policy's compiled chooser, or any other policy's
    choose/observe called from it.

    ``record``, if a dict, receives what the loop actually consumed, for tests
    of the common random numbers: "arrivals" (A(t) of every round) and, per
    round with a decision, "rounds" (t), "new_arrival" (the flag the policy
    saw), "jobs" (the served arrival id) and "service" (the uniform U₂(t) used).
    The policy is then called through its Python methods.
    """
    the_core = core()
    chooser = getattr(policy, "chooser", None)
    if record is not None:
        record.update(arrivals=trace.arrivals.tolist(), rounds=[], new_arrival=[], jobs=[])
        chooser = the_core.PolicyChooser(policy, record)
    elif chooser is None:
        chooser = the_core.PolicyChooser(policy)
    outputs = the_core.play_rounds(chooser, trace.arrivals, trace.service_uniforms, trace.true_means)
    if record is not None:
        service = trace.service_uniforms
        record["service"] = [float(service[t - 1]) for t in record["rounds"]]
    return PolicyRun(*outputs, projection_counts=projection_counts(policy))


def projection_counts(policy) -> dict:
    """A CQB policy's estimator's projections (``projections``) and those whose
    solve ended without a certified KKT point (``projection_unconverged``: a
    count to report, never to hide in a mean); empty for other policies."""
    estimator = getattr(getattr(policy, "scorer", None), "estimator", None)
    if estimator is None:
        return {}
    return {"projections": int(estimator.projections),
            "projection_unconverged": int(estimator.projection_unconverged)}


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


def draw(instance_spec: dict | Instance, horizon: int, seed: int):
    """(instance, spec, trace, Q*) of one (instance, horizon, seed): what a trace
    file stores (cqb.sim.trace), drawn in-process."""
    check_positive_int("horizon", horizon)
    seed = check_seed(seed)
    if isinstance(instance_spec, Instance):
        instance, spec = instance_spec, None
    else:
        instance, spec = instance_from_spec(instance_spec, stream(seed, "instance")), instance_spec
    trace = draw_trace(instance, horizon, seed)
    return instance, spec, trace, oracle_queue(trace)


def cached_trace(path, spec: dict, horizon: int, seed: int):
    """(instance, trace, Q*, content hash) from the trace cache ``path``: read
    when it holds the trace of this (spec, horizon, seed, simulation code);
    drawn and written there atomically when it is missing, stale or corrupt
    (its content is a function of its key: one line on stderr says which file
    was replaced, and why). Jobs of one seed that race write the same content,
    each by its own rename: a reader sees one whole file. A cache that cannot
    be written is a warning line (the run plays on the trace it drew)."""
    if os.path.exists(path):
        try:
            return load_trace(path, spec, horizon, seed)
        except (StaleTrace, CorruptTrace) as error:
            print(f"cqb: trace cache {path} {error.reason}: drawing it again", file=sys.stderr)
    instance, spec, trace, oracle_path = draw(spec, horizon, seed)
    try:
        digest = save_trace(path, instance, spec, horizon, seed, trace, oracle_path)
    except OSError as error:  # the run needs no cache: it plays on the trace it drew
        print(f"cqb: warning: cannot write the trace cache {path}: {error.strerror or error}", file=sys.stderr)
        digest = content_hash(trace_arrays(instance, trace, oracle_path))
    return instance, trace, oracle_path, digest


def simulate(instance_spec: dict | Instance, policy: str, policy_params: dict | None,
             horizon: int, seed: int, record: dict | None = None, *,
             blas_threads_pinned: bool = False, trace_file=None, trace_cache=None) -> RunResult:
    """One run: the policy and the oracle on the same trace of ``seed``.

    ``trace_file``: read the trace and Q* from this file (cqb.sim.trace,
    checked against the run) instead of drawing them; the run is the same bit
    for bit. ``trace_cache``: the same through :func:`cached_trace` (read, or
    drawn and written there). ``record``, if a dict, gets "policy" and "oracle": what each run
    consumed (see :func:`play`), so a test can check that both faced the same
    trace. ``blas_threads_pinned``: the caller set BLAS to one thread before
    numpy was imported (cqb.jobs.run_command.pin_blas_to_one_thread), so threadpoolctl is
    not needed."""
    get_spec(policy)  # unknown names fail before any work
    check_positive_int("horizon", horizon)
    seed = check_seed(seed)
    if trace_file is not None and trace_cache is not None:
        raise ValueError("give a trace file or a trace cache, not both")
    if trace_file is not None or trace_cache is not None:
        if isinstance(instance_spec, Instance):
            raise ValueError("a trace file is checked against an instance spec, not an Instance")
        spec = instance_spec
        if trace_file is not None:
            instance, trace, oracle_path, trace_hash = load_trace(trace_file, spec, horizon, seed)
        else:
            instance, trace, oracle_path, trace_hash = cached_trace(trace_cache, spec, horizon, seed)
    else:
        instance, spec, trace, oracle_path = draw(instance_spec, horizon, seed)
        trace_hash = content_hash(trace_arrays(instance, trace, oracle_path))
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
            oracle_queue_lengths = oracle_path
    metadata = {
        "policy": policy,
        "policy_params": resolved,
        "instance_spec": spec,
        "instance": {**instance.summary(), **instance.diagnostics(trace.contexts)},
        "seed": seed,
        "horizon": horizon,
        "arrivals": int(trace.arrivals.sum()),
        "trace_hash": trace_hash,
        "package_version": __version__,
        **run.projection_counts,
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
