# Contextual queueing bandits (Bae, Kang, Lee; arXiv 2601.19300): every
# policy × instance × seed is one `simulate` job writing one run file; each
# experiment is aggregated to a tidy table; figures are drawn from the tables
# only. See docs/pipeline.md.
#
#   snakemake --cores 2            # all figures
#   snakemake --cores 2 fig3       # one figure
#   snakemake --report report.html # HTML report of the figures

from pathlib import Path

import yaml
from snakemake.utils import min_version, update_config, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")

# The real-data settings live in their own file under the key `data`. Loaded
# here rather than with a second `configfile:` so that values given with
# --configfile/--config still win, key by key.
DATASETS_CONFIG = Path(workflow.basedir, "config/datasets.yaml")
if DATASETS_CONFIG.exists():
    datasets_config = yaml.safe_load(DATASETS_CONFIG.read_text()) or {}
    update_config(datasets_config, {k: config[k] for k in datasets_config if k in config})
    config.update(datasets_config)  # validated by workflow/rules/data.smk


include: "workflow/rules/common.smk"


# cheap rules (aggregate, figures) are marked `localrule: True` where they are defined
localrules:
    all,


rule all:
    default_target: True
    input:
        [figure_outputs(name) for name in config["figures"]],


include: "workflow/rules/simulate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"


if Path(workflow.basedir, "workflow/rules/data.smk").exists():

    include: "workflow/rules/data.smk"
