"""The trace: a seed's common random numbers, drawn once and shared by every
policy run of that (instance, horizon, seed).

A :class:`Trace` holds everything random that is not the policy's own: the
arrival uniforms, the context of the i-th arrival and the service uniforms.
Every policy and the oracle face the same arrivals, contexts and service
coins, so Q(t) − Q*(t) per seed is a coupled, low-variance regret estimate.

A trace file is an ``.npz`` archive (no pickle) with what is costly to draw:
the arrivals' contexts (a synthetic instance's rows, from the rejection
sampler; a pool instance's row indices into its pool), θ* and the optimal
policy's queue Q*(t). A(t) and U₂(t) cost one uniform per round: they are
drawn again from their streams on loading (a fifth of the file at d = 5, for
a tenth of a millisecond). Its metadata names the instance spec, horizon,
seed and simulation code hash it was drawn for, and a content hash over the
arrays: a run file records that hash, and loading checks all of them, so a
stale or corrupt trace is one clear error, never a silently different run.
A trace cache (cqb.sim.simulate.cached_trace) draws again both a stale one
(:class:`StaleTrace`: sound, but drawn for another code, instance, horizon or
seed) and a corrupt one (:class:`CorruptTrace`: unreadable, truncated, or its
content not what its hash says); a trace file given by hand stays an error.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
import zlib
from dataclasses import dataclass

import numpy as np

from .code_hash import simulation_code_hash
from .core import core
from .instances import Instance, check_positive_int
from .rng import stream
from .streams import draw_contexts, instance_from_spec, stream_kind, stream_params

TRACE_FORMAT = 1
# The arrays a run plays on, in the order the content hash reads them; a trace
# file stores all but the first two (see the module docstring).
TRACE_KEYS = ("arrivals", "service_uniforms", "oracle_queue", "theta", "contexts", "context_rows")
STORED_KEYS = TRACE_KEYS[2:]


REMEDY = "; delete it and rerun"


class StaleTrace(ValueError):
    """A sound trace file drawn for another run: other simulation code, another
    instance (or pool), horizon or seed. ``reason`` says which."""

    def __init__(self, path, reason: str, remedy: str = REMEDY):
        super().__init__(f"trace file {path} {reason}{remedy}")
        self.reason = reason


class CorruptTrace(ValueError):
    """A trace file that cannot be read whole, or whose content is not what
    its hash says. ``reason`` says which."""

    def __init__(self, path, reason: str):
        super().__init__(f"trace file {path} {reason}{REMEDY}")
        self.reason = reason


@dataclass(frozen=True)
class Trace:
    arrivals: np.ndarray  # (T,) bool: A(t)
    contexts: np.ndarray  # (number of arrivals, d), in arrival order
    service_uniforms: np.ndarray  # (T,): U₂(t)
    true_means: np.ndarray  # (number of arrivals, K): μ(xᵀθ*_k) of each arrival
    context_rows: np.ndarray | None = None  # a pool instance's: the pool row of each arrival


def draw_arrivals(arrival_rate: float, horizon: int, seed: int) -> np.ndarray:
    """A(t) = [U₁(t) ≤ λ], t = 1..T."""
    return stream(seed, "arrivals").random(horizon) <= arrival_rate


def draw_service(horizon: int, seed: int) -> np.ndarray:
    """U₂(t), t = 1..T."""
    return stream(seed, "service").random(horizon)


def draw_trace(instance: Instance, horizon: int, seed: int) -> Trace:
    check_positive_int("horizon", horizon)
    arrivals = draw_arrivals(instance.arrival_rate, horizon, seed)
    rounds = np.flatnonzero(arrivals) + 1  # the round of each arrival: a stream may change at a round
    contexts, rows = draw_contexts(instance, rounds, horizon, stream(seed, "contexts"))
    service = draw_service(horizon, seed)
    return Trace(arrivals, contexts, service, instance.service_probabilities(contexts), rows)


def oracle_queue(trace: Trace) -> np.ndarray:
    """Q*(t), t = 1..T: the optimal policy π* (policies.baselines.OraclePolicy:
    the waiting job of highest best true mean, the earliest arrival on ties,
    at its best server) played on ``trace`` by the compiled core's heap
    (cqb.sim._rounds.oracle_queue_lengths) instead of a scan of the queue per
    round: the same queue path (tests/test_sim_simulate.py compares it with
    the oracle policy played through the round loop)."""
    best_mean = trace.true_means.max(axis=1) if trace.true_means.shape[0] else np.zeros(0)
    return core().oracle_queue_lengths(trace.arrivals, trace.service_uniforms, best_mean)


def trace_arrays(instance: Instance, trace, oracle_queue: np.ndarray) -> dict[str, np.ndarray]:
    """What a trace file stores: a pool instance's contexts as row indices (the
    pool file is an input of every run on it), a synthetic one's as rows."""
    pool = instance.family == "pool"
    return {
        "arrivals": np.ascontiguousarray(trace.arrivals, dtype=bool),
        "service_uniforms": np.ascontiguousarray(trace.service_uniforms, dtype=np.float64),
        "oracle_queue": np.ascontiguousarray(oracle_queue, dtype=np.int64),
        "theta": np.ascontiguousarray(instance.theta, dtype=np.float64),
        "contexts": (np.empty((0, instance.dim)) if pool
                     else np.ascontiguousarray(trace.contexts, dtype=np.float64)),
        "context_rows": (np.ascontiguousarray(trace.context_rows, dtype=np.int64) if pool
                         else np.empty(0, dtype=np.int64)),
    }


