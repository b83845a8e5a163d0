"""One seed tree per run, with named child streams.

Each stream is ``SeedSequence(seed, spawn_key=(index,))`` with a fixed index
per name, so adding a stream later never shifts an existing one, and no stream
is ever derived from ``seed + i`` or from global state.
"""

from __future__ import annotations

import numpy as np

STREAM_NAMES = ("instance", "arrivals", "contexts", "service", "policy")


def check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def stream(seed: int, name: str) -> np.random.Generator:
    """The generator of one named stream of the seed tree."""
    if name not in STREAM_NAMES:
        raise ValueError(f"unknown random stream {name!r}; known: {', '.join(STREAM_NAMES)}")
    sequence = np.random.SeedSequence(check_seed(seed), spawn_key=(STREAM_NAMES.index(name),))
    return np.random.Generator(np.random.PCG64(sequence))


def seed_streams(seed: int) -> dict[str, np.random.Generator]:
    """All named streams of a seed, as fresh generators."""
    return {name: stream(seed, name) for name in STREAM_NAMES}
