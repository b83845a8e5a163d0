"""The simulation core: everything ``cqb run`` executes to produce a run file.

the kernels (the hot loops, written once in Python and compiled by Cython
into one module per concern: ``_algebra``, ``_projection`` (Filippi's),
``_estimator``, ``_scorer`` (the cached scores), ``_choosers`` (the policies'
decisions), ``_rounds`` (the round loop), ``_sampler`` (the sampler's screen))
and ``core`` (their namespace and build check); ``rng`` (the
seed streams), ``instances`` (θ*, λ, contexts), ``estimation`` (the
estimator's parameters), ``policies`` (the registry, the parameter
dataclasses, the CQB family and the baselines), ``simulate`` (policy and
oracle on common random numbers), ``trace`` (the common random numbers),
``runfile`` (the run-file format) and ``code_hash``.

Every source file here is hashed into the code hash that run files record
(:mod:`cqb.sim.code_hash`), and nothing outside: these modules import nothing
from the rest of ``cqb`` except its version.
"""
