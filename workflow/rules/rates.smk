# Figure 5 (beyond the paper): empirical queue-length regret rates, one panel
# per horizon-swept experiment (`rates.experiment`, then `rates.extra_experiments`).
# `regret_rates` summarises each run with cqb.analysis.summaries (tail regret, stalled)
# straight from the run files (the per-round tidy table would be huge at
# T = 50000) and fits the slopes; `fig5` reads only its tables.

from cqb.analysis.rates import rate_runs

RATES_EXPERIMENTS = list(PLAN.rate_experiments)
RATES_RUNS = rate_runs(PLAN, RATES_EXPERIMENTS, RUN_FILE)  # (experiment, label, T, seed, run file, stage)
RATES_TABLE = f"{RESULTS}/aggregate/regret_rates.tsv"
SLOPES_TABLE = f"{RESULTS}/aggregate/regret_slopes.tsv"
RATE_RUNS_TABLE = f"{RESULTS}/aggregate/regret_rates.runs.tsv"


rule regret_rates:
    input:
        [run[4] for run in RATES_RUNS],
    output:
        summary=RATES_TABLE,
        slopes=SLOPES_TABLE,
        runs=RATE_RUNS_TABLE,
    log:
        f"{LOGS}/aggregate/regret_rates.log",
    benchmark:
        f"{BENCHMARKS}/aggregate/regret_rates.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        runs=[list(run[:4]) for run in RATES_RUNS],
        stages=[run[5] for run in RATES_RUNS],
        bootstrap=config["rates"]["bootstrap"],
        resolve=config["rates"]["resolve"],
        summaries=config["summaries"],
        float_format=config["aggregate"]["float_format"],
    script:
        "../../scripts/regret_rates.py"


rule fig5:
    input:
        summary=RATES_TABLE,
        slopes=SLOPES_TABLE,
    output:
        pdf=f"{FIGURES}/fig5.pdf",
        png=report(
            f"{FIGURES}/fig5.png", caption="../report/fig5.rst", **report_section("fig5"), labels={"figure": "fig5"}
        ),
        tsv=f"{FIGURES}/fig5.tsv",
        slopes=f"{FIGURES}/fig5_slopes.tsv",
        text=f"{FIGURES}/fig5_summary.md",
    log:
        f"{LOGS}/figures/fig5.log",
    benchmark:
        f"{BENCHMARKS}/figures/fig5.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        panel_titles={name: config["experiments"][name].get("description", name) for name in RATES_EXPERIMENTS},
        title=config["rates"]["title"],
        dpi=config["rates"]["dpi"],
        float_format=config["aggregate"]["float_format"],
    script:
        "../../scripts/plot_rates.py"
