"""The workflow's side: ``config_schema`` (the schema and its validation),
``experiments`` (config → runs, curves, figure specs), ``verdicts`` (claim specs
and tuning set-up from the config) and ``results`` (provenance, publishing).

The Snakemake rules call these; they are tested without Snakemake.
"""
