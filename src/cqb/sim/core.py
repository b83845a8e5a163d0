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

BLAS_SOURCE = SOURCE.with_name("_blas.py")  # cqb.sim._blas: loaded by the core only for large d
BLAS_BUILD_RECORD = BLAS_SOURCE.with_suffix(".sha256")

_CORE = None
_BLAS = None


def check_build(module, source: Path, record: Path) -> None:
    """ImportError unless the compiled ``module`` was built from ``source`` as
    it is now (its hash in ``record``)."""
    built = record.read_text().strip() if record.exists() else None
    if built != hashlib.sha256(source.read_bytes()).hexdigest():
        raise ImportError(f"{module.__name__} was compiled from another version of {source}: "
                          "rebuild it with `pip install -e .`")


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
            check_build(_core, SOURCE, BUILD_RECORD)
        _CORE = _core
    return _CORE


def blas_module():
    """The module cqb.sim._blas (the core's BLAS/LAPACK algebra, compiled
    only), checked to be current like the core; imported at its first use.

    Loading it pins every BLAS library of the process to one thread, for
    good: the estimator's matrices are small (multithreaded BLAS was measured
    ~10× slower at d = 120 on a loaded machine), and one thread makes its
    sums the same bits whatever the number of cores or threads. A caller
    that wants threaded BLAS afterwards sets it with threadpoolctl."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import threadpool_limits

        from . import _blas

        check_build(_blas, BLAS_SOURCE, BLAS_BUILD_RECORD)
        threadpool_limits(limits=1, user_api="blas")  # scipy.linalg's BLAS, loaded just now, included
        _BLAS = _blas
    return _BLAS
