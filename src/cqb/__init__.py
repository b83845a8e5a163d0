"""Contextual queueing bandits: simulator, estimators and policies."""

__version__ = "0.1.0"


def code_hash() -> str:
    """A short hash of the package source (see :mod:`cqb.code_hash`)."""
    from .code_hash import code_hash as _code_hash

    return _code_hash()
