# Figure 7: the verdict of "CQB-ε performs best" on every (dataset, construction
# variant) cell (cqb.analysis.sensitivity; docs/figures.md). Each cell is an
# ordinary experiment with its own `best` claim; this rule reads its per-run
# summaries and its pool's report.json only.

from cqb.analysis.sensitivity import grid_cells

# the cells of the grid; a cell without its claim stops here, named
FIG7_CELLS = or_config_error(grid_cells, PLAN.grid, PLAN, REGISTERED_CLAIMS)


rule fig7:
    input:
        runs=[RUNS_TABLE.format(experiment=cell.experiment) for cell in FIG7_CELLS],
        reports=sorted({cell.report for cell in FIG7_CELLS}),
    output:
        pdf=f"{FIGURES}/fig7.pdf",
        png=report(
            f"{FIGURES}/fig7.png", caption="../report/fig7.rst", **report_section("fig7"), labels={"figure": "fig7"}
        ),
        tsv=f"{FIGURES}/fig7.tsv",
        md=f"{FIGURES}/fig7.md",
    log:
        f"{LOGS}/figures/fig7.log",
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        cells=FIG7_CELLS,
        datasets=list(config["data"]["datasets"]),
        columns=config["data"]["sensitivity"]["columns"],
        slack_margin=config["data"]["sensitivity"]["slack_margin"],
        title=config["data"]["sensitivity"]["title"],
        float_format=config["aggregate"]["float_format"],
    script:
        "../../scripts/plot_sensitivity.py"
