"""Measurement: timings of the simulation core, a job's start-up, the pipeline
and its parts (docs/benchmarks.md). Nothing here is part of a run file, so
nothing here is in the simulation code hash; each module with a ``main`` runs
as ``python -m cqb.bench.<name>`` (`cqb benchmark` runs cqb.bench.benchmark)."""
