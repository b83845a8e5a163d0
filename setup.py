"""The compiled parts: the kernel (src/cqb/sim/_kernel.c) and the job client
of the run server (src/cqb/jobs/client.c, an executable beside its source);
everything else is in pyproject.toml."""

import hashlib
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = "src/cqb/sim/_kernel.c"
# Baked into the module, so that cqb refuses a build older than the source it hashes.
SOURCE_HASH = hashlib.sha256((Path(__file__).parent / SOURCE).read_bytes()).hexdigest()
CLIENT_SOURCE = "src/cqb/jobs/client.c"
CLIENT_NAME = "job-client"  # cqb.jobs.client.CLIENT_BINARY


class BuildWithJobClient(build_ext):
    """The extension, then the job client with the same compiler. A client
    that does not build is a warning, not a failed install: without it the
    workflow's jobs run `cqb run` (docs/jobs.md)."""

    def run(self):
        super().run()
        from distutils.errors import CCompilerError, DistutilsError

        # where the extension's package lands: the source tree for an editable install
        folder = Path(self.get_ext_fullpath("cqb.jobs.job_client")).parent
        client_hash = hashlib.sha256((Path(__file__).parent / CLIENT_SOURCE).read_bytes()).hexdigest()
        try:
            objects = self.compiler.compile([CLIENT_SOURCE], output_dir=self.build_temp,
                                            macros=[("CLIENT_SOURCE_HASH", f'"{client_hash}"')],
                                            extra_postargs=["-O2"])
            self.compiler.link_executable(objects, CLIENT_NAME, output_dir=str(folder))
        except (CCompilerError, DistutilsError, OSError) as error:
            self.warn(f"the run server's job client was not built ({error}); jobs will use `cqb run`")


setup(
    ext_modules=[Extension(
        "cqb.sim._kernel", [SOURCE],
        define_macros=[("KERNEL_SOURCE_HASH", f'"{SOURCE_HASH}"')],
        # No FMA contraction: the same sums on every x86-64/arm64 target (docs/benchmarks.md).
        extra_compile_args=["-O2", "-ffp-contract=off"],
    )],
    cmdclass={"build_ext": BuildWithJobClient},
)
