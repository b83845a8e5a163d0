# Contextual queueing bandits (Bae, Kang, Lee; arXiv 2601.19300): every
# policy × instance × seed is one `simulate` job writing one run file; each
# experiment is aggregated to a tidy table; figures are drawn from the tables
# only. See docs/pipeline.md. Snakemake reads profiles/default/ by itself.
#
#   snakemake --cores 2            # every figure, the claims and figures/report.html
#   snakemake --cores 2 fig3       # one figure
#   snakemake --cores 2 -n         # dry run: what would run, and why

from snakemake.utils import min_version

min_version("9.10")


configfile: "config/config.yaml"


# Snakemake's own report, `snakemake --report report.html` (docs/pipeline.md)
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"


# Validate the config and expand it into the plan: runs, curves, figures,
# Figure 5's experiments and Figure 7's cells (a bad value stops here, named);
# see cqb.pipeline.experiments. The real-data settings live in their own file
# (config/datasets.yaml, key `data`), loaded by load_config rather than with a
# second `configfile:` so that values given with --configfile/--config still
# win, key by key.
PLAN = load_config()


# The run server and the scheduler's timer patch, behind config `execution`;
# off where this workflow is a module, unless its config turns them on.
include: "workflow/rules/execution.smk"


RESULTS = config["results_dir"]
FIGURES = config["figures_dir"]
LOGS = f"{RESULTS}/logs"
BENCHMARKS = f"{RESULTS}/benchmarks"
# A run file depends on instance, horizon, policy label and seed only, so runs
# shared by several experiments or figures are simulated once.
RUN_FILE = f"{RESULTS}/runs/{{instance_id}}/T{{horizon}}/{{policy}}/seed{{seed}}.npz"
AGGREGATE_FILE = f"{RESULTS}/aggregate/{{experiment}}.tsv"
RUNS_TABLE = f"{RESULTS}/aggregate/{{experiment}}.runs.tsv"
CURVES_TABLE = f"{RESULTS}/aggregate/{{experiment}}.curves.tsv"


localrules:
    all,


rule all:
    default_target: True
    input:
        [figure_outputs(name) for name in config["figures"]],
        figure_outputs("fig5") if PLAN.rates_experiment else [],
        f"{FIGURES}/claims.md",
        f"{FIGURES}/fig7.md",
        f"{FIGURES}/report.html",
        # Figure 8 is its own target (`multiverse`) unless multiverse.in_all
        lambda wildcards: MULTIVERSE_FILES if MULTIVERSE and config["multiverse"]["in_all"] else [],
        # the replication study is its own target (`replication`) unless replication.in_all
        lambda wildcards: [REPLICATION_TABLE] if REPLICATION and config["replication"]["in_all"] else [],


include: "workflow/rules/simulate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/verdicts.smk"
include: "workflow/rules/multiverse.smk"
include: "workflow/rules/replication.smk"
include: "workflow/rules/fig7.smk"
include: "workflow/rules/report.smk"


if PLAN.rates_experiment:

    include: "workflow/rules/rates.smk"


include: "workflow/rules/candidates.smk"
include: "workflow/rules/data.smk"
