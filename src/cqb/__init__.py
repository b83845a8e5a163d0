"""Contextual queueing bandits: simulator, estimators and policies."""

__version__ = "0.1.0"
