"""The policy registry: lazy plugin loading, listing order, typed parameter
checks, and the simulation-code hash covering the subpackage."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import typing
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

from cqb.presentation import in_listing_order, policy_styles

import cqb.policies as policies  # the public API: the simulation's registry and the plugin decorator
from cqb.sim.code_hash import SIMULATION_ROOT, source_files
from cqb.sim.policies import registry
from cqb.sim.policies.registry import builtin_policies
from conftest import plugin_module

ENV = policies.PolicyEnv(n_servers=2, dim=2, horizon=100, arrival_rate=0.5, slack=0.1)
SRC = Path(registry.__file__).parents[4]


# ---------------------------------------------------------------- lazy plugins


def test_builtin_lookups_do_not_scan_entry_points_and_the_first_listing_or_miss_does_once():
    script = textwrap.dedent("""
        import sys
        import importlib.metadata as metadata
        calls = []
        real = metadata.entry_points
        def counting(*args, **kwargs):
            if kwargs.get("group") == "cqb.policies":
                calls.append(1)
            return real(*args, **kwargs)
        metadata.entry_points = counting
        import cqb.policies, cqb.sim.simulate
        assert calls == [], calls
        # what a simulation job of a built-in policy does: no scan
        for name in cqb.policies.builtin_policies():
            cqb.policies.get_spec(name); cqb.policies.policy_parameters(name)
            assert cqb.policies.DISPLAY_NAMES[name]
        cqb.sim.simulate.simulate({"kind": "synthetic", "n_servers": 2, "dim": 2, "arrival_rate": 0.5,
                               "slack": 0.1}, "cqb_opt", None, 5, 0)
        assert calls == [], calls
        # a name that is not built in: one scan, then none
        try:
            cqb.policies.get_spec("no_such_policy")
        except ValueError:
            pass
        assert calls == [1], calls
        cqb.policies.registered_policies(); list(cqb.policies.DISPLAY_NAMES); "other" in cqb.policies.DISPLAY_NAMES
        assert calls == [1], calls
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={"PYTHONPATH": str(SRC), "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("listing", [
    lambda: policies.registered_policies(),
    lambda: list(policies.DISPLAY_NAMES),
    lambda: len(policies.DISPLAY_NAMES),
    lambda: "not_built_in" in policies.DISPLAY_NAMES,
])
def test_listings_and_misses_scan_the_entry_points(monkeypatch, listing):
    calls = []
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group=None: calls.append(group) or [])
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    policies.get_spec("cqb_opt")
    assert calls == []
    listing()
    assert calls == ["cqb.policies"]


def _lookups():
    contexts, rng = np.zeros((1, 2)), np.random.default_rng(0)
    return {
        "registered_policies": lambda name: name in policies.registered_policies(),
        "get_spec": lambda name: policies.get_spec(name).name == name,
        "policy_parameters": lambda name: policies.policy_parameters(name) == {"width": 2},
        "make_policy": lambda name: policies.make_policy(name, ENV, contexts, rng)[1].width == 2,
        "DISPLAY_NAMES in": lambda name: name in policies.DISPLAY_NAMES,
        "DISPLAY_NAMES iteration": lambda name: name in list(policies.DISPLAY_NAMES),
        "DISPLAY_NAMES": lambda name: policies.DISPLAY_NAMES[name] == "Lazy plugin",
    }


@pytest.fixture
def fake_installed_plugin(tmp_path, monkeypatch, builtin_policies_only):
    """An installed plugin the registry has not loaded yet, the only one
    installed (the environment's own plugins left out); yields its policy name."""
    module, name = "cqb_test_lazy_plugin", "test_lazy_plugin"
    (tmp_path / f"{module}.py").write_text(plugin_module(name, "Lazy plugin", "width: int = 2"))
    monkeypatch.syspath_prepend(str(tmp_path))
    calls = []

    def entry_points(group=None):
        calls.append(group)
        return [EntryPoint("lazy", module, "cqb.policies")] if group == "cqb.policies" else []

    monkeypatch.setattr("importlib.metadata.entry_points", entry_points)
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    yield name, calls
    registry._specs.pop(name, None)
    policy_styles._styles.pop(name, None)
    sys.modules.pop(module, None)


