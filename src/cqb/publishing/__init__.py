"""What the repository publishes from the pipeline's outputs: the generated
blocks of the README and docs (``cqb publish``, ``cqb publish --rebuild``),
their provenance, the replication report, the published figures and the
timings table (``cqb time``).
"""
