# Figure 8, the multiverse (cqb.analysis.multiverse, docs/figures.md): every
# listed claim under every registered alternative of the open choices, one at
# a time against the defaults, on its own fresh seeds. Its runs join the
# plan's (one simulate job per run file, keyed as every run); per alternative
# one table of per-run summaries; then the cells' verdicts, the marks and the
# figure. Its own target `multiverse` unless multiverse.in_all.

from cqb.analysis.multiverse import alternative_curves
from cqb.studies.multiverse_plan import alternative_files, merge_runs, multiverse_design, multiverse_runs

MULTIVERSE = or_config_error(multiverse_design, config, PLAN, REGISTERED_CLAIMS)
MULTIVERSE_IN_REPORT = bool(MULTIVERSE) and (
    config["multiverse"]["in_all"] or Path(f"{FIGURES}/fig8_marks.tsv").exists()
)
MULTIVERSE_FILES = [f"{FIGURES}/fig8.{ext}" for ext in ("pdf", "png", "tsv", "md")] + [f"{FIGURES}/fig8_marks.tsv"]

if MULTIVERSE:
    or_config_error(merge_runs, PLAN.runs, or_config_error(multiverse_runs, MULTIVERSE))
    # its seeds are its own: no other use may reach them
    or_config_error(check_seed_uses, seed_uses(config, PLAN, TUNING_EXPERIMENTS, POWERED, CONFIRMATORY, MULTIVERSE))

    rule multiverse_runs:
        input:
            lambda wildcards: alternative_files(MULTIVERSE, wildcards.alternative, RUN_FILE),
        output:
            f"{RESULTS}/multiverse/{{alternative}}.runs.tsv",
        log:
            f"{LOGS}/multiverse/{{alternative}}.log",
        wildcard_constraints:
            alternative="[A-Za-z0-9_]+",
        priority: 10
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            multiverse=MULTIVERSE,
            run_file=lambda wildcards: RUN_FILE,
            summaries=config["summaries"],
            float_format=config["aggregate"]["float_format"],
        script:
            "../../scripts/multiverse_runs.py"

    rule fig8:
        input:
            runs=[f"{RESULTS}/multiverse/{a.name}.runs.tsv" for a in MULTIVERSE.alternatives],
        output:
            pdf=f"{FIGURES}/fig8.pdf",
            png=report(
                f"{FIGURES}/fig8.png", caption="../report/fig8.rst", category="Figures", labels={"figure": "fig8"}
            ),
            tsv=f"{FIGURES}/fig8.tsv",
            md=f"{FIGURES}/fig8.md",
            marks=f"{FIGURES}/fig8_marks.tsv",
        log:
            f"{LOGS}/figures/fig8.log",
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            multiverse=MULTIVERSE,
            alternatives=[a.name for a in MULTIVERSE.alternatives],
            title=config["multiverse"]["title"],
            float_format=config["aggregate"]["float_format"],
        script:
            "../../scripts/plot_multiverse.py"

    rule multiverse:
        input:
            MULTIVERSE_FILES,
        localrule: True
