"""Benchmark of the pipeline's own overhead (not a test: timings depend on the machine).

    python -m bench.pipeline_benchmark [--jobs 100] [--scales 1 10] [--variant NAME='ARGS' ...]
        [--policies random] [--horizon 500] [--cores 2] [--baseline CHECKOUT] [--out FILE]
    python -m bench.pipeline_benchmark --split [--results results] [--timings TSV] [--row -1]

Runs ``jobs × scale`` trivial simulate jobs (the Random policy at the base
instance, T = 500, seeds no experiment uses) through the real workflow — the
repository's Snakefile and its default profile (profiles/default),
one job per run file — in a
scratch folder, once per scale and per variant of Snakemake's options, and
reports per variant and scale:

* the wall time;
* Snakemake's own CPU (the ``snakemake`` process alone: scheduling, DAG,
  metadata, job bookkeeping), from ``getrusage(RUSAGE_SELF)`` taken in that
  process at exit, and per job;
* the jobs' CPU per job (``RUSAGE_CHILDREN`` of the same process: every job's
  shell and ``cqb run``, waited for by Snakemake).

A variant is a name and extra Snakemake arguments (``--variant
ilp='--scheduler ilp'``); the variant ``profile`` (no extra arguments: what
``snakemake --cores 2`` does) always runs. Variants alternate within each
scale, so a ratio between them is measured side by side. ``--baseline``
times another checkout's workflow beside (its Snakefile, and its own
``.venv``, where that checkout is installed).

``--split`` instead reads where the CPU of a run timed by `cqb time` went
(:func:`run_split`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from cqb.config.experiments import BASE_INSTANCE
from cqb.publishing.timing import SNAKEMAKE_LAUNCHER

REPOSITORY = Path(__file__).resolve().parents[1]


def default_profile(snakefile: Path) -> Path:
    """The checkout's default profile, beside its Snakefile (workflow/profiles/
    in older trees): Snakemake finds it by itself only from the Snakefile's
    folder, so it is named, and the benchmark runs it from a scratch folder."""
    folder = Path(snakefile).parent
    for profile in (folder / "profiles" / "default", folder / "workflow" / "profiles" / "default"):
        if profile.is_dir():
            return profile
    raise SystemExit(f"no default profile beside {snakefile}")


EXPERIMENT = "pipeline_benchmark"
# Far from the figures' (0–299), the tuning's (1000–1029) and every other seed range.
FIRST_SEED = 500_000
BASE = BASE_INSTANCE


@dataclass(frozen=True)
class PipelineTiming:
    variant: str
    jobs: int  # simulate jobs
    steps: int  # every Snakemake job (the simulate jobs and the aggregate)
    wall: float
    snakemake_cpu: float
    jobs_cpu: float
    returncode: int


def benchmark_config(results_dir: Path, jobs: int, horizon: int = 500, policy: str = "random") -> dict:
    return {
        "results_dir": str(results_dir),
        "figures_dir": str(results_dir / "figures"),
        "experiments": {EXPERIMENT: {
            "description": "trivial jobs of the pipeline benchmark (bench.pipeline_benchmark)",
            "instance": BASE, "horizon": horizon, "seeds": jobs, "first_seed": FIRST_SEED,
            "policies": [policy]}},
    }


def benchmark_experiment_config(results_dir: Path, seeds: int, horizon: int, policies: list[str]) -> dict:
    """benchmark_config with several policies per seed: real runs of an
    experiment (e.g. the base experiment's 8 policies), sharing each seed's trace."""
    config = benchmark_config(results_dir, seeds, horizon)
    config["experiments"][EXPERIMENT]["policies"] = list(policies)
    return config


def run_pipeline(jobs: int, extra_args: list[str], variant: str, cores: int = 2,
                 snakefile: Path = REPOSITORY / "Snakefile", python: str = sys.executable,
                 horizon: int = 500, policies: tuple[str, ...] = ("random",)) -> PipelineTiming:
    """One benchmark run in a fresh scratch folder (its own .snakemake: a
    pipeline running in the repository is neither locked nor disturbed).
    ``jobs`` seeds of each of ``policies``; ``python`` and ``snakefile`` may be
    another checkout's (its environment's interpreter, so its own package)."""
    with tempfile.TemporaryDirectory(prefix="cqb-pipeline-benchmark-") as scratch:
        scratch = Path(scratch)
        overlay = scratch / "benchmark.yaml"
        overlay.write_text(yaml.safe_dump(benchmark_experiment_config(scratch / "results", jobs, horizon,
                                                                      list(policies))))
        usage = scratch / "usage.json"
        target = scratch / "results" / "aggregate" / f"{EXPERIMENT}.tsv"
        profile = default_profile(snakefile)
        command = [python, "-c", SNAKEMAKE_LAUNCHER, str(usage), str(target),
                   "--snakefile", str(snakefile), "--workflow-profile", str(profile),
                   "--configfile", str(overlay), "--cores", str(cores), *extra_args]
        started = time.perf_counter()
        completed = subprocess.run(command, cwd=scratch, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - started
        if completed.returncode != 0:
            print(completed.stderr[-2000:], file=sys.stderr)
        recorded = json.loads(usage.read_text()) if usage.exists() else {}
    runs = jobs * len(policies)
    return PipelineTiming(variant, runs, runs + 1, wall, recorded.get("snakemake_cpu", float("nan")),
                          recorded.get("jobs_cpu", float("nan")), completed.returncode)


def parse_variant(text: str) -> tuple[str, list[str]]:
    name, sep, args = text.partition("=")
    if not sep or not name:
        raise ValueError(f"--variant takes NAME='SNAKEMAKE ARGS', got {text!r}")
    return name, shlex.split(args)


def pipeline_table(timings: list[PipelineTiming], base_jobs: int, load: tuple[tuple, tuple]) -> str:
    lines = [
        "| variant | runs | wall (s) | Snakemake CPU (s) | Snakemake CPU per run (ms) "
        f"| per run vs {base_jobs} runs | jobs' CPU per run (ms) | all CPU per run (ms) | exit |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    per_job_at_base = {t.variant: t.snakemake_cpu / t.steps for t in timings if t.jobs == base_jobs}
    for t in timings:
        per_job = t.snakemake_cpu / t.steps
        ratio = per_job / per_job_at_base[t.variant] if t.variant in per_job_at_base else float("nan")
        lines.append(f"| {t.variant} | {t.jobs} | {t.wall:.1f} | {t.snakemake_cpu:.1f} | {1000 * per_job:.1f} "
                     f"| {ratio:.2f}× | {1000 * t.jobs_cpu / t.jobs:.0f} | "
                     f"{1000 * (t.snakemake_cpu + t.jobs_cpu) / t.jobs:.0f} | {t.returncode} |")
    before, after = load
    lines.append("")
    lines.append(f"Load averages (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in before)}; "
                 f"after: {', '.join(f'{x:.2f}' for x in after)}; {os.cpu_count()} CPUs; "
                 f"python {sys.version.split()[0]}.")
    return "\n".join(lines)


def pipeline_main(args) -> str:
    variants = {"profile": ([], {})}
    variants.update({name: (extra, {}) for name, extra in map(parse_variant, args.variant)})
    if args.baseline:  # another checkout's workflow and environment, timed beside
        checkout = Path(args.baseline).resolve()
        variants["baseline checkout"] = ([], {"snakefile": checkout / "Snakefile",
                                              "python": str(checkout / ".venv" / "bin" / "python")})
    policies = tuple(args.policies.split(","))
    load_before = os.getloadavg()
    timings = []
    for scale in args.scales:
        for name, (extra, checkout) in variants.items():
            timing = run_pipeline(args.jobs * scale, extra, name, cores=args.cores, horizon=args.horizon,
                                  policies=policies, **checkout)
            print(f"{name}: {timing.jobs} jobs, {timing.wall:.1f} s wall, Snakemake "
                  f"{1000 * timing.snakemake_cpu / timing.steps:.1f} ms CPU per job", file=sys.stderr)
            timings.append(timing)
    return pipeline_table(timings, args.jobs * args.scales[0] * len(policies), (load_before, os.getloadavg()))


def simulation_cpu(results_dir: Path) -> dict[Path, float]:
    """Each simulate log under ``results_dir`` → the run's own CPU seconds (its
    last line; logs without one, of runs that did not finish, are left out)."""
    from cqb.jobs.client import OWN_CPU

    cpu = {}
    for log in (results_dir / "logs" / "simulate").rglob("*.log"):
        found = OWN_CPU.findall(log.read_text(errors="replace"))
        if found:
            cpu[log] = float(found[-1])
    return cpu


def other_rules_cpu(results_dir: Path, data_benchmarks: Path) -> tuple[list[Path], float]:
    """The other rules' `benchmark:` files (under ``results_dir`` and the data
    rules' ``data_benchmarks``) and the CPU seconds they record in all."""
    import pandas as pd

    files = [*(results_dir / "benchmarks").rglob("*.tsv"), *data_benchmarks.rglob("*.tsv")]
    return files, sum(float(pd.read_csv(path, sep="\t")["cpu_time"].fillna(0).sum()) for path in files)


