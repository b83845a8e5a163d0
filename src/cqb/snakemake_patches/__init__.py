"""Optional throughput patches to Snakemake's private internals, each behind a
switch of the config's ``execution`` block (docs/jobs.md): ``scheduling`` (the
scheduling round) and ``job_patches`` (the jobs). Each stands down with a
one-line notice on a Snakemake whose internals differ from those it was written for.
"""
