"""The compiled parts: the simulation core (src/cqb/sim/_core.py, compiled by
Cython in pure-Python mode) and the job client of the run server
(src/cqb/jobs/client.c, an executable beside its source); everything else is
in pyproject.toml."""

import hashlib
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
CORE_SOURCE = "src/cqb/sim/_core.py"
# Written beside the compiled module, so that cqb refuses a build older than
# the source it hashes (cqb.sim.core).
CORE_BUILD_RECORD = "src/cqb/sim/_core.sha256"
# The core's BLAS/LAPACK algebra (scipy.linalg.cython_blas/cython_lapack), a
# module of its own so that only the runs that use it load scipy.linalg.
BLAS_SOURCE = "src/cqb/sim/_blas.py"
CLIENT_SOURCE = "src/cqb/jobs/client.c"
CLIENT_NAME = "job-client"  # cqb.jobs.client.CLIENT_BINARY


def core_extension():
    import numpy
    from Cython.Build import cythonize

    # No FMA contraction: the same sums on every x86-64/arm64 target.
    flags = ["-O3", "-ffp-contract=off"]
    return cythonize(
        # numpy's headers: the bit generator's struct (numpy/random/bitgen.h) the sampler reads
        [Extension("cqb.sim._core", [CORE_SOURCE], include_dirs=[numpy.get_include()], extra_compile_args=flags),
         Extension("cqb.sim._blas", [BLAS_SOURCE], extra_compile_args=flags)],
        build_dir="build/cython",  # the generated C stays out of the source tree
        compiler_directives={"language_level": 3, "boundscheck": False, "wraparound": False,
                             "initializedcheck": False, "cdivision": True, "embedsignature": True},
    )


class BuildCoreAndJobClient(build_ext):
    """The core, its build record, then the job client with the same
    compiler. A client that does not build is a warning, not a failed
    install: without it the workflow's jobs run `cqb run` (docs/jobs.md)."""

    def run(self):
        super().run()
        from distutils.errors import CCompilerError, DistutilsError

        # where the extension's package lands: the source tree for an editable install
        sim_folder = Path(self.get_ext_fullpath("cqb.sim._core")).parent
        for source in (CORE_SOURCE, BLAS_SOURCE):
            source_hash = hashlib.sha256((ROOT / source).read_bytes()).hexdigest()
            (sim_folder / Path(source).with_suffix(".sha256").name).write_text(source_hash + "\n")
        folder = Path(self.get_ext_fullpath("cqb.jobs.job_client")).parent
        client_hash = hashlib.sha256((ROOT / CLIENT_SOURCE).read_bytes()).hexdigest()
        try:
            objects = self.compiler.compile([CLIENT_SOURCE], output_dir=self.build_temp,
                                            macros=[("CLIENT_SOURCE_HASH", f'"{client_hash}"')],
                                            extra_postargs=["-O2"])
            self.compiler.link_executable(objects, CLIENT_NAME, output_dir=str(folder))
        except (CCompilerError, DistutilsError, OSError) as error:
            self.warn(f"the run server's job client was not built ({error}); jobs will use `cqb run`")


setup(ext_modules=core_extension(), cmdclass={"build_ext": BuildCoreAndJobClient})