def run_split(results_dir: Path, row: dict, data_benchmarks: Path = Path("benchmarks")) -> str:
    """Where the CPU of one timed pipeline run (a `cqb time` row of a
    `snakemake` command) went: Snakemake's own process; the simulations
    themselves (the CPU each run's process reports in its log, which for a
    forked run excludes any start-up); the other rules (aggregation, figures,
    verdicts, data: their `benchmark:` files); and the rest — the simulate
    jobs' start-up (a shell and the `cqb run` that hands the run to the
    server, or starts Python and numpy itself) and the run server. Assumes
    every log and benchmark file under ``results_dir`` comes from that run
    (a fresh clone)."""
    runs = list(simulation_cpu(results_dir).values())
    benchmark_files, other = other_rules_cpu(results_dir, data_benchmarks)
    total, snakemake = float(row["cpu_seconds"]), float(row["snakemake_cpu_seconds"])
    simulations = sum(runs)
    rest = total - snakemake - simulations - other
    steps = len(runs) + len(benchmark_files)
    # (where, CPU seconds, the jobs it is spread over)
    parts = [("Snakemake's own process", snakemake, steps),
             (f"simulations ({len(runs)} runs, each run's own CPU from its log)", simulations, len(runs)),
             (f"other rules ({len(benchmark_files)} jobs: aggregation, figures, verdicts, data)", other,
              len(benchmark_files)),
             ("simulate jobs' start-up and hand-off, the run server (the rest)", rest, len(runs))]
    lines = [f"Run: {row['label']} ({row['date']}; wall {float(row['wall_seconds']):.0f} s, "
             f"load {row['load_before']} before, {row['load_mean']} mean).", "",
             "| where | CPU (s) | share | per job (ms) |", "| --- | ---: | ---: | ---: |"]
    for name, seconds, jobs in parts:
        lines.append(f"| {name} | {seconds:.0f} | {100 * seconds / total:.0f} % | {1000 * seconds / max(jobs, 1):.0f} |")
    lines.append(f"| all processes | {total:.0f} | 100 % | {1000 * total / max(steps, 1):.0f} |")
    return "\n".join(lines)


