# The replication report (cqb.publishing.report): one static HTML page beside
# the figures, built from the claims tables and the figures' PNGs only.
# `cqb publish` copies it, with the PNGs, to docs/results/.


rule report_html:
    input:
        claims=f"{FIGURES}/claims.tsv",
        provenance=f"{FIGURES}/provenance.json",
        powered=POWERED_TABLE if POWERED else [],
        per_policy=f"{FIGURES}/claims_per_policy.tsv",
        calibration=f"{FIGURES}/calibration.tsv" if POWERED else [],
        calibration_png=f"{FIGURES}/calibration.png" if POWERED else [],
        figures=report_figures(),
        # Figure 8 (its own target): in the report once it has been made, or when in `all`
        multiverse=f"{FIGURES}/fig8_marks.tsv" if MULTIVERSE_IN_REPORT else [],
        multiverse_png=f"{FIGURES}/fig8.png" if MULTIVERSE_IN_REPORT else [],
        captions=report_captions(),
    output:
        f"{FIGURES}/report.html",
    log:
        f"{LOGS}/report/report_html.log",
    benchmark:
        f"{BENCHMARKS}/report/report_html.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    script:
        "../../scripts/report.py"
