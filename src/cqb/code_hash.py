"""A hash of the simulation code, so the pipeline reruns simulations when it changes.

Only the modules a simulation runs are hashed: editing the aggregation,
plotting, data or rate-analysis code must not rerun any simulation.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

SIMULATION_MODULES = ("__init__.py", "rng.py", "instances.py", "estimation.py",
                      "policies/__init__.py", "policies/registry.py", "policies/parameters.py",
                      "policies/optimistic.py", "policies/baselines.py", "simulate.py", "io.py",
                      "_kernel.c")


@functools.lru_cache(maxsize=1)
def simulation_code_hash() -> str:
    digest = hashlib.sha256()
    root = Path(__file__).parent
    for name in SIMULATION_MODULES:
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update((root / name).read_bytes())
    return digest.hexdigest()[:16]
