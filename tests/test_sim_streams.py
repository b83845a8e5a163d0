"""cqb.sim.streams: the context-stream registry and its oblivious adversaries."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pytest
import yaml

from conftest import REPO
from cqb.errors import ConfigError
from cqb.config.schema import validate_config
from cqb.config.experiments import instance_id
from cqb.sim import streams
from cqb.sim.rng import stream
from cqb.sim.simulate import simulate
from cqb.sim.streams import STREAM_KINDS, draw_contexts, instance_from_spec, shift_round
from cqb.sim.trace import draw_trace

ADVERSARIAL = {"n_servers": 5, "dim": 5, "arrival_rate": 0.5, "slack": 0.1}
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


def synthetic(kind, **params):
    return {"kind": kind, **ADVERSARIAL, **params}


def pool_file(tmp_path, seed=0, n=40, d=3, k=3):
    rng = np.random.default_rng(seed)
    contexts = rng.standard_normal((n, d))
    contexts /= 1.5 * np.linalg.norm(contexts, axis=1, keepdims=True)
    path = tmp_path / "pool.npz"
    np.savez(path, contexts=contexts, theta=rng.uniform(-1, 1, (k, d)))
    return str(path)


def test_an_unknown_kind_is_a_schema_error_naming_the_known_kinds():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["experiments"]["synthetic_base"]["instance"]["kind"] = "subspace"
    with pytest.raises(ConfigError) as error:
        validate_config(config, SCHEMA)
    assert "'subspace'" in str(error.value) and all(name in str(error.value) for name in STREAM_KINDS)


def test_a_stream_parameter_of_another_kind_is_a_schema_error():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["experiments"]["synthetic_base"]["instance"]["noise_scale"] = 0.1  # an i.i.d. stream has none
    with pytest.raises(ConfigError, match="noise_scale"):
        validate_config(config, SCHEMA)


def _variants(kind):
    """One spec per stream parameter, each with that parameter moved off its default."""
    spec = synthetic(kind.name) if kind.family == "synthetic" else {"kind": kind.name, "pool": "data/x/instance.npz",
                                                                      "arrival_rate": 0.5}
    moved = {float: lambda value: value / 2 + 0.01, int: lambda value: value + 1}
    yield spec
    for item in fields(kind.params):
        default = getattr(kind.params(), item.name)
        if isinstance(default, str):  # another allowed value, where there is one
            others = [value for value in kind.choices.get(item.name, ()) if value != default]
            if others:
                yield dict(spec, **{item.name: others[0]})
            continue
        yield dict(spec, **{item.name: moved[type(default)](default)})


def test_instances_that_differ_in_any_stream_parameter_or_kind_never_share_a_run_path():
    ids = [instance_id(spec) for kind in STREAM_KINDS.values() for spec in _variants(kind)]
    assert len(ids) == len(set(ids)) > len(STREAM_KINDS)


def test_the_iid_streams_keep_their_run_paths():
    assert instance_id(synthetic("synthetic", min_accept_rate=0.005)) == "synth_K5_d5_lam0.5_eps0.1_acc0.005"
    assert instance_id({"kind": "pool", "pool": "data/processed/mnist/instance.npz", "arrival_rate": 0.15}) == \
        "pool_mnist_lam0.15"


@pytest.mark.parametrize("kind", ["subspace_shift", "deceptive_switch"])
@pytest.mark.parametrize("noise_scale", [0.0, 0.3])
def test_every_emitted_context_keeps_the_norm_and_the_slack(kind, noise_scale):
    for seed in range(3):
        instance = instance_from_spec(synthetic(kind, noise_scale=noise_scale), stream(seed, "instance"))
        trace = draw_trace(instance, 2000, seed)
        assert np.all(np.linalg.norm(trace.contexts, axis=1) <= 1 + 1e-12)
        assert np.all(trace.true_means.max(axis=1) >= instance.arrival_rate + instance.slack)


@pytest.mark.parametrize("name", [name for name, kind in STREAM_KINDS.items() if kind.family == "synthetic"])
def test_a_stream_that_breaks_the_slack_is_a_clear_error(monkeypatch, name):
    """The check's mutant: a sampler that shrinks one context toward 0 (no
    server then reaches λ + ϵ) is caught, naming the stream and the arrival;
    every synthetic stream is checked, the i.i.d. one too."""
    kind = STREAM_KINDS[name]
    original = kind.sampler

    def shrinking(instance, rounds, horizon, rng):
        contexts, rows = original(instance, rounds, horizon, rng)
        contexts = contexts.copy()
        contexts[7] *= 1e-3
        return contexts, rows

    monkeypatch.setitem(STREAM_KINDS, name, replace(kind, sampler=shrinking))
    instance = instance_from_spec(synthetic(name), stream(0, "instance"))
    with pytest.raises(ValueError, match=rf"stream '{name}' emitted a context that breaks the slack .*arrival 7"):
        draw_trace(instance, 500, 0)


def test_a_stream_that_cannot_keep_the_slack_says_so():
    # the orthogonal complement of the subspace rarely reaches λ + ϵ = 0.8 at d = 5
    spec = {"kind": "subspace_shift", "n_servers": 5, "dim": 5, "arrival_rate": 0.7, "slack": 0.1,
            "after": "complement", "subspace_dim": 1}
    failures = 0
    for seed in range(5):
        try:
            draw_trace(instance_from_spec(spec, stream(seed, "instance")), 400, seed)
        except ValueError as error:
            assert "cannot keep the slack" in str(error)
            failures += 1
    assert failures


def test_the_subspace_stream_is_singular_before_the_shift_and_spans_after():
    params = {"subspace_dim": 2, "shift_fraction": 0.5}
    instance = instance_from_spec(synthetic("subspace_shift", **params), stream(1, "instance"))
    rounds = np.arange(1, 1001)
    contexts, rows = draw_contexts(instance, rounds, 1000, stream(1, "contexts"))
    before = rounds < shift_round(instance.stream_params, 1000)
    assert rows is None and before.sum() == 499
    assert np.linalg.matrix_rank(contexts[before], tol=1e-9) == 2
    assert np.linalg.matrix_rank(contexts[~before], tol=1e-9) == 5


def test_the_deceptive_switch_changes_the_best_server_at_the_shift():
    instance = instance_from_spec(synthetic("deceptive_switch", shift_fraction=0.5), stream(2, "instance"))
    rounds = np.arange(1, 801)
    contexts, _ = draw_contexts(instance, rounds, 800, stream(2, "contexts"))
    best = np.argmax(contexts @ instance.theta.T, axis=1)
    early, late = set(best[:399]), set(best[399:])
    assert len(early) == len(late) == 1 and early != late


def test_a_sorted_pool_presents_the_shuffled_pools_rows_in_another_order(tmp_path):
    path = pool_file(tmp_path)
    shuffled = instance_from_spec({"kind": "pool", "pool": path, "arrival_rate": 0.5}, stream(0, "instance"))
    ordered = instance_from_spec({"kind": "sorted_pool", "pool": path, "arrival_rate": 0.5}, stream(0, "instance"))
    rounds = np.arange(1, 301)
    control, control_rows = draw_contexts(shuffled, rounds, 300, stream(4, "contexts"))
    contexts, rows = draw_contexts(ordered, rounds, 300, stream(4, "contexts"))
    assert sorted(rows) == sorted(control_rows) and not np.array_equal(rows, control_rows)
    np.testing.assert_array_equal(contexts, ordered.pool[rows])  # rows are the pool's, unchanged
    best = np.argmax(contexts @ ordered.theta.T, axis=1)
    assert np.all(np.diff(best) >= 0)


def test_every_policy_and_the_oracle_play_one_adversarial_trace():
    """The coupling survives: the adversary is fixed before the run, so two
    policies of a seed see the same contexts and the same Q*(t)."""
    spec = synthetic("deceptive_switch", noise_scale=0.2)
    first, second = simulate(spec, "cqb_opt", None, 600, 3), simulate(spec, "random", None, 600, 3)
    np.testing.assert_array_equal(first.oracle_queue, second.oracle_queue)
    assert first.metadata["trace_hash"] == second.metadata["trace_hash"]
    again = simulate(spec, "cqb_opt", None, 600, 3)
    np.testing.assert_array_equal(first.queue, again.queue)


def test_the_adversarial_instance_shares_the_iid_controls_theta():
    control = instance_from_spec(synthetic("synthetic"), stream(5, "instance"))
    for kind in ("subspace_shift", "deceptive_switch"):
        adversarial = instance_from_spec(synthetic(kind), stream(5, "instance"))
        assert adversarial.theta.tobytes() == control.theta.tobytes()


def test_streams_declare_unique_names_and_tags_and_a_known_family():
    tags = [kind.tag for kind in STREAM_KINDS.values()]
    assert len(set(tags)) == len(tags)
    assert {kind.family for kind in STREAM_KINDS.values()} <= set(streams.FAMILIES)
    assert list(STREAM_KINDS)[:2] == ["synthetic", "pool"]
    with pytest.raises(ValueError, match="already declared"):
        streams.declare_stream("pool", "pool", streams.NoStreamParams, "other", "")(lambda *args: None)


def test_the_reconstruction_notes_state_each_stream_parameters_default():
    """docs/reconstruction.md lists every adversarial stream's parameter with
    the dataclass's default (the one place the value is defined)."""
    text = (REPO / "docs" / "reconstruction.md").read_text()
    section = text[text.index("## Adversarial contexts"):]
    wording = {"shift_fraction": lambda value: f"⌈{value:g} T⌉", "subspace_dim": lambda value: f"{value} dimensions",
               "noise_scale": lambda value: f"σ = {value:g}", "order_by": lambda value: value.replace("_", " "),
               "after": {"whole": "anywhere on the sphere", "complement": "the orthogonal complement"}.get}
    for kind in STREAM_KINDS.values():
        for item in fields(kind.params):
            row = next(line for line in section.splitlines() if f"`{item.name}`" in line)
            assert wording[item.name](getattr(kind.params(), item.name)) in row.split("|")[2], item.name
