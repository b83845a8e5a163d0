"""The compiled kernel (src/cqb/sim/_kernel.c); everything else is in pyproject.toml."""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "src/cqb/sim/_kernel.c"
# Baked into the module, so that cqb refuses a build older than the source it hashes.
SOURCE_HASH = hashlib.sha256((Path(__file__).parent / SOURCE).read_bytes()).hexdigest()

setup(ext_modules=[Extension(
    "cqb.sim._kernel", [SOURCE],
    define_macros=[("KERNEL_SOURCE_HASH", f'"{SOURCE_HASH}"')],
    # No FMA contraction: the same sums on every x86-64/arm64 target (docs/benchmarks.md).
    extra_compile_args=["-O2", "-ffp-contract=off"],
)])
