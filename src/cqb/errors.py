"""The error a bad config value raises, below every layer that checks one."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad config value; the message names the key and the value."""


def config_error(key, value, why):
    shown = repr(value)
    raise ConfigError(f"invalid config value {key} = {shown if len(shown) < 200 else shown[:200] + '…'}: {why}")
