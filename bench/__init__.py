"""Measurement tools of a checkout (bench/README.md): timings of the simulation
core against another source tree, of a job's start-up and hand-off, of the
pipeline and its parts, and the core's hand-written mutants. Not part of the
installed package (nothing in src/ imports it, and nothing here is in the
simulation code hash); each module with a ``main`` runs from the checkout's
root as ``python -m bench.<name>``."""
