"""Contextual queueing bandits: simulator, estimators and policies.

Subpackages, each importing only from those before it (tests/test_layers.py):
``sim`` (the simulation core, all of it under the code hash), ``analysis``
(run files → statistics and verdicts), ``data`` (datasets → pool instances),
``pipeline`` (the config model the workflow runs), ``figures`` (plots); on top
the command line (``cli``) and the run server (``jobs``). docs/architecture.md
draws it. The measurement tools are not in the package: bench/ in a checkout.
"""

# Recorded in every run file's metadata; not part of the code hash (it changes
# no number a run computes).
__version__ = "0.1.0"