def split_main(args) -> str:
    import pandas as pd

    rows = pd.read_csv(args.timings, sep="\t")
    results = Path(args.results)
    # the data rules' benchmark files sit beside the results folder, in the workflow's folder
    return run_split(results, rows.iloc[args.row].to_dict(), data_benchmarks=results.resolve().parent / "benchmarks")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100, help="simulate jobs at scale 1 (default 100)")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10],
                        help="multiples of --jobs to run (default 1 10)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME='ARGS'",
                        help="extra Snakemake arguments timed beside the profile's (repeatable)")
    parser.add_argument("--cores", type=int, default=2, help="snakemake --cores (default 2)")
    parser.add_argument("--policies", default="random", help="the policies run on each seed, comma-separated")
    parser.add_argument("--horizon", type=int, default=500, help="T (default 500)")
    parser.add_argument("--baseline", metavar="CHECKOUT",
                        help="another checkout (its Snakefile, its .venv) timed beside")
    parser.add_argument("--split", action="store_true", help="where the CPU of a timed pipeline run went")
    parser.add_argument("--results", default="results", help="with --split: the run's results_dir")
    parser.add_argument("--timings", default="docs/results/timings.tsv", help="with --split: the cqb time table")
    parser.add_argument("--row", type=int, default=-1, help="with --split: which row (default the last)")
    parser.add_argument("--out", help="write the table here as well")
    args = parser.parse_args(argv)
    text = split_main(args) if args.split else pipeline_main(args)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