def content_hash(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over every array's name, dtype, shape and bytes (16 hex digits)."""
    digest = hashlib.sha256()
    for key in TRACE_KEYS:
        array = arrays[key]
        digest.update(f"{key}\0{array.dtype.str}\0{array.shape}\0".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


def _instance_record(instance: Instance) -> dict:
    return {"kind": instance.kind, "arrival_rate": instance.arrival_rate, "slack": instance.slack,
            "accept_rate": instance.accept_rate, "description": instance.description}


def spec_text(spec: dict | None) -> str:
    return json.dumps(spec, sort_keys=True)


def save_trace(path, instance: Instance, spec: dict | None, horizon: int, seed: int, trace,
               oracle_queue: np.ndarray) -> str:
    """Write the trace file atomically; returns its content hash."""
    from .runfile import write_npz

    arrays = trace_arrays(instance, trace, oracle_queue)
    digest = content_hash(arrays)
    metadata = {"format": TRACE_FORMAT, "instance_spec": spec, "horizon": int(horizon), "seed": int(seed),
                "code_hash": simulation_code_hash(), "content_hash": digest,
                "instance": _instance_record(instance)}
    # Stored, not deflated: the contexts are random doubles, which zlib cannot
    # shrink, and deflating them cost more than drawing them (docs/benchmarks.md).
    write_npz(path, {"metadata": np.array(json.dumps(metadata, sort_keys=True)),
                     **{key: arrays[key] for key in STORED_KEYS}}, None)
    return digest


def load_trace(path, spec: dict, horizon: int, seed: int):
    """(instance, trace, Q*, content hash) of a trace file, checked against the
    run that reads it; ValueError with one line naming the file otherwise
    (StaleTrace for a sound file drawn for another run)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = set(STORED_KEYS + ("metadata",)) - set(data.files)
            if missing:
                raise CorruptTrace(path, f"is not a trace file: it lacks {sorted(missing)}")
            arrays = {key: data[key] for key in STORED_KEYS}
            metadata = json.loads(str(data["metadata"]))
    except (zipfile.BadZipFile, EOFError, zlib.error, json.JSONDecodeError) as error:
        raise CorruptTrace(path, f"is corrupt or truncated ({error})") from None
    except ValueError as error:
        if str(error).startswith(f"trace file {path}"):
            raise
        raise CorruptTrace(path, f"is not an .npz trace file ({error})") from None
    if metadata.get("format") != TRACE_FORMAT or metadata.get("code_hash") != simulation_code_hash():
        raise StaleTrace(path, f"is stale: drawn by simulation code {metadata.get('code_hash')}, "
                               f"this is {simulation_code_hash()}")
    wanted = (spec_text(spec), int(horizon), int(seed))
    found = (spec_text(metadata["instance_spec"]), metadata["horizon"], metadata["seed"])
    if wanted != found:
        raise StaleTrace(path, f"was drawn for instance {found[0]}, T = {found[1]}, seed {found[2]}, "
                               f"not for this run's instance {wanted[0]}, T = {wanted[1]}, seed {wanted[2]}", "")
    record = metadata["instance"]
    arrays["arrivals"] = draw_arrivals(record["arrival_rate"], horizon, seed)
    arrays["service_uniforms"] = draw_service(horizon, seed)
    if content_hash(arrays) != metadata.get("content_hash"):
        raise CorruptTrace(path, f"is corrupt: its content hash is not {metadata.get('content_hash')}")
    kind = stream_kind(record["kind"])
    if kind.family == "pool":
        instance = instance_from_spec(spec, stream(seed, "instance"))  # loads the pool
        if instance.theta.tobytes() != arrays["theta"].tobytes():
            raise StaleTrace(path, f"is stale: its θ* is not that of the pool {spec.get('pool')}")
        rows = arrays["context_rows"]
        if rows.size and (rows.min() < 0 or rows.max() >= instance.pool.shape[0]):
            raise StaleTrace(path, f"is stale: its rows do not index the pool {spec.get('pool')}", "")
        contexts = instance.pool[rows]
    else:
        instance = Instance(record["kind"], arrays["theta"], record["arrival_rate"], record["slack"],
                            accept_rate=record["accept_rate"], description=record["description"],
                            stream_params=None if kind.name == kind.family else stream_params(kind, spec),
                            min_accept_rate=spec.get("min_accept_rate", 0.005))
        rows, contexts = None, arrays["contexts"]
    if contexts.shape[0] != int(arrays["arrivals"].sum()) or arrays["arrivals"].shape != (horizon,):
        raise CorruptTrace(path, "is corrupt: its arrivals and contexts do not match")
    trace = Trace(arrays["arrivals"], contexts, arrays["service_uniforms"],
                  instance.service_probabilities(contexts), rows)
    return instance, trace, arrays["oracle_queue"], metadata["content_hash"]
