"""CPU per simulation of this checkout against another source tree, side by side.

    python -m bench.sim_speed BASELINE [--build] [--horizon 5000] [--seeds 0-9] [--rounds 3]
                          [--policies cqb_opt,cqb_ts,...] [--instance JSON] [--cached-trace]
    python -m bench.sim_speed BASELINE --jobs-from LOG [--sample 400] [--workdir DIR]

Each round, for each policy, runs the same seeds' simulations (the whole
simulate(): instance, trace, policy, oracle) in one fresh Python process per
source, the sources alternating so that load drifts hit both alike, and
reads the process CPU the runs took (after one untimed warm-up run), and
the ratio of each round's pair too. With
``--cached-trace``, each seed's trace file is drawn first (untimed, by the same
source) and the runs play on it, as a workflow job does. Prints
a Markdown table of the median CPU per run of each source and their ratio,
with the load averages. BASELINE is another checkout (its root or its
`src/`) of any commit, built in place (bench.trees; ``--build`` builds it).

With ``--jobs-from``, the simulations are instead a random sample of the
simulate jobs a Snakemake log ran (its shell lines: instance spec, policy,
parameters, horizon, seed), the mix of a whole replication, each job drawing
its own trace (with ``--cached-trace``, playing a trace file drawn first, as
the workflow's jobs do); run from ``--workdir`` (where the pool files the specs name
are), and reported per policy and for the whole sample: the ratio of the sums of
CPU, the estimate of the ratio of the simulations' total CPU, with a
bootstrap interval over the jobs.

A measurement for docs/benchmarks.md, not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from cqb.jobs.run_command import BLAS_THREAD_VARIABLES
from cqb.config.experiments import BASE_INSTANCE
from cqb.policies import builtin_policies

from . import trees

BASE_INSTANCE = {**BASE_INSTANCE, "min_accept_rate": 0.005}
POLICIES = ",".join(builtin_policies())

WORKER = """
import json, os, sys, tempfile, time
from cqb.sim.simulate import draw, simulate
from cqb.sim.trace import save_trace
spec, policy, horizon, seeds, cached = json.loads(sys.stdin.read())
with tempfile.TemporaryDirectory() as folder:
    files = [None] * len(seeds)  # None: each run draws its own trace
    if cached:  # each seed's trace file drawn first, untimed
        for i, seed in enumerate(seeds):
            instance, _, trace, oracle_path = draw(spec, horizon, seed)
            files[i] = os.path.join(folder, f"{seed}.npz")
            save_trace(files[i], instance, spec, horizon, seed, trace, oracle_path)
    simulate(spec, policy, None, horizon, seeds[0], trace_file=files[0])  # warm-up: lazy imports, first-use caches
    start = time.process_time()
    for seed, path in zip(seeds, files):
        simulate(spec, policy, None, horizon, seed, trace_file=path)
    print((time.process_time() - start) / len(seeds))
"""


SAMPLE_WORKER = """
import json, os, sys, tempfile, time
from cqb.sim.simulate import draw, simulate
from cqb.sim.trace import save_trace
jobs, cached = json.loads(sys.stdin.read())
with tempfile.TemporaryDirectory() as folder:
    def trace_key(job):  # the workflow shares a trace between the runs of one instance, horizon and seed
        return json.dumps([job["spec"], job["horizon"], job["seed"]], sort_keys=True)
    files = {}  # with cached: each trace_key's file, drawn first, untimed
    for job in jobs if cached else []:
        if trace_key(job) not in files:
            instance, _, trace, oracle_path = draw(job["spec"], job["horizon"], job["seed"])
            files[trace_key(job)] = path = os.path.join(folder, f"{len(files)}.npz")
            save_trace(path, instance, job["spec"], job["horizon"], job["seed"], trace, oracle_path)
    def run(job):
        simulate(job["spec"], job["policy"], job["params"], job["horizon"], job["seed"],
                 trace_file=files.get(trace_key(job)))
    run(jobs[0])  # warm-up
    times = []
    for job in jobs:
        start = time.process_time()
        run(job)
        times.append(time.process_time() - start)
