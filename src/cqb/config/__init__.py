"""The config model and the plan: ``schema`` (the config schema and its
validation) and ``experiments`` (the validated config → runs, curves and figure
specs). The Snakemake rules and the studies read these; they run without Snakemake.
"""
