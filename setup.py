"""The compiled parts: the simulation kernels (src/cqb/sim/_*.py with their
.pxd files, listed in cqb.sim.core.BUILT_MODULES, compiled by Cython in pure-Python
mode) and the job client of the run server
(src/cqb/jobs/client.c, an executable beside its source); everything else is
in pyproject.toml."""

import hashlib
import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
SIM_FOLDER = ROOT / "src" / "cqb" / "sim"


def sim_core_module():
    """cqb.sim.core, loaded from its file (it imports only the standard
    library): the list of kernels and their hash, defined once there."""
    spec = importlib.util.spec_from_file_location("cqb_sim_core_for_setup", SIM_FOLDER / "core.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SIM_CORE = sim_core_module()
CLIENT_SOURCE = "src/cqb/jobs/client.c"
CLIENT_NAME = "job-client"  # cqb.jobs.client.CLIENT_BINARY


def core_extension():
    import numpy
    from Cython.Build import cythonize

    # numpy's static library of its random distributions (numpy/random/lib), the documented way to
    # call them from C: the choosers draw through it (cqb.sim._choosers.Draws)
    random_lib = str(Path(numpy.__file__).parent / "random" / "lib")
    return cythonize(
        # numpy's headers: the bit generator's struct (numpy/random/bitgen.h) the sampler reads
        [Extension(f"cqb.sim.{name}", [f"src/cqb/sim/{name}.py"], include_dirs=[numpy.get_include()],
                   library_dirs=[random_lib], libraries=["npyrandom", "m"],
                   # No FMA contraction: the same sums on every x86-64/arm64 target.
                   extra_compile_args=["-O3", "-ffp-contract=off"])
         for name in SIM_CORE.BUILT_MODULES],
        include_path=["src"],  # where `cython.cimports.cqb.sim.<kernel>` finds the .pxd files
        build_dir="build/cython",  # the generated C stays out of the source tree
        compiler_directives={"language_level": 3, "boundscheck": False, "wraparound": False,
                             "initializedcheck": False, "cdivision": True, "embedsignature": True},
    )


class BuildCoreAndJobClient(build_ext):
    """The kernels, their build record, then the job client with the same
    compiler. A client that does not build is a warning, not a failed
    install: without it the workflow's jobs run `cqb run` (docs/jobs.md)."""

    def run(self):
        super().run()
        from setuptools.errors import BaseError as DistutilsError, CCompilerError

        # where the extensions' package lands: the source tree for an editable install. The
        # record, one hash of every kernel's sources, lets cqb refuse a build older than them.
        sim_folder = Path(self.get_ext_fullpath(f"cqb.sim.{SIM_CORE.KERNELS[0]}")).parent
        (sim_folder / SIM_CORE.BUILD_RECORD.name).write_text(SIM_CORE.kernels_hash(SIM_FOLDER) + "\n")
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