print(json.dumps(times))
"""


def _worker(src: Path, code: str, payload, what: str, cwd=None) -> str:
    environment = dict(os.environ, PYTHONPATH=str(src), **dict.fromkeys(BLAS_THREAD_VARIABLES, "1"))
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload), env=environment,
                          capture_output=True, text=True, cwd=cwd)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        sys.exit(f"sim_speed: {what} on {src} failed: {last}")
    return done.stdout.strip().splitlines()[-1]


def cpu_per_run(src: Path, spec: dict, policy: str, horizon: int, seeds: list[int], cached: bool = False) -> float:
    return float(_worker(src, WORKER, [spec, policy, horizon, seeds, cached], policy))


def sampled_jobs(log: Path, size: int, seed: int) -> list[dict]:
    """``size`` simulate jobs drawn at random from the shell lines of a Snakemake log."""
    import random
    import shlex

    jobs = []
    for line in log.read_text().splitlines():
        if line.startswith("Shell command: ") and " run --instance-spec " in line and "--policy" in line:
            words = shlex.split(line.split(" run ", 1)[1].split(" 2> ")[0])
            options = dict(zip(words[::2], words[1::2]))
            jobs.append({"spec": json.loads(options["--instance-spec"]), "policy": options["--policy"],
                         "params": json.loads(options.get("--params", "{}")),
                         "horizon": int(options["--horizon"]), "seed": int(options["--seed"])})
    if not jobs:
        sys.exit(f"sim_speed: no simulate job's shell line in {log}")
    return random.Random(seed).sample(jobs, min(size, len(jobs)))


def sample_table(sources: dict, jobs: list[dict], rounds: int, workdir: Path, cached: bool = False) -> list[str]:
    times = {name: [] for name in sources}
    for round_number in range(rounds):
        order = list(sources) if round_number % 2 == 0 else list(reversed(sources))
        for name in order:
            times[name].append(json.loads(_worker(sources[name], SAMPLE_WORKER, [jobs, cached], "the sample",
                                                  workdir)))
    # per job, the fastest of the rounds: the least disturbed by other work
    best = {name: [min(column) for column in zip(*times[name])] for name in sources}
    return sample_rows(jobs, best["baseline"], best["this checkout"])


def sample_rows(jobs: list[dict], before: list[float], after: list[float], resamples: int = 2000) -> list[str]:
    """Per policy and for the whole sample: the mean CPU per run of each
    source and the ratio of their sums, which estimates the ratio of the
    simulations' total CPU over the jobs sampled from; with a 95 % interval by
    the bootstrap over jobs, each job's pair kept together."""
    import numpy as np

    rng = np.random.default_rng(np.random.SeedSequence(0))
    rows = ["| policy | sampled runs | baseline: CPU per run (ms) | this checkout (ms) | this / baseline | "
            "95 % interval (bootstrap over jobs) |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    policies = sorted({job["policy"] for job in jobs},
                      key=lambda policy: -sum(t for job, t in zip(jobs, before) if job["policy"] == policy))
    for policy in policies + [None]:
        picked = np.array([i for i, job in enumerate(jobs) if policy is None or job["policy"] == policy])
        old, new = np.asarray(before)[picked], np.asarray(after)[picked]
        draws = rng.integers(0, len(picked), size=(resamples, len(picked)))
        ratios = new[draws].sum(axis=1) / old[draws].sum(axis=1)
        low, high = np.quantile(ratios, [0.025, 0.975])
        rows.append(f"| {policy or '**all**'} | {len(picked)} | {old.mean() * 1000:.1f} | {new.mean() * 1000:.1f} | "
                    f"{new.sum() / old.sum():.2f} | [{low:.2f}, {high:.2f}] |")
    return rows


