"""The simulation's hot loops, written once in Python and compiled by Cython
(pure-Python mode) into a few kernel modules, one concern each, joined by the
.pxd files beside them (the declarations a kernel cimports from another):

* ``_algebra``: small dense algebra (μ, dot products, Cholesky, the Newton pass);
* ``_projection``: Filippi's projection onto the ball ‖θ‖ ≤ S;
* ``_estimator``: the K per-server regularised logistic MLEs (docs/model.md#the-per-server-logistic-estimator);
* ``_scorer``: the cached μ(xᵀθ_k), bonuses and UCB index of queued jobs;
* ``_choosers``: the policies' per-round decisions, and PolicyChooser, which
  calls a plugin policy's Python methods;
* ``_rounds``: the round loop (docs/model.md#the-queue-and-its-rounds), the only implementation of the queue
  dynamics that a policy runs through;
* ``_sampler``: the rejection sampler's draws and acceptance screen.

Arrays are flat C-contiguous views of the numpy arrays the Python side owns
(``features[k, i, a]`` is ``_features[(k * capacity + i) * d + a]``), so a test
reads every state as numpy. Contexts that are mostly zeros (one-hot, pixels)
take sparse paths: a zero term adds nothing to a sum, so skipping it changes
no result. Randomness is the policy's numpy Generator: the choosers and the
sampler call numpy's C functions on its bit generator, which give the values
(and stream) of the Generator's methods; any other rng is called through
its methods.

:func:`core` gives the kernels' public names in one namespace, checked to be
built from the sources beside them (the files the code hash covers): the build
records one SHA-256 of every kernel's .py and .pxd (setup.py), and a stale
build would run other code than the run files record. Without a build (a
source checkout that was never installed) the core is refused, unless
CQB_UNCOMPILED=1 asks for the sources run as plain Python: the same code,
~100× slower, for debugging (:func:`plain_kernels` loads them so even beside a
build, as the tests do)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types
from pathlib import Path

UNCOMPILED_VARIABLE = "CQB_UNCOMPILED"
# In cimport order: a kernel cimports only from those before it.
KERNELS = ("_algebra", "_projection", "_estimator", "_scorer", "_choosers", "_rounds", "_sampler")
# Compiled and recorded with the kernels, but imported only at first use (blas_module): it loads
# scipy.linalg (~0.2 s), which only large-d runs need.
BLAS_KERNEL = "_blas"
BUILT_MODULES = KERNELS + (BLAS_KERNEL,)
SOURCE_FOLDER = Path(__file__).parent
BUILD_RECORD = SOURCE_FOLDER / "_kernels.sha256"  # written by setup.py beside the compiled modules
PLAIN_PACKAGE = "cqb_sim_kernels_uncompiled"

_CORE = None
_BLAS = None


def kernel_sources(folder: Path) -> list[Path]:
    """Every compiled module's .py and, where it has one, its .pxd, in BUILT_MODULES order."""
    return [path for name in BUILT_MODULES for path in (folder / f"{name}.py", folder / f"{name}.pxd") if path.exists()]


def kernels_hash(folder: Path) -> str:
    """SHA-256 over the name, length and bytes of every kernel source under
    ``folder`` (setup.py records it for the build, :func:`core` checks it)."""
    digest = hashlib.sha256()
    for path in kernel_sources(folder):
        content = path.read_bytes()
        digest.update(b"%s\0%d\0" % (path.name.encode(), len(content)))
        digest.update(content)
    return digest.hexdigest()


def is_compiled(module) -> bool:
    return isinstance(module.__spec__.loader, importlib.machinery.ExtensionFileLoader)


def namespace(modules, compiled: bool):
    """The public names of the kernel modules in one namespace (their module
    imports and private names left out), with COMPILED."""
    names = {name: value for module in modules for name, value in vars(module).items()
             if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    return types.SimpleNamespace(**names, COMPILED=compiled, modules=tuple(modules))


def import_kernels() -> list:
    """The kernel modules of cqb.sim as imported (compiled where built)."""
    return [importlib.import_module(f"{__package__}.{name}") for name in KERNELS]


def plain_kernels(folder: Path = SOURCE_FOLDER):
    """The kernels' sources run as plain Python (Cython's shadow `cython`
    module makes the annotations no-ops), under the package name
    PLAIN_PACKAGE, so even beside a build: their relative imports find one
    another there, never the compiled modules."""
    package = types.ModuleType(PLAIN_PACKAGE)
    package.__path__ = []  # no finder looks here: the kernels are loaded below, in cimport order
    sys.modules[PLAIN_PACKAGE] = package
    modules = []
    for name in KERNELS:
        spec = importlib.util.spec_from_file_location(f"{PLAIN_PACKAGE}.{name}", folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules.append(module)
    return namespace(modules, False)


def core():
    """The kernels' namespace: compiled and current, or uncompiled where
    CQB_UNCOMPILED=1; ImportError with the remedy otherwise."""
    global _CORE
    if _CORE is None:
        modules = import_kernels()
        uncompiled = [module.__name__ for module in modules if not is_compiled(module)]
        if uncompiled:
            if os.environ.get(UNCOMPILED_VARIABLE) != "1":
                raise ImportError(f"{', '.join(uncompiled)} not compiled: run `pip install -e .` (needs a C compiler "
                                  f"and Cython), or set {UNCOMPILED_VARIABLE}=1 to run it as plain Python (slow)")
        else:
            built = BUILD_RECORD.read_text().strip() if BUILD_RECORD.exists() else None
            if built != kernels_hash(SOURCE_FOLDER):
                raise ImportError(f"cqb.sim's kernels were compiled from another version of their sources in "
                                  f"{SOURCE_FOLDER}: rebuild them with `pip install -e .`")
        _CORE = namespace(modules, not uncompiled)
    return _CORE


def blas_module():
    """The module cqb.sim._blas (the estimator's BLAS/LAPACK algebra, compiled
    only; its build checked by :func:`core`), imported at its first use.

    Loading it pins every BLAS library of the process to one thread, for
    good: the estimator's matrices are small (multithreaded BLAS ran 7-50×
    slower under load at d = 10-120), and one thread makes its sums the same
    bits whatever the number of cores or threads. A caller that wants
    threaded BLAS afterwards sets it with threadpoolctl."""
    global _BLAS
    if _BLAS is None:
        core()  # the build record covers this module too
        from threadpoolctl import threadpool_limits

        from . import _blas

        threadpool_limits(limits=1, user_api="blas")  # scipy.linalg's BLAS, loaded just now, included
        _BLAS = _blas
    return _BLAS
