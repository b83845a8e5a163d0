"""Policy styles: the name, colour, listing rank and theorem rate of each
policy in every figure and table, keyed by its registered name."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ..sim.policies.registry import RegistryView, ensure_known, policy_registry

PLUGIN_ORDER = 1000  # plugins list after every built-in policy


@dataclass(frozen=True)
class TheoremRate:
    """The regret rate a policy's theorem states (the paper's Theorems 5.5
    and 6.3), up to constants: T^exponent · (ln T)^log_power (Õ(·) rates drop
    their log factors). log²T is not a power: its local log–log slope is
    2/ln T."""

    label: str
    exponent: float = 0.0
    log_power: int = 0

    def local_slope(self, horizon: float) -> float:
        """d ln(rate) / d ln T at ``horizon``."""
        return self.exponent + (self.log_power / math.log(horizon) if self.log_power else 0.0)

    def curve(self, horizons: np.ndarray) -> np.ndarray:
        """The rate's shape at ``horizons``, 1 at the first."""
        horizons = np.asarray(horizons, dtype=float)
        shape = np.ones_like(horizons)
        if self.exponent:
            shape = (horizons / horizons[0]) ** self.exponent
        if self.log_power:
            shape = shape * (np.log(horizons) ** self.log_power / math.log(horizons[0]) ** self.log_power)
        return shape


@dataclass(frozen=True)
class PolicyStyle:
    """How a policy is shown: its name in figures, its colour (None: the
    figure picks one), its listing rank and the rate its theorem states."""

    display_name: str
    colour: str | None = None
    order: int = PLUGIN_ORDER
    rate: TheoremRate | None = None


_styles: dict[str, PolicyStyle] = {}


def declare_style(name: str, display_name: str, *, colour: str | None = None, order: int = PLUGIN_ORDER,
                  rate: TheoremRate | None = None) -> PolicyStyle:
    """Declare how policy ``name`` is shown (once per name)."""
    if name in _styles:
        raise ValueError(f"policy {name!r} already has a style")
    _styles[name] = style = PolicyStyle(display_name, colour, order, rate)
    return style


def policy_style(name: str) -> PolicyStyle | None:
    """The declared style of ``name``, or None (plugins loaded on a miss)."""
    if name not in _styles:
        ensure_known(name)
    return _styles.get(name)


def display_name(name: str) -> str:
    """The name figures show for ``name`` (the name itself when undeclared)."""
    style = policy_style(name)
    return style.display_name if style else name


def policy_colour(name: str) -> str | None:
    """The policy's colour in every figure (None: the figure picks one)."""
    style = policy_style(name)
    return style.colour if style else None


def theorem_rate(name: str) -> TheoremRate | None:
    """The rate the policy's theorem states, or None."""
    style = policy_style(name)
    return style.rate if style else None


def in_listing_order(names: Iterable[str]) -> list[str]:
    """``names`` by listing rank; equal ranks (plugins) keep their given order."""
    return sorted(names, key=lambda name: (policy_style(name) or PolicyStyle(name)).order)


class _DisplayNames(Mapping):
    """Registered policy → display name, in listing order, plugins included."""

    def __init__(self, registry: RegistryView):
        self._registry = registry

    def __getitem__(self, name):
        if name not in self._registry:
            raise KeyError(name)
        return display_name(name)

    def __iter__(self):
        return iter(in_listing_order(list(self._registry)))

    def __len__(self):
        return len(self._registry)

    def __contains__(self, name):
        return name in self._registry

    def __repr__(self):
        return repr(dict(self.items()))


DISPLAY_NAMES: Mapping[str, str] = _DisplayNames(policy_registry())

# The built-in policies (cqb.sim.policies), in listing order.
for _rank, (_name, _display, _colour, _rate) in enumerate([
    ("random", "Random", "#7f7f7f", None),
    ("oracle", "Optimal", "#2ca02c", None),
    ("cqb_eps", "CQB-ε", "#d62728", TheoremRate("Õ(T^(−1/4)) (paper, CQB-ε)", exponent=-0.25)),
    ("cqb_opt", "CQB-Opt", "#1f77b4", TheoremRate("O(log²T) (paper, CQB-Opt)", log_power=2)),
    ("cqb_eps_opt", "CQB-ε-Opt", "#9467bd", None),
    ("cqb_ts", "CQB-TS", "#8c564b", None),
    ("q_ucb", "Q-UCB", "#e377c2", None),
    ("q_ths", "Q-ThS", "#bcbd22", None),
    ("cqb_eta2", "CQB-η-2", "#17becf", TheoremRate("Õ(T^(−1/2)) (Bae & Lee 2026, CQB-η-2)", exponent=-0.5)),
]):
    declare_style(_name, _display, colour=_colour, order=_rank, rate=_rate)