@pytest.mark.parametrize("lookup", sorted(_lookups()))
def test_every_lookup_loads_the_plugins_first(fake_installed_plugin, lookup):
    name, calls = fake_installed_plugin
    assert name not in registry._specs  # not loaded before the lookup
    assert _lookups()[lookup](name)
    assert calls == ["cqb.policies"]
    _lookups()[lookup](name)
    assert calls == ["cqb.policies"]  # once


def test_plugins_list_after_the_builtins_in_their_listing_order(fake_installed_plugin):
    name, _ = fake_installed_plugin
    assert list(policies.registered_policies()) == [*builtin_policies(), name]
    assert list(policies.DISPLAY_NAMES) == [*in_listing_order(builtin_policies()), name]


def test_builtin_listing_order_is_unchanged():
    # the order `cqb policies` has always printed
    assert list(policies.DISPLAY_NAMES)[:9] == [
        "random", "oracle", "cqb_eps", "cqb_opt", "cqb_eps_opt", "cqb_ts", "q_ucb", "q_ths", "cqb_eta2"]


def test_a_broken_installed_plugin_fails_every_listing_but_not_a_builtin_lookup(monkeypatch):
    monkeypatch.setattr("importlib.metadata.entry_points",
                        lambda group=None: [EntryPoint("broken", "no_such_module_here", group)])
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    for _ in range(2):  # not silently missing after the first failure
        with pytest.raises(ImportError, match="'broken'"):
            policies.registered_policies()
        with pytest.raises(ImportError, match="'broken'"):
            policies.get_spec("maybe_the_plugins_policy")
    assert policies.get_spec("cqb_opt").name == "cqb_opt"  # never scans


# ---------------------------------------------------------------- typed checks


@pytest.mark.parametrize("policy, key, value, expected", [
    ("cqb_opt", "bonus_scale", "abc", "must be a number, got 'abc'"),
    ("cqb_opt", "reg", True, "must be a number, got True"),
    ("cqb_opt", "newton_max_iter", 25.0, "must be an integer, got 25.0"),
    ("cqb_opt", "projection", 3, "must be a string, got 3"),
    ("cqb_opt", "delta", "0.01", "must be a number or null, got '0.01'"),
    ("cqb_eps", "tau", 12.5, "must be an integer or null, got 12.5"),
    ("cqb_eps", "tau", "100", "must be an integer or null, got '100'"),
    ("cqb_eta2", "cutoff", False, "must be an integer or null, got False"),
    ("q_ucb", "explore_constant", None, "must be a number, got None"),
    ("q_ths", "explore_constant", [3], "must be a number, got [3]"),
])
def test_a_value_of_the_wrong_type_is_one_clear_line(policy, key, value, expected):
    with pytest.raises(ValueError) as error:
        policies.resolve_params(policy, {key: value}, ENV)
    assert str(error.value) == f"parameter {key} of policy {policy!r} {expected}"


@pytest.mark.parametrize("policy, values", [
    ("cqb_opt", {"reg": 1, "bonus_scale": np.float64(0.1), "newton_max_iter": np.int64(30), "delta": None}),
    ("cqb_eps", {"tau": 40, "explore_prob": 0, "phase1_server": "uniform"}),
    ("cqb_eta2", {"tau": 10, "cutoff": None, "eta": 0.02}),
    ("q_ucb", {"explore_constant": 2}),
])
def test_values_of_the_right_type_pass_unchanged(policy, values):
    resolved = policies.resolve_params(policy, values, ENV)
    for key, value in values.items():
        if value is not None:
            assert getattr(resolved, key) == value and type(getattr(resolved, key)) is type(value)


@dataclass(frozen=True)
class PluginParams:  # real (not string) annotations, as a plugin without the __future__ import has
    count: int = 3
    weight: float = 1.0
    label: str | None = None
    scale: typing.Optional[float] = None
    verbose: bool = False
    anything: object = None  # not a checked type: any value


