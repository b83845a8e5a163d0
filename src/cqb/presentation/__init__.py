"""How figures and tables show things: policies' display names, colours,
listing order and the rates their theorems state.

Presentation lives outside the simulation package, so its code hash (and with
it every run file) does not change when a curve is recoloured or a legend
reworded. Entries are keyed by the policy's registered name; a plugin declares
its own through ``cqb.policies.register_policy``.
"""

from .policy_styles import (
    DISPLAY_NAMES,
    PLUGIN_ORDER,
    PolicyStyle,
    TheoremRate,
    declare_style,
    display_name,
    in_listing_order,
    policy_colour,
    policy_style,
    theorem_rate,
)

__all__ = [
    "DISPLAY_NAMES", "PLUGIN_ORDER", "PolicyStyle", "TheoremRate", "declare_style", "display_name",
    "in_listing_order", "policy_colour", "policy_style", "theorem_rate",
]
