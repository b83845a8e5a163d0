# The workflow lives in workflow/Snakefile (the layout the Snakemake workflow
# catalog expects); this file lets `snakemake` run from the repository root.
include: "workflow/Snakefile"
