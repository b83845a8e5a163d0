"""Replay one run of this checkout with its BLAS path switched off (the core's
own loops at every d, cqb.sim._algebra.DenseAlgebra) and with it on, and say
which run file each replay reproduces: a run whose old path comes back with
the loops moved because of BLAS's summation order, nothing else.

    python -m bench.blas_replay INSTANCE_JSON POLICY PARAMS_JSON HORIZON SEED OLD_RUN NEW_RUN

INSTANCE_JSON, POLICY and PARAMS_JSON as the run's `cqb run` command line has
them (Snakemake's log keeps it); OLD_RUN and NEW_RUN the two trees' run files.
"""

from __future__ import annotations

import json
import sys

import numpy as np

import cqb.sim.core as core
from cqb.sim.simulate import simulate


class _Loops:
    """Stands in for cqb.sim._blas: its algebra is the loops'."""

    def BlasAlgebra(self):
        from cqb.sim._algebra import DenseAlgebra

        return DenseAlgebra()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 7:
        print(__doc__.strip().splitlines()[-4], file=sys.stderr)
        return 2
    spec, policy, params = json.loads(argv[0]), argv[1], json.loads(argv[2])
    horizon, seed = int(argv[3]), int(argv[4])
    old, new = np.load(argv[5])["queue"], np.load(argv[6])["queue"]
    blas = core.blas_module
    for mode in ("BLAS on", "BLAS off"):
        core.blas_module = blas if mode == "BLAS on" else _Loops  # dense_algebra looks it up at each call
        queue = np.asarray(simulate(spec, policy, params, horizon, seed).queue)
        print(f"{mode}: the new run file's path {np.array_equal(queue, new)}, the old one's {np.array_equal(queue, old)}")
    core.blas_module = blas
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
