# Verdicts: held-out tuning and the claims table (cqb.analysis.tuning, cqb.analysis.claims.tables,
# docs/verdicts.md). Both read only the per-run summary tables.

from cqb.studies.replication import calibration_designs
from cqb.studies.claim_specs import registry_hash

REGISTERED_CLAIMS = claim_specs(config, PLAN)
TUNING_EXPERIMENTS, TUNED_CONFIGURED = tuning_setup(config, PLAN)
# the results summary covers every experiment a figure or a claim reports
SUMMARY_EXPERIMENTS = list(
    dict.fromkeys(
        [e for spec in PLAN.figures.values() for e in spec.experiments] + claim_experiments(REGISTERED_CLAIMS)
    )
)


include: "powered.smk"


if TUNING_EXPERIMENTS and STAGE2_SEEDS:

    # the powered tuning's first stage: which grid values go on to stage 2
    checkpoint tuning_contenders:
        input:
            runs=[RUNS_TABLE.format(experiment=e) for e in TUNING_EXPERIMENTS],
        output:
            contenders=CONTENDERS,
        log:
            f"{LOGS}/verdicts/tuning_contenders.log",
        priority: 20
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            contenders=STAGE2["contenders"],
            stall_bound=STAGE2["stall_bound"],
            float_format=config["aggregate"]["float_format"],
        script:
            "../../scripts/tuning_contenders.py"


if TUNING_EXPERIMENTS:

    rule tuning:
        input:
            runs=[RUNS_TABLE.format(experiment=e) for e in TUNING_EXPERIMENTS],
            contenders=CONTENDERS if STAGE2_SEEDS else [],
            stage2=tuning_stage2_files if STAGE2_SEEDS else [],
        output:
            table=f"{FIGURES}/tuning.tsv",
            choices=f"{RESULTS}/tuning/choices.tsv",
            stage2=f"{FIGURES}/tuning_stage2.tsv",
            pdf=f"{FIGURES}/tuning.pdf",
            png=report(f"{FIGURES}/tuning.png", caption="../report/tuning.rst", **report_section("tuning")),
        log:
            f"{LOGS}/verdicts/tuning.log",
        priority: 10
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            configured=TUNED_CONFIGURED,
            enforce=config["tuning"]["enforce"],
            title=config["tuning"]["title"],
            display_names=display_names(),
            float_format=config["aggregate"]["float_format"],
            stall_bound=STAGE2["stall_bound"],
            summaries=config["summaries"],
        script:
            "../../scripts/tuning.py"


# The processed pool files the plan's runs play on: their checksums go into
# the results' provenance (a pool fitted elsewhere can differ in its last bits).
POOL_FILES = sorted({run.instance["pool"] for run in PLAN.runs.values() if "pool" in run.instance})


rule claims:
    input:
        runs=[RUNS_TABLE.format(experiment=e) for e in claim_experiments(REGISTERED_CLAIMS)],
        curves=[CURVES_TABLE.format(experiment=e) for e in SUMMARY_EXPERIMENTS],
        pools=POOL_FILES,
        tuning=f"{RESULTS}/tuning/choices.tsv" if TUNING_EXPERIMENTS else [],
        powered=POWERED_TABLE if POWERED else [],
        powered_readings=POWERED_READINGS if POWERED else [],
        # the per-policy readings and the comparisons table: the powered last looks and the confirmatory study
        powered_states=[f"{RESULTS}/powered/{name}/final.json" for name in POWERED],
        confirmatory_states=CONFIRMATORY_STATES,
        confirmatory=CONFIRMATORY_TABLE if CONFIRMATORY else [],
    output:
        tsv=f"{FIGURES}/claims.tsv",
        per_policy=f"{FIGURES}/claims_per_policy.tsv",
        comparisons=f"{FIGURES}/claims_comparisons.tsv",
        readings_tsv=f"{FIGURES}/claims_readings.tsv",
        design=f"{FIGURES}/claims_design.tsv",
        readings_md=report(
            f"{FIGURES}/claims_readings.md", caption="../report/claims_readings.rst", **report_section("claims")
        ),
        md=report(f"{FIGURES}/claims.md", caption="../report/claims.rst", **report_section("claims")),
        results=f"{FIGURES}/results.md",
        provenance=f"{FIGURES}/provenance.json",
    log:
        f"{LOGS}/verdicts/claims.log",
    priority: 10
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        specs=REGISTERED_CLAIMS,
        run_experiments=claim_experiments(REGISTERED_CLAIMS),
        curve_experiments=SUMMARY_EXPERIMENTS,
        configured=TUNED_CONFIGURED,
        display_names=display_names(),
        descriptions={name: e.get("description", "") for name, e in config["experiments"].items()},
        instance_keys=["slack", "n_servers", "dim", "arrival_rate"],
        float_format=config["aggregate"]["float_format"],
        margins=config["claim_margins"],
        registry_hash=registry_hash(config),
        powered_state_claims=list(POWERED),
        confirmatory_claims=list(CONFIRMATORY),
        sweeps={name: curves[0].sweep_param for name, curves in PLAN.curves.items() if curves},
    script:
        "../../scripts/claims.py"


CALIBRATION = config.get("calibration") or {}
CALIBRATION_SHAPE = CALIBRATION.get("shape_experiment", "stall_check")
# the powered claims and the confirmatory study's designs
CALIBRATED = {**POWERED, **CONFIRMATORY}
CALIBRATION_EXPERIMENTS = list(
    dict.fromkeys(
        [claim.spec.experiment for claim in CALIBRATED.values()]
        + ([CALIBRATION_SHAPE] if CALIBRATION_SHAPE in PLAN.curves else [])
    )
)


# The calibration study (cqb.analysis.calibration, docs/verdicts.md "Error
# rates, simulated"): the powered reading's procedure on resampled run tables.
rule calibration:
    input:
        runs=[RUNS_TABLE.format(experiment=e) for e in CALIBRATION_EXPERIMENTS],
    output:
        tsv=f"{FIGURES}/calibration.tsv",
        pdf=f"{FIGURES}/calibration.pdf",
        png=report(f"{FIGURES}/calibration.png", caption="../report/calibration.rst", **report_section("calibration")),
    log:
        f"{LOGS}/verdicts/calibration.log",
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        claims=CALIBRATED,
        experiments=CALIBRATION_EXPERIMENTS,
        shape_experiment=CALIBRATION_SHAPE if CALIBRATION_SHAPE in PLAN.curves else None,
        replications=CALIBRATION.get("replications", 2000),
        seed=CALIBRATION.get("seed", 7),
        # the replication study simulated whole, at its registered design
        replication=calibration_designs(config, Path("config/replication_power.json")),
        alpha=(config.get("powered") or {}).get("alpha", 0.05),
        float_format=config["aggregate"]["float_format"],
    script:
        "../../scripts/calibration.py"
