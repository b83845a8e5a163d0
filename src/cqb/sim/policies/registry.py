"""The policy registry: names → factories, parameter resolution, plugins.

Policies register themselves with ``@register_policy``; the built-in ones when
``cqb.policies`` is imported, those of installed plugin packages (entry-point
group ``cqb.policies``) on the first listing or the first lookup of a name that
is not registered yet. A simulation job of a built-in policy therefore never
scans the installed distributions (importlib.metadata costs ~30 ms of start-up).
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import MutableMapping
from dataclasses import asdict, dataclass, fields
from typing import Callable, Protocol

import numpy as np

from .parameters import PolicyEnv

class Policy(Protocol):
    def choose(self, t: int, queue: np.ndarray, new_arrival: bool) -> tuple[int, int, bool]:
        """Pick (position in ``queue``, server, explored) for round t."""

    def observe(self, t: int, job: int, server: int, success: bool) -> None:
        """The outcome D(t) of serving arrival ``job`` at ``server``."""


@dataclass(frozen=True)
class PolicySpec:
    """Everything the simulation knows of a policy: its name, its parameter
    dataclass, the factory that builds it (a built-in one's chooser is
    compiled, cqb.sim.core) and whether it needs the true means. How figures
    show it (its name there, style, order, theorem rate) is presentation, kept
    outside the hashed simulation (cqb.presentation)."""

    name: str
    params: type
    factory: Callable
    needs_truth: bool = False


PLUGIN_GROUP = "cqb.policies"

_specs: dict[str, PolicySpec] = {}
_plugins_loaded = False


def _ensure_plugins_loaded() -> None:
    if not _plugins_loaded:
        load_plugin_policies()


def ensure_known(name) -> None:
    """Load the plugins unless ``name`` is already registered: a registered
    name cannot change by loading them (a plugin may not reuse a name)."""
    if name not in _specs:
        _ensure_plugins_loaded()


class RegistryView(MutableMapping):
    """A registry dict that loads the entry-point plugins before any read, so
    code iterating it (:func:`registered_policies`, the presentation's
    display names) does not miss them. Iteration is in registration order."""

    def __init__(self, data: dict):
        self._data = data

    def __getitem__(self, name):
        ensure_known(name)
        return self._data[name]

    def __setitem__(self, name, value):
        self._data[name] = value

    def __delitem__(self, name):
        ensure_known(name)
        del self._data[name]

    def __iter__(self):
        _ensure_plugins_loaded()
        return iter(list(self._data))

    def __len__(self):
        _ensure_plugins_loaded()
        return len(self._data)

    def __contains__(self, name):
        ensure_known(name)
        return name in self._data

    def __repr__(self):
        return repr(dict(self.items()))


def register_policy(name: str, params: type, needs_truth: bool = False):
    """Decorator that adds a policy factory to the registry (the fields of
    :class:`PolicySpec`). Plugins use ``cqb.policies.register_policy``, which
    also takes how figures show the policy."""

    def wrap(factory):
        if name in _specs:
            raise ValueError(f"policy {name!r} is already registered")
        _specs[name] = PolicySpec(name, params, factory, needs_truth)
        return factory

    return wrap


def policy_registry() -> RegistryView:
    """The live registry, name → spec (plugins load before any read)."""
    return RegistryView(_specs)


def registered_policies() -> dict[str, PolicySpec]:
    """Every registered policy, plugins included, by name, in registration order."""
    return dict(policy_registry().items())


def builtin_policies() -> tuple[str, ...]:
    """The built-in policies' names (those this package registers), in
    registration order, without loading plugins."""
    return tuple(name for name, spec in _specs.items() if spec.factory.__module__.startswith(__package__))


def get_spec(name: str) -> PolicySpec:
    ensure_known(name)
    if name not in _specs:
        raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(sorted(_specs))}")
    return _specs[name]


def policy_parameters(name: str) -> dict:
    """The parameters of a policy with their defaults."""
    return asdict(get_spec(name).params())


def resolve_params(name: str, params: dict | None, env: PolicyEnv):
    """The policy's parameter dataclass with user values and resolved defaults."""
    spec = get_spec(name)
    params = dict(params or {})
    known = {f.name for f in fields(spec.params)}
    unknown = set(params) - known
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)} for policy {name!r}; "
                         f"its parameters: {sorted(known) or 'none'}")
    _check_types(name, spec.params, params)
    values = spec.params(**params)
    return values.resolve(env) if hasattr(values, "resolve") else values


