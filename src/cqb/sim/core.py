"""The compiled simulation core (cqb.sim._core), checked to be built from the
_core.py beside it: the file the code hash covers. A stale build would run
other code than the run files record.

Without a build (a source checkout that was never installed) the core is
refused, unless CQB_UNCOMPILED=1 asks for _core.py run as plain Python: the
same code, ~100× slower, for debugging."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

UNCOMPILED_VARIABLE = "CQB_UNCOMPILED"
SOURCE = Path(__file__).with_name("_core.py")
BUILD_RECORD = SOURCE.with_suffix(".sha256")  # written by setup.py beside the compiled module

_CORE = None


def core():
    """The module cqb.sim._core: compiled and current, or uncompiled where
    CQB_UNCOMPILED=1; ImportError with the remedy otherwise."""
    global _CORE
    if _CORE is None:
        from . import _core

        if not _core.COMPILED:
            if os.environ.get(UNCOMPILED_VARIABLE) != "1":
                raise ImportError("cqb.sim._core is not compiled: run `pip install -e .` (needs a C compiler and "
                                  f"Cython), or set {UNCOMPILED_VARIABLE}=1 to run it as plain Python (slow)")
        else:
            built = BUILD_RECORD.read_text().strip() if BUILD_RECORD.exists() else None
            if built != hashlib.sha256(SOURCE.read_bytes()).hexdigest():
                raise ImportError(f"cqb.sim._core was compiled from another version of {SOURCE}: "
                                  "rebuild it with `pip install -e .`")
        _CORE = _core
    return _CORE
