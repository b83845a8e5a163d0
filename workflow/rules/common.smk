# Config loading and thin input functions. The experiment model (runs,
# curves, figure specs) is the package's: cqb.config.experiments, tested without
# Snakemake in tests/test_config_experiments.py.

import inspect
import json
import os
import re
import sys
from pathlib import Path

import yaml
from snakemake.utils import update_config

try:
    from cqb.sim.code_hash import simulation_code_hash
    from cqb.datasets.registry import datasets_schema
    from cqb.errors import ConfigError
    from cqb.config.schema import validate_config, validate_with_defaults, yaml_scalars
    from cqb.config.experiments import build_plan
    from cqb.studies.claim_specs import claim_experiments, claim_specs, tuning_setup
except ImportError as error:  # the package must be installed: pip install -e .
    raise ImportError(f"the workflow needs the cqb package ({error}); run `pip install -e .`")


# This workflow's own folder (the repository root): `workflow.basedir` is the
# main Snakefile's, which is another workflow's when this one is a module.
WORKFLOW_ROOT = Path(inspect.currentframe().f_code.co_filename).resolve().parents[2]
# Included by another workflow (`module ... snakefile:`) rather than run itself
# from either entry point: the top-level Snakefile or workflow/Snakefile (`-s`).
ENTRY_POINTS = (WORKFLOW_ROOT / "Snakefile", WORKFLOW_ROOT / "workflow" / "Snakefile")
IS_MODULE = Path(workflow.main_snakefile).resolve() not in ENTRY_POINTS


def or_config_error(build, *args):
    """``build(*args)``, or the workflow stops with one line naming the bad config value."""
    try:
        return build(*args)
    except ConfigError as error:
        sys.exit(f"config error: {error}")


def load_config():
    """The config with the real-data settings, validated against both schemas
    (static + the part generated from the policy registry; defaults filled in),
    expanded into the plan; a bad value stops the workflow with one line naming it."""
    # nested --config values arrive as text ('0.1'): read them as YAML scalars
    update_config(config, yaml_scalars(workflow.config_settings.config))
    load_datasets_config(WORKFLOW_ROOT / "config/datasets.yaml")
    schemas = WORKFLOW_ROOT / "workflow/schemas"
    if IS_MODULE:  # a module starts no run server and patches nothing unless its config asks
        execution = config.setdefault("execution", {})
        for switch in (
            "run_server",
            "coalesce_rescheduling",
            "defer_remaining_jobs",
            "sample_ready_jobs",
            "skip_unread_input_sizes",
            "index_input_producers",
            "tune_collector",
            "memoize_shell_commands",
            "memoize_signatures",
        ):
            execution.setdefault(switch, False)

    def validated_plan():
        validate_config(config, yaml.safe_load((schemas / "config.schema.yaml").read_text()))
        validate_with_defaults(config, datasets_schema(yaml.safe_load((schemas / "datasets.schema.yaml").read_text())))
        return build_plan(config)

    return or_config_error(validated_plan)


def load_datasets_config(path):
    """The real-data settings (config/datasets.yaml, top-level key `data`),
    with values from the command line (--config/--configfile) on top."""
    if not path.exists():
        return
    datasets_config = yaml.safe_load(path.read_text()) or {}
    update_config(datasets_config, {k: config[k] for k in datasets_config if k in config})
    config.update(datasets_config)


CODE_HASH = simulation_code_hash()  # a param of simulate jobs, so editing the simulation code reruns them


def run_of(wildcards):
    key = (wildcards.instance_id, wildcards.horizon, wildcards.policy)
    if key not in PLAN.runs:
        raise ValueError(f"no experiment in the config runs {key}")
    return PLAN.runs[key]


def simulate_inputs(wildcards):
    instance = run_of(wildcards).instance
    # a pool instance needs its processed data file (built by workflow/rules/data.smk)
    return {"pool": instance["pool"]} if "pool" in instance else {}


def instance_json(wildcards, input):
    instance = dict(run_of(wildcards).instance)
    if "pool" in input.keys():
        instance["pool"] = input.pool
    return json.dumps(instance, sort_keys=True)


def curves_with_files(curves):
    """The plan's curves with their run files (what cqb.analysis reads), in config order."""
    return [curve.with_files(RUN_FILE) for curve in curves]


def experiment_run_files(wildcards):
    return [path for curve in PLAN.curves[wildcards.experiment] for path in PLAN.run_files(curve, RUN_FILE)]


def figure_outputs(figure_name):
    return [f"{FIGURES}/{figure_name}.{ext}" for ext in ("pdf", "png", "tsv")]


def display_names():
    from cqb.presentation import DISPLAY_NAMES

    return dict(DISPLAY_NAMES)


def report_figures():
    """The PNGs of the report's sections that this config draws (cqb.publishing.report)."""
    from cqb.publishing.report import SECTIONS

    names = [
        name
        for name, _ in SECTIONS
        if name in config["figures"]
        or name in RATE_FIGURES
        or (name == "tuning" and TUNING_EXPERIMENTS)
        or name == "fig7"
    ]
    return [f"{FIGURES}/{name}.png" for name in names]


def report_captions():
    """The captions of the page's figures, as inputs (an edited caption redraws
    the page), relative to the working directory: where the clone lives is no
    rerun trigger."""
    captions = [Path(WORKFLOW_ROOT, "workflow/report", f"{Path(png).stem}.rst") for png in report_figures()]
    return [os.path.relpath(caption) for caption in captions if caption.exists()]


# Snakemake's own report (`snakemake --report report.html`) files each output
# under the heading the project's report (cqb.publishing.report) gives it.
PAPER_FIGURES, BEYOND_THE_PAPER, VERDICTS = "The paper's figures", "Beyond the paper", "Verdicts"


def report_section(name):
    """report() keywords: category and subcategory of a figure or table."""
    from cqb.publishing.report import SECTIONS

    titles = dict(SECTIONS) | {"claims": "Claims", "calibration": "Error rates of the powered reading, simulated"}
    title = titles.get(name)
    if title is None:  # a figure the project's report does not show (fig2_median, fig4_assumptions)
        return {"category": BEYOND_THE_PAPER, "subcategory": name}
    if title.startswith("Beyond the paper — "):
        return {"category": BEYOND_THE_PAPER, "subcategory": title.removeprefix("Beyond the paper — ")}
    return {
        "category": VERDICTS if name in ("tuning", "claims", "calibration") else PAPER_FIGURES,
        "subcategory": title,
    }
