# Figure 5 (beyond the paper): empirical queue-length regret rates.
# R_T = E[Q(T) − Q*(T)] against T, one run per (policy, T, seed) from the
# horizon-swept experiment `rates.experiment`. The rule `regret_rates` reads
# only the last round of each run file (not the per-round tidy table, which
# would be huge at T = 50000); `fig5` reads only its two tables.


RATES_RUNS = PLAN.rates_runs(RUN_FILE)  # (label, T, seed, run file)
RATES_TABLE = f"{RESULTS}/aggregate/regret_rates.tsv"
SLOPES_TABLE = f"{RESULTS}/aggregate/regret_slopes.tsv"


rule regret_rates:
    localrule: True
    input:
        [run[3] for run in RATES_RUNS],
    output:
        summary=RATES_TABLE,
        slopes=SLOPES_TABLE,
    params:
        runs=[list(run[:3]) for run in RATES_RUNS],
        bootstrap=config["rates"]["bootstrap"],
        float_format=config["aggregate"]["float_format"],
    log:
        f"{LOGS}/aggregate/regret_rates.log",
    conda:
        "../envs/analysis.yaml"
    script:
        "../../scripts/regret_rates.py"


rule fig5:
    localrule: True
    input:
        summary=RATES_TABLE,
        slopes=SLOPES_TABLE,
    output:
        pdf=f"{FIGURES}/fig5.pdf",
        png=report(f"{FIGURES}/fig5.png", caption="../report/fig5.rst", category="Figures",
                   labels={"figure": "fig5"}),
        tsv=f"{FIGURES}/fig5.tsv",
    params:
        title=config["rates"]["title"],
        dpi=config["rates"]["dpi"],
        float_format=config["aggregate"]["float_format"],
    log:
        f"{LOGS}/figures/fig5.log",
    conda:
        "../envs/analysis.yaml"
    script:
        "../../scripts/plot_rates.py"
