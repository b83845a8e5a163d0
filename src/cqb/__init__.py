"""Contextual queueing bandits: simulator, estimators and policies."""

__version__ = "0.1.0"


def code_hash() -> str:
    """A short hash of the simulation code (see :mod:`cqb.code_hash`)."""
    from .code_hash import simulation_code_hash

    return simulation_code_hash()
