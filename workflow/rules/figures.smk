# Figures read only the aggregate tables: restyling never reruns a simulation.
# One rule per figure of config `figures`, named after it (fig2, fig3, fig4),
# so `snakemake --cores 2 fig3` builds just that figure.

for figure_name in config["figures"]:
    has_caption = Path(WORKFLOW_ROOT, "workflow/report", f"{figure_name}.rst").exists()

    rule:
        name:
            figure_name
        input:
            tables=[AGGREGATE_FILE.format(experiment=e) for e in PLAN.figures[figure_name].experiments],
            curves=[CURVES_TABLE.format(experiment=e) for e in PLAN.figures[figure_name].experiments],
            # sweep panels (x: sweep) draw a per-run number against the sweep value
            runs=[RUNS_TABLE.format(experiment=e) for e in PLAN.figures[figure_name].runs_experiments],
        output:
            pdf=f"{FIGURES}/{figure_name}.pdf",
            png=report(
                f"{FIGURES}/{figure_name}.png",
                caption=f"../report/{figure_name}.rst" if has_caption else "../report/figure.rst",
                **report_section(figure_name),
                labels={"figure": figure_name},
            ),
            # the data table stays out of the report (megabytes per figure)
            tsv=f"{FIGURES}/{figure_name}.tsv",
        log:
            f"{LOGS}/figures/{figure_name}.log",
        benchmark:
            f"{BENCHMARKS}/figures/{figure_name}.tsv"
        priority: 10
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            # a FigureSpec (cqb.config.panels): drawn from the tables only
            spec=PLAN.figures[figure_name],
            float_format=config["aggregate"]["float_format"],
        script:
            "../../scripts/plot_figure.py"


# A figure in parts: one target that builds them all (FIGURE_PARTS, common.smk).
for group, parts in FIGURE_PARTS.items():

    rule:
        name:
            group
        input:
            [figure_outputs(part) for part in parts],
        localrule: True
