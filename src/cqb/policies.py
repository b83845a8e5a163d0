"""The public policy API for plugins: ``from cqb.policies import register_policy``.

A plugin declares a policy in one place: what the simulation needs (its name,
parameter dataclass and factory: :mod:`cqb.sim.policies`, under the code
hash) and how figures show it (display name, colour, listing rank, theorem
rate: :mod:`cqb.presentation`, outside the hash). Code inside ``cqb`` imports
from those two packages.
"""

from __future__ import annotations

from .presentation import DISPLAY_NAMES, PLUGIN_ORDER, TheoremRate, declare_style, policy_colour, theorem_rate
from .sim.policies import *  # noqa: F403
from .sim.policies import __all__ as _simulation_api
from .sim.policies import register_policy as _register_simulated


def register_policy(name: str, display_name: str, params: type, needs_truth: bool = False, *,
                    order: int = PLUGIN_ORDER, colour: str | None = None, rate: TheoremRate | None = None):
    """Decorator that registers a policy factory under ``name`` with its
    parameter dataclass, and declares its display name (and optionally its
    colour, listing rank and theorem rate) for every figure."""
    simulated = _register_simulated(name, params, needs_truth)

    def wrap(factory):
        simulated(factory)  # first: a name already registered leaves no style behind
        declare_style(name, display_name, colour=colour, order=order, rate=rate)
        return factory

    return wrap


__all__ = [*_simulation_api, "DISPLAY_NAMES", "PLUGIN_ORDER", "TheoremRate", "policy_colour", "theorem_rate"]
