# What local runs add to Snakemake's own execution (docs/pipeline.md,
# "Throughput"): `cqb` on the jobs' PATH, one sweep of the temporaries that
# killed writes left among the run files and trace caches, the run server that runs the
# simulate jobs (cqb.jobs, docs/jobs.md; execution.run_server) and the
# scheduler's patches (cqb.snakemake_patches.scheduling; execution.coalesce_rescheduling,
# execution.defer_remaining_jobs, execution.sample_ready_jobs,
# execution.skip_unread_input_sizes; cqb.snakemake_patches.job_patches:
# execution.index_input_producers, execution.memoize_shell_commands,
# execution.memoize_signatures; taken while the main workflow is parsed, so
# the DAG's build and dry runs use them too); Python's collector spared while
# the DAG is built and the built DAG frozen (execution.tune_collector); after a
# Ctrl-C, the stopped jobs' outputs
# removed (`onerror`). Run as the main workflow, the switches
# default to on and start in `onstart`. Included as a module, Snakemake runs
# no `onstart` of the module, and they default to off (load_config): a module
# whose config turns one on gets it when the main process of a real run parses
# the workflow; the run server then stops when Snakemake exits.


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
    """One preloaded server forks the simulate jobs: only for local execution
    in this environment; jobs that find no server, or one that cannot take
    them, run in their own process. With execution.run_client, jobs use the
    compiled client where the package build made a current one."""
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
    RUN_SERVER = start(
        client=config["execution"]["run_client"], job_threads=1, worker_runs=config["execution"]["worker_runs"]
    )
    if RUN_SERVER is None:
        print("cqb: the run server did not start; every job starts its own Python", file=sys.stderr)


def stop_run_server():
    """The normal end of the server (it lets runs in flight finish) and of its
    folder; a server whose Snakemake is killed cleans up after itself."""
    if RUN_SERVER is not None:
        RUN_SERVER.stop()


def patch_scheduler():
    """One pending re-evaluation timer instead of a chain per finished job;
    the remaining jobs listed only when the job selector reads them; the
    ready jobs' subsample drawn where they are listed; no input sizes for a
    selector that never reads them; a job's inputs mapped to their producers
    once per prepare; a job's shell command formatted once, a function's
    signature read once."""
    from cqb.snakemake_patches.switches import apply_patches

    apply_patches(config["execution"])  # one line on stderr for each that stands down


def sweep_simulation_folders():
    """Remove the temporaries killed writes left among the run files and the
    trace caches; the run files' folder. Only while no job writes there."""
    import os

    from cqb.io.files import sweep_stale_temporaries

    runs, traces = (os.path.abspath(os.path.join(config["results_dir"], name)) for name in ("runs", "traces"))
    for folder in (runs, traces):
        sweep_stale_temporaries(folder)
    return runs


def sweep_run_files():
    """A local run sweeps the simulation folders before any job starts, and
    tells its jobs so (they then skip the listing of their output's folder,
    cqb.jobs.run_command.remove_stale_temporaries). Not under a cluster executor: a job of
    an earlier, killed Snakemake may still be writing there."""
    import os

    from cqb.jobs.client import STALE_SWEPT_VARIABLE

    os.environ.pop(STALE_SWEPT_VARIABLE, None)  # an outer run's
    if workflow.local_exec:
        os.environ[STALE_SWEPT_VARIABLE] = sweep_simulation_folders()


def remove_stopped_jobs_outputs():
    """After a Ctrl-C, Snakemake returns with the jobs it started and did not
    see end still listed as running (one may have written its output, but no
    record says so): their outputs and records are removed, so that the same
    command runs them again, and in a local run the simulation folders are
    swept; the count goes to the log, with which the progress display ends.
    Called once the run server has stopped: no worker writes any more."""
    from snakemake.logging import logger
    from cqb.io.files import remove_partial_output
    from snakemake_logger_plugin_cqb import STOPPED_JOBS

    stopped = list(getattr(getattr(workflow, "scheduler", None), "running", ()))
    if not stopped:
        return
    for job in stopped:
        for single in getattr(job, "jobs", [job]):  # a group's jobs, or the job
            for path in single.output:
                remove_partial_output(path)
            workflow.persistence.cleanup(single)
    if workflow.local_exec:
        sweep_simulation_folders()
    logger.warning(
        f"stopped before the end: {len(stopped)} job(s), their outputs removed",
        extra={STOPPED_JOBS: len(stopped)},
    )


COLLECTOR_THRESHOLDS = None  # Python's collector thresholds before the DAG's build, if spared


def spare_the_collector():
    """Fewer collections of Python's cyclic collector while the DAG is built
    (cqb.snakemake_patches.scheduling.spare_the_dag_build)."""
    from cqb.snakemake_patches.scheduling import spare_the_dag_build

    global COLLECTOR_THRESHOLDS
    if config["execution"]["tune_collector"] and COLLECTOR_THRESHOLDS is None:
        COLLECTOR_THRESHOLDS = spare_the_dag_build()


def freeze_the_collector():
    """The built DAG frozen out of every later collection, the thresholds
    restored (cqb.snakemake_patches.scheduling.freeze_the_dag)."""
    from cqb.snakemake_patches.scheduling import freeze_the_dag

    if config["execution"]["tune_collector"]:
        freeze_the_dag(COLLECTOR_THRESHOLDS)


def start_execution_helpers():
    sweep_run_files()
    start_run_server()
    patch_scheduler()
    freeze_the_collector()


onstart:
    start_execution_helpers()


onsuccess:
    stop_run_server()


onerror:
    stop_run_server()
    remove_stopped_jobs_outputs()


if IS_MODULE and workflow.is_main_process and not workflow.output_settings.dryrun:
    start_execution_helpers()
elif not IS_MODULE and workflow.is_main_process:
    # The patches change no result: taken while the workflow is parsed, they
    # also serve the DAG's build and a dry run's job listing, not only the
    # jobs after `onstart`.
    patch_scheduler()
    spare_the_collector()
