"""The simulation core: everything ``cqb run`` executes to produce a run file.

``rng`` (the seed streams), ``instances`` (θ*, λ, contexts), ``estimation``
(the logistic MLE and its width; ``_kernel.c``, its compiled per-round work),
``policies`` (the registry, the parameter dataclasses, the CQB family and the
baselines), ``simulate`` (the round loop, policy and oracle on common random
numbers), ``runfile`` (the run-file format) and ``code_hash``.

Every source file here is hashed into the code hash that run files record
(:mod:`cqb.sim.code_hash`), and nothing outside: these modules import nothing
from the rest of ``cqb`` except its version.
"""