@pytest.fixture
def plugin_policy():
    name = "test_typed_plugin"
    policies.register_policy(name, "Typed plugin", PluginParams)(lambda env, contexts, rng, params: object())
    yield name
    registry._specs.pop(name)
    policy_styles._styles.pop(name, None)


@pytest.mark.parametrize("key, value, expected", [
    ("count", 2.0, "an integer"),
    ("weight", "heavy", "a number"),
    ("label", 7, "a string or null"),
    ("scale", "big", "a number or null"),
    ("verbose", 1, "true or false"),
])
def test_plugin_parameters_are_checked_too(plugin_policy, key, value, expected):
    with pytest.raises(ValueError, match=rf"^parameter {key} of policy 'test_typed_plugin' must be {expected}, got "):
        policies.resolve_params(plugin_policy, {key: value}, ENV)


def test_plugin_parameters_of_the_right_type_pass(plugin_policy):
    values = {"count": 5, "weight": 2, "label": None, "scale": 0.5, "verbose": True, "anything": [1, "x"]}
    assert policies.resolve_params(plugin_policy, values, ENV) == PluginParams(**values)


def test_cli_reports_a_wrong_type_in_one_line(tmp_path, capsys):
    from cqb.cli import main

    out = tmp_path / "run.npz"
    assert main(["run", "--policy", "cqb_opt", "--seed", "0", "--horizon", "50",
                 "--set", "bonus_scale=abc", "--out", str(out)]) == 2
    assert capsys.readouterr().err == \
        "cqb: error: parameter bonus_scale of policy 'cqb_opt' must be a number, got 'abc'\n"
    assert not out.exists()


# ---------------------------------------------------------------- code hash


def test_the_code_hash_covers_every_policies_module():
    package = Path(registry.__file__).parent
    modules = {f"policies/{path.name}" for path in package.glob("*.py")}
    hashed = {path.relative_to(SIMULATION_ROOT).as_posix() for path in source_files(SIMULATION_ROOT)}
    assert modules == {name for name in hashed if name.startswith("policies/")}
    assert "policies.py" not in hashed  # the public re-export, cqb/policies.py, lies outside


# ---------------------------------------------------------------- registration details


def test_builtin_specs_keep_display_name_and_truth_flag():
    assert policies.get_spec("oracle").needs_truth is True
    assert policies.DISPLAY_NAMES["oracle"] == "Optimal"
    assert policies.get_spec("cqb_eps").needs_truth is False
    assert policies.DISPLAY_NAMES["cqb_eps"] == "CQB-ε"


def test_registering_a_taken_name_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^policy 'random' is already registered$"):
        policies.register_policy("random", "Random again", policies.NoParams)(lambda *args: None)
    assert policies.DISPLAY_NAMES["random"] == "Random"


def test_load_plugin_policies_returns_the_entry_point_names():
    assert registry.load_plugin_policies([EntryPoint("stdlib_math", "math", "cqb.policies")]) == ["stdlib_math"]


def test_registry_view_reads_and_writes_its_dict():
    data = {"a": 1}
    view = registry.RegistryView(data)
    view["b"] = 2
    assert view["a"] == 1 and data == {"a": 1, "b": 2}
    assert repr(view) == repr({"a": 1, "b": 2})


@pytest.fixture
def string_annotated_plugin(monkeypatch):
    """A plugin whose parameter annotations are strings (``from __future__ import
    annotations``) naming an alias of its own module; yields (policy name, module)."""
    import dataclasses
    import types as pytypes

    module = pytypes.ModuleType("cqb_test_string_annotations")
    module.Count = int  # only this module knows the name
    monkeypatch.setitem(sys.modules, module.__name__, module)
    params = dataclasses.make_dataclass("Params", [("count", "Count", 3), ("size", "int", 1)], frozen=True)
    params.__module__ = module.__name__
    name = "test_string_annotated_plugin"
    policies.register_policy(name, "String annotations", params)(lambda env, contexts, rng, params: object())
    yield name, module
    registry._specs.pop(name)
    policy_styles._styles.pop(name, None)


