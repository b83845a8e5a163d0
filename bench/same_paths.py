"""Does a change to the simulation code keep every output bit? Simulate jobs
sampled from a Snakemake log (or dry run) with this checkout and with a
baseline tree, and compare what each run file stores: Q(t), Q*(t), the gap
and the explored flags, array for array, bit for bit.

    python -m bench.same_paths BASELINE --jobs-from LOG [--sample 400] [--sample-seed 0] [--out FILE]

A change meant to alter no result (a refactor, a faster loop with the same
arithmetic) is checked here before a full rerun, and the full rerun's tables
then match the published ones. Pool jobs need the pool files the log names
(run from the checkout that preprocessed them). Prints a Markdown table per
policy; both trees' simulation code hashes head it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .sim_speed import sampled_jobs
from .trees import CHECKOUT, SOURCE, baseline as baseline_tree

KEYS = ("queue", "oracle_queue", "gap", "explored")

# Runs the jobs of stdin's JSON list in the tree on PYTHONPATH, one .npz per job into argv[1].
WORKER = r"""
import json, sys
import numpy as np
from cqb.sim.code_hash import simulation_code_hash
from cqb.sim.simulate import simulate
jobs = json.load(sys.stdin)
for i, job in enumerate(jobs):
    result = simulate(job["spec"], job["policy"], job["params"], job["horizon"], job["seed"])
    np.savez(f"{sys.argv[1]}/{i}.npz", queue=result.queue, oracle_queue=result.oracle_queue,
             gap=result.gap, explored=result.explored)
print(simulation_code_hash())
"""


def run_jobs(src: Path, jobs: list[dict], folder: Path) -> str:
    """Every job simulated by the tree at ``src`` into ``folder``; the tree's code hash."""
    environment = dict(os.environ, PYTHONPATH=str(src), OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", WORKER, str(folder)], input=json.dumps(jobs), env=environment,
                          capture_output=True, text=True, cwd=CHECKOUT)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        sys.exit(f"same_paths: the jobs on {src} failed: {last}")
    return done.stdout.strip().splitlines()[-1]


def differing(old: Path, new: Path) -> list[str]:
    """The stored arrays that differ between two run outputs (NaN equals NaN)."""
    import numpy as np

    with np.load(old) as a, np.load(new) as b:
        return [key for key in KEYS if not (a[key].shape == b[key].shape
                                            and np.array_equal(a[key], b[key], equal_nan=True))]


def comparison_table(jobs: list[dict], differences: list[list[str]]) -> list[str]:
    rows = ["| policy | sampled runs | every array the same | differing runs (arrays) |",
            "| --- | ---: | ---: | --- |"]
    for policy in sorted({job["policy"] for job in jobs}) + [None]:
        picked = [i for i, job in enumerate(jobs) if policy is None or job["policy"] == policy]
        changed = [i for i in picked if differences[i]]
        detail = "; ".join(f"seed {jobs[i]['seed']}, T = {jobs[i]['horizon']} ({', '.join(differences[i])})"
                           for i in changed[:5]) + (" …" if len(changed) > 5 else "")
        rows.append(f"| {policy or '**all**'} | {len(picked)} | {len(picked) - len(changed)} | {detail or '–'} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", help="another checkout (or its src/), built in place")
    parser.add_argument("--build", action="store_true", help="first build the baseline in place")
    parser.add_argument("--jobs-from", type=Path, required=True, help="a Snakemake log or dry run (its shell lines)")
    parser.add_argument("--sample", type=int, default=400)
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the table here as well")
    args = parser.parse_args(argv)
    sampled = sampled_jobs(args.jobs_from, args.sample, args.sample_seed)
    jobs = [job for job in sampled if job["spec"].get("kind") != "pool" or (CHECKOUT / job["spec"]["pool"]).exists()]
    old_src = baseline_tree(args.baseline, args.build)
    with tempfile.TemporaryDirectory() as scratch:
        old, new = Path(scratch, "baseline"), Path(scratch, "this")
        old.mkdir()
        new.mkdir()
        old_hash = run_jobs(old_src, jobs, old)
        new_hash = run_jobs(SOURCE, jobs, new)
        differences = [differing(old / f"{i}.npz", new / f"{i}.npz") for i in range(len(jobs))]
    same = sum(not d for d in differences)
    skipped = f" ({len(sampled) - len(jobs)} more left out: their pool files are not built here)" \
        if len(jobs) < len(sampled) else ""
    lines = [f"{len(jobs)} simulate jobs sampled (seed {args.sample_seed}) from {args.jobs_from.name}{skipped}, each run "
             f"by the baseline (simulation code {old_hash}) and by this checkout ({new_hash}): every stored array "
             f"(Q(t), Q*(t), the gap, the explored flags) the same, bit for bit, in {same} of {len(jobs)}.", "",
             *comparison_table(jobs, differences)]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0 if same == len(jobs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