def seed_range(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", type=Path, help="the other checkout (its root or its src/ folder)")
    parser.add_argument("--build", action="store_true",
                        help="first build the baseline in place (setup.py build_ext --inplace)")
    parser.add_argument("--horizon", type=int, default=5000)
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-9"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--policies", default=POLICIES)
    parser.add_argument("--instance", type=json.loads, default=BASE_INSTANCE)
    parser.add_argument("--cached-trace", action="store_true",
                        help="time the runs on trace files drawn first (untimed), as workflow jobs play")
    parser.add_argument("--jobs-from", type=Path, metavar="LOG", help="sample the simulate jobs of this Snakemake log")
    parser.add_argument("--sample", type=int, default=400, help="how many jobs --jobs-from samples")
    parser.add_argument("--sample-seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=Path.cwd(), help="where --jobs-from's jobs ran")
    args = parser.parse_args(argv)
    sources = {"baseline": trees.baseline(args.baseline, args.build), "this checkout": trees.SOURCE}
    if args.jobs_from:
        jobs = sampled_jobs(args.jobs_from, args.sample, args.sample_seed)
        load_before = os.getloadavg()
        rows = sample_table(sources, jobs, args.rounds, args.workdir.resolve(), args.cached_trace)
        load_after = os.getloadavg()
        what = ("on its trace file (drawn first, untimed, once per instance, horizon and seed)"
                if args.cached_trace else "(instance, trace drawn, policy, optimal queue)")
        print(f"simulate() per run {what}, {len(jobs)} simulate jobs "
              f"sampled (seed {args.sample_seed}) from {args.jobs_from}, each source {args.rounds} times in one "
              f"process per round, alternating, the fastest round per job; baseline {args.baseline}; "
              f"load average (1, 5, 15 min) {', '.join(f'{x:.2f}' for x in load_before)} before, "
              f"{', '.join(f'{x:.2f}' for x in load_after)} after\n")
        print("\n".join(rows))
        return 0
    policies = args.policies.split(",")
    times = {(name, policy): [] for name in sources for policy in policies}
    load_before = os.getloadavg()
    for round_number in range(args.rounds):
        for policy in policies:
            order = list(sources) if round_number % 2 == 0 else list(reversed(sources))
            for name in order:
                times[name, policy].append(cpu_per_run(sources[name], args.instance, policy, args.horizon,
                                                       args.seeds, args.cached_trace))
    load_after = os.getloadavg()
    what = "on a cached trace file" if args.cached_trace else "(instance, trace drawn, policy, optimal queue)"
    print(f"simulate() per run {what}, {len(args.seeds)} seeds ({args.seeds[0]}–{args.seeds[-1]}) × {args.rounds} "
          f"rounds per source, alternating; T = {args.horizon}; instance {json.dumps(args.instance)}; "
          f"baseline {args.baseline}; load average (1, 5, 15 min) "
          f"{', '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{', '.join(f'{x:.2f}' for x in load_after)} after\n")
    print("\n".join(speed_rows(times, policies)))
    return 0


def speed_rows(times: dict, policies: list[str]) -> list[str]:
    """The Markdown table of each policy's median CPU per run by source, their
    ratio, and the ratio round by round (this round's two processes, run one
    after the other): its median and range, which a drift between rounds
    cannot bias."""
    rows = ["| policy | baseline: CPU per run (ms) | this checkout (ms) | this / baseline | "
            "round by round: median [min, max] |", "| --- | ---: | ---: | ---: | ---: |"]
    for policy in policies:
        base, this = times["baseline", policy], times["this checkout", policy]
        paired = [after / before for before, after in zip(base, this)]
        before, after = statistics.median(base) * 1000, statistics.median(this) * 1000
        rows.append(f"| {policy} | {before:.1f} | {after:.1f} | {after / before:.2f} | "
                    f"{statistics.median(paired):.2f} [{min(paired):.2f}, {max(paired):.2f}] |")
    return rows


if __name__ == "__main__":
    sys.exit(main())
