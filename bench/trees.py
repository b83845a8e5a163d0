"""This checkout and another source tree to time beside it.

A baseline is any checkout of cqb (its root, or its ``src/`` folder) whose
compiled parts are built in place: a tree installed by ``pip install -e .``
is; any other tree is built by ``python setup.py build_ext --inplace`` in its
root (``--build`` of the tools that take a baseline). It is imported through
PYTHONPATH by this interpreter, so it must build for this Python."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
SOURCE = CHECKOUT / "src"

# A few rounds through the whole simulation: imports the tree's compiled parts
# (which refuse to load when stale or missing) and runs them.
SMOKE = ("from cqb.sim.simulate import simulate; simulate({'kind': 'synthetic', 'n_servers': 2, 'dim': 2, "
         "'arrival_rate': 0.5, 'slack': 0.1}, 'cqb_opt', None, 5, 0)")


def source_folder(tree: Path | str) -> Path:
    """The folder that holds the tree's package ``cqb`` (what goes on PYTHONPATH)."""
    tree = Path(tree).resolve()
    for folder in (tree, tree / "src"):
        if (folder / "cqb" / "__init__.py").is_file():
            return folder
    raise SystemExit(f"{tree}: not a cqb checkout (no src/cqb/) nor its src/ folder")


def build(tree: Path | str) -> None:
    """``python setup.py build_ext --inplace`` in the tree's root (the folder
    holding setup.py), as `pip install -e .` builds it."""
    root = source_folder(tree).parent
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=root,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"building {root} failed:\n{done.stderr[-3000:]}")


def check_runs(tree: Path | str) -> Path:
    """The tree's source folder, once a few rounds of a simulation ran from it
    in a fresh process; SystemExit saying how to build it otherwise."""
    src = source_folder(tree)
    done = subprocess.run([sys.executable, "-c", SMOKE], env={**os.environ, "PYTHONPATH": str(src)},
                          capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"{src} does not run a simulation ({last}); build it in place: "
                         f"cd {src.parent} && {sys.executable} setup.py build_ext --inplace (or pass --build)")
    return src


def baseline(tree: Path | str, build_first: bool = False) -> Path:
    """The source folder of a baseline tree, built first if asked, checked to run."""
    if build_first:
        build(tree)
    return check_runs(tree)
