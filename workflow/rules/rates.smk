# Regret rates against the horizon: Figure 5 (the horizon-swept experiments of
# `rates`) and Figure 9's rate panels (those of `adversarial.rate_experiments`),
# one panel per experiment. `<prefix>regret_rates` summarises each run with
# cqb.analysis.summaries (tail regret, stalled) straight from the run files
# (the per-round tidy table would be huge at T = 50000) and fits the slopes;
# the figure reads only its tables. The same rules and the same code for both.

from cqb.analysis.rates import rate_runs

for rate_figure, (prefix, experiments, title) in RATE_FIGURES.items():
    runs_of_figure = rate_runs(PLAN, experiments, RUN_FILE)  # (experiment, label, T, seed, run file, stage)
    tables = {
        "summary": f"{RESULTS}/aggregate/{prefix}regret_rates.tsv",
        "slopes": f"{RESULTS}/aggregate/{prefix}regret_slopes.tsv",
        "runs": f"{RESULTS}/aggregate/{prefix}regret_rates.runs.tsv",
    }

    rule:
        name:
            f"{prefix}regret_rates"
        input:
            [run[4] for run in runs_of_figure],
        output:
            **tables,
        log:
            f"{LOGS}/aggregate/{prefix}regret_rates.log",
        benchmark:
            f"{BENCHMARKS}/aggregate/{prefix}regret_rates.tsv"
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            runs=[list(run[:4]) for run in runs_of_figure],
            stages=[run[5] for run in runs_of_figure],
            bootstrap=config["rates"]["bootstrap"],
            resolve=config["rates"]["resolve"],
            summaries=config["summaries"],
            float_format=config["aggregate"]["float_format"],
        script:
            "../../scripts/regret_rates.py"

    rule:
        name:
            rate_figure
        input:
            summary=tables["summary"],
            slopes=tables["slopes"],
        output:
            pdf=f"{FIGURES}/{rate_figure}.pdf",
            png=report(
                f"{FIGURES}/{rate_figure}.png",
                caption=f"../report/{rate_figure}.rst",
                **report_section(rate_figure),
                labels={"figure": rate_figure},
            ),
            tsv=f"{FIGURES}/{rate_figure}.tsv",
            slopes=f"{FIGURES}/{rate_figure}_slopes.tsv",
            text=f"{FIGURES}/{rate_figure}_summary.md",
        log:
            f"{LOGS}/figures/{rate_figure}.log",
        benchmark:
            f"{BENCHMARKS}/figures/{rate_figure}.tsv"
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            panel_titles={name: config["experiments"][name].get("description", name) for name in experiments},
            title=title,
            dpi=config["rates"]["dpi"],
            float_format=config["aggregate"]["float_format"],
        script:
            "../../scripts/plot_rates.py"