def test_string_annotations_resolve_in_the_plugins_module(string_annotated_plugin):
    name, _ = string_annotated_plugin
    with pytest.raises(ValueError, match=r"^parameter count of policy .* must be an integer, got 2.5$"):
        policies.resolve_params(name, {"count": 2.5}, ENV)


def test_string_annotations_of_an_unimported_module_resolve_to_builtins(string_annotated_plugin, monkeypatch):
    name, module = string_annotated_plugin
    monkeypatch.delitem(sys.modules, module.__name__)
    with pytest.raises(ValueError, match=r"^parameter size of policy .* must be an integer, got 'x'$"):
        policies.resolve_params(name, {"size": "x"}, ENV)
    policies.resolve_params(name, {"count": 2.5}, ENV)  # "Count" does not resolve: unchecked


def test_a_registered_spec_keeps_its_display_name_and_truth_flag_and_gets_every_argument():
    name, calls = "test_truth_plugin", []
    policies.register_policy(name, "Needs truth", policies.NoParams, needs_truth=True)(
        lambda *args, **kwargs: calls.append((args, kwargs)) or "policy")
    try:
        spec = policies.get_spec(name)
        assert (policies.DISPLAY_NAMES[name], spec.needs_truth) == ("Needs truth", True)
        contexts, rng, truth = np.eye(2), np.random.default_rng(0), np.full((2, 2), 0.5)
        assert policies.make_policy(name, ENV, contexts, rng, true_means=truth) == ("policy", policies.NoParams())
        ((args, kwargs),) = calls
        assert args[0] is ENV and args[1] is contexts and args[2] is rng and args[3] == policies.NoParams()
        assert kwargs == {"true_means": truth}
    finally:
        registry._specs.pop(name)
        policy_styles._styles.pop(name, None)


def test_unknown_policy_and_parameter_messages():
    with pytest.raises(ValueError) as error:
        policies.get_spec("nope")
    assert str(error.value) == f"unknown policy 'nope'; known policies: {', '.join(sorted(registry._specs))}"
    with pytest.raises(ValueError) as error:
        policies.resolve_params("q_ucb", {"explore": 1, "zeta": 2}, ENV)
    assert str(error.value) == ("unknown parameter(s) ['explore', 'zeta'] for policy 'q_ucb'; "
                                "its parameters: ['explore_constant']")
    with pytest.raises(ValueError) as error:
        policies.resolve_params("random", {"x": 1}, ENV)
    assert str(error.value) == "unknown parameter(s) ['x'] for policy 'random'; its parameters: none"


def test_make_policy_hands_the_oracle_the_truth_and_refuses_without_it():
    contexts = np.array([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"^policy 'oracle' needs the true service probabilities$"):
        policies.make_policy("oracle", ENV, contexts, np.random.default_rng(0))
    truth = np.array([[0.2, 0.9], [0.6, 0.1]])
    oracle, resolved = policies.make_policy("oracle", ENV, contexts, np.random.default_rng(0), true_means=truth)
    assert resolved == policies.NoParams()
    assert oracle.choose(1, np.array([0, 1]), True)[:2] == (0, 1)  # job 0 at server 1: the best pair


def test_every_given_parameter_is_type_checked_after_an_unchecked_one(plugin_policy):
    with pytest.raises(ValueError, match="^parameter count of policy"):
        policies.resolve_params(plugin_policy, {"anything": 1, "count": 2.0}, ENV)


def test_every_builtin_policy_has_its_own_rank_and_colour():
    styles = [policy_styles.policy_style(name) for name in builtin_policies()]
    assert len({style.order for style in styles}) == len(styles)
    assert all(style.colour for style in styles) and len({style.colour for style in styles}) == len(styles)
    assert all(style.order < policy_styles.PLUGIN_ORDER for style in styles)
