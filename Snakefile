# The workflow lives in workflow/Snakefile (the layout the Snakemake workflow
# catalog expects); this file lets `snakemake` run from the repository root.
# Not the `include:` keyword: an include keeps the including file's default
# target (none here), so a plain `snakemake` would run nothing, not rule `all`.
workflow.include("workflow/Snakefile", overwrite_default_target=True)
