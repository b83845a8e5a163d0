# Config loading and thin input functions. The experiment model (runs,
# curves, figure specs) is the package's: cqb.pipeline.experiments, tested without
# Snakemake in tests/test_pipeline_experiments.py.

import json
import re
import sys
from pathlib import Path

import yaml
from snakemake.utils import update_config

try:
    from cqb.sim.code_hash import simulation_code_hash
    from cqb.pipeline.config_schema import ConfigError, validate_config, validate_with_defaults, yaml_scalars
    from cqb.pipeline.experiments import build_plan
    from cqb.pipeline.scheduling import coalesce_rescheduling
    from cqb.pipeline.verdicts import claim_experiments, claim_specs, tuning_setup
except ImportError as error:  # the package must be installed: pip install -e .
    raise ImportError(f"the workflow needs the cqb package ({error}); run `pip install -e .`")


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
    load_datasets_config(Path(workflow.basedir, "config/datasets.yaml"))
    schemas = Path(workflow.basedir, "workflow/schemas")

    def validated_plan():
        validate_config(config, yaml.safe_load((schemas / "config.schema.yaml").read_text()))
        validate_with_defaults(config, yaml.safe_load((schemas / "datasets.schema.yaml").read_text()))
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


envvars:
    "PATH",


def put_cqb_on_path():
    """The simulate jobs run the `cqb` command. Started as .venv/bin/snakemake
    without activating the venv, PATH lacks it: put the directory of the
    interpreter running Snakemake first (jobs inherit PATH; a conda env's
    activation puts its own `cqb` before it)."""
    import os
    import shutil

    bin_dir = str(Path(sys.executable).parent)
    if Path(bin_dir, "cqb").exists() and shutil.which("cqb") != str(Path(bin_dir, "cqb")):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])


put_cqb_on_path()


RUN_SERVER = None  # the started cqb.jobs.client.RunServer, if any


def start_run_server():
    """One preloaded server forks the simulate jobs (cqb.jobs.server,
    docs/jobs.md): only for local execution in this environment; jobs that
    find no server, or one that cannot take them, run in their own process.
    With execution.run_client, jobs use the compiled client where the
    package build made a current one."""
    import os

    from snakemake.settings.types import DeploymentMethod
    from cqb.jobs.client import RUN_CLIENT_VARIABLE, RUN_FALLBACK_VARIABLE, RUN_SERVER_VARIABLE, start

    global RUN_SERVER
    for inherited in (RUN_SERVER_VARIABLE, RUN_CLIENT_VARIABLE, RUN_FALLBACK_VARIABLE):  # an outer run's
        os.environ.pop(inherited, None)
    isolated = {DeploymentMethod.CONDA, DeploymentMethod.APPTAINER}
    if not config["execution"]["run_server"] or not workflow.local_exec:
        return
    if isolated & set(workflow.deployment_settings.deployment_method):
        return
    # simulate jobs have threads: 1; Snakemake sets their thread counts from it
    RUN_SERVER = start(client=config["execution"]["run_client"], job_threads=1)
    if RUN_SERVER is None:
        print("cqb: the run server did not start; every job starts its own Python", file=sys.stderr)


def stop_run_server():
    """The normal end of the server (it lets runs in flight finish) and of its
    folder; a server whose Snakemake is killed cleans up after itself."""
    if RUN_SERVER is not None:
        RUN_SERVER.stop()


def coalesce_scheduler_timers():
    """One pending re-evaluation timer instead of a chain per finished job (cqb.pipeline.scheduling)."""
    if config["execution"]["coalesce_rescheduling"] and not coalesce_rescheduling():
        print("cqb: this Snakemake's JobScheduler is not the one the timer patch was written for; "
              "scheduling left as it is", file=sys.stderr)


onstart:
    start_run_server()
    coalesce_scheduler_timers()


onsuccess:
    stop_run_server()


onerror:
    stop_run_server()


CODE_HASH = simulation_code_hash()  # a param of simulate jobs, so editing the simulation code reruns them


def run_of(wildcards):
    key = (wildcards.instance_id, wildcards.horizon, wildcards.policy)
    if key not in PLAN.runs:
        raise ValueError(f"no experiment in the config runs {key}")
    return PLAN.runs[key]


def simulate_inputs(wildcards):
    instance = run_of(wildcards).instance
    # a pool instance needs its processed data file (built by workflow/rules/data.smk)
    return {"pool": instance["pool"]} if instance["kind"] == "pool" else {}


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
    from cqb.policies import registered_policies

    return {name: spec.display_name for name, spec in registered_policies().items()}


def report_figures():
    """The PNGs of the report's sections that this config draws (cqb.pipeline.report)."""
    from cqb.pipeline.report import SECTIONS

    names = [name for name, _ in SECTIONS
             if name in config["figures"] or (name == "fig5" and PLAN.rates_experiment)
             or (name == "tuning" and TUNING_EXPERIMENTS) or name == "fig7"]
    return [f"{FIGURES}/{name}.png" for name in names]
