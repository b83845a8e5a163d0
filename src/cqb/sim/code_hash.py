"""A hash of the simulation code, so the pipeline reruns simulations when it changes.

The hash covers every source file of this subpackage (``cqb.sim``) and nothing
else: the subpackage holds exactly what ``cqb run`` executes to produce a run
file and imports nothing from the rest of ``cqb`` (tests/test_layers.py), so
adding a module here needs no list to be kept, and editing the analysis,
plotting, data or pipeline code reruns no simulation.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

SIMULATION_ROOT = Path(__file__).parent
# Sources only (the kernels' .pxd declarations are source): build products (the
# compiled kernels' .so, __pycache__) differ between machines that run the same code.
SOURCE_SUFFIXES = (".py", ".pxd")


def source_files(root: Path) -> list[Path]:
    """The hashed files under ``root``, by relative path."""
    return sorted((path for path in Path(root).rglob("*")
                   if path.suffix in SOURCE_SUFFIXES and path.is_file() and "__pycache__" not in path.parts),
                  key=lambda path: path.relative_to(root).as_posix())


def code_hash(root: Path) -> str:
    """sha256 over the relative path and the bytes of every source file under ``root``."""
    digest = hashlib.sha256()
    for path in source_files(root):
        content = path.read_bytes()
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0%d\0" % len(content))  # lengths keep path/content boundaries unambiguous
        digest.update(content)
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def simulation_code_hash() -> str:
    """The code hash of this installed subpackage (what run files record)."""
    return code_hash(SIMULATION_ROOT)
