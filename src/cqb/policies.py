"""The public policy API for plugins: ``from cqb.policies import register_policy``.

The policies live in the simulation core (:mod:`cqb.sim.policies`, under the
code hash); this module only re-exports them under their documented name, so
plugins written against it keep working. Code inside ``cqb`` imports from
``cqb.sim.policies``.
"""

from .sim.policies import *  # noqa: F403
from .sim.policies import __all__  # noqa: F401