def make_policy(name: str, env: PolicyEnv, contexts: np.ndarray, rng: np.random.Generator,
                params: dict | None = None, true_means: np.ndarray | None = None):
    """Build policy ``name``; returns (policy, resolved parameter dataclass)."""
    spec = get_spec(name)
    resolved = resolve_params(name, params, env)
    if spec.needs_truth:
        if true_means is None:
            raise ValueError(f"policy {name!r} needs the true service probabilities")
        return spec.factory(env, contexts, rng, resolved, true_means=true_means), resolved
    return spec.factory(env, contexts, rng, resolved), resolved


# --------------------------------------------------------------------------- type checks


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _is_integer(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


# annotation → (check, what the error calls it)
_TYPE_CHECKS = {
    float: (_is_number, "a number"),
    int: (_is_integer, "an integer"),
    bool: (_is_bool, "true or false"),
    str: (lambda value: isinstance(value, str), "a string"),
}


def _expected(annotation):
    """(check, description) for a field annotation, or None when it is not
    one of float, int, bool, str, optionally ``| None``: those go unchecked."""
    # A union with exactly one member besides None is ``X | None`` (a union of
    # one type collapses to that type), so every union that gets past here is optional.
    optional = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    if optional:
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) != 1:
            return None
        annotation = members[0]
    matches = [kind for kind in _TYPE_CHECKS if annotation is kind]
    if not matches:
        return None
    check, description = _TYPE_CHECKS[matches[0]]
    if optional:
        return (lambda value: value is None or check(value)), description + " or null"
    return check, description


def _resolve_annotation(params_class: type, annotation):
    """A field's annotation as a type; string annotations (``from __future__
    import annotations``) are evaluated in the class's module. One that does
    not resolve (a plugin's own type) gives None: that field goes unchecked."""
    if not isinstance(annotation, str):
        return annotation
    module = sys.modules.get(params_class.__module__)
    try:
        return eval(annotation, dict(vars(module)) if module else {})
    except Exception:
        return None


def _check_types(policy: str, params_class: type, params: dict) -> None:
    """One clear line for a value of the wrong type, before it fails deep inside."""
    annotations = {field.name: field.type for field in fields(params_class)}
    for key, value in params.items():
        expected = _expected(_resolve_annotation(params_class, annotations[key]))
        if expected is None:
            continue
        check, description = expected
        if not check(value):
            raise ValueError(f"parameter {key} of policy {policy!r} must be {description}, got {value!r}")


# --------------------------------------------------------------------------- plugins


def load_plugin_policies(entry_points=None) -> list[str]:
    """Import the modules that installed packages declare under the entry-point
    group ``cqb.policies``; their ``@register_policy`` decorators register them.
    So a policy of your own package is known to the CLI, the simulator and every
    pipeline job without editing this repository::

        [project.entry-points."cqb.policies"]
        my_policies = "my_package.policies"

    Called once, on the first listing of the registry or the first lookup of
    a name not registered yet; ``entry_points`` (a list
    of ``importlib.metadata.EntryPoint``) loads those instead.
    """
    global _plugins_loaded
    installed = entry_points is None
    if installed:
        from importlib.metadata import entry_points as installed_entry_points

        _plugins_loaded = True  # before loading: a plugin may look up the registry
        entry_points = installed_entry_points(group=PLUGIN_GROUP)
    loaded = []
    for entry in entry_points:
        try:
            entry.load()
        except Exception as error:
            if installed:
                _plugins_loaded = False  # the next lookup raises again rather than miss it
            raise ImportError(f"policy plugin {entry.name!r} ({entry.value}) failed to import: {error}") from error
        loaded.append(entry.name)
    return loaded
