"""Two full runs of the replication side by side: as wholes, and the
simulations' own CPU on the jobs both ran.

    python -m bench.common_jobs CLONE_BASELINE CLONE [--out FILE]

Each CLONE is a fresh clone in which the whole replication ran under
`cqb time` (its last row of docs/results/timings.tsv of `snakemake --cores
N`, with or without `--config` settings such as the execution switches, and
no target: wall time, the CPU of all processes, Snakemake's own) and left
its simulate logs (results/logs/simulate/INSTANCE/T/POLICY/seedN.log, each ending with the
run's CPU in its process). Runs of different commits hold different
experiments, so the simulations are also compared on the jobs of the trace
keys (instance, horizon, seed) whose every job, and only those, both ran:
the first job of a key draws its trace and the others read it, so a key's
total is comparable whichever of its jobs drew it. Prints Markdown (and
writes it to FILE).
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

CPU = re.compile(r"\(([\d.]+) s CPU in this process\)")
# `--config` takes every argument after it, so a command with it names no target
WHOLE_RUN = re.compile(r"\S*snakemake --cores \d+(?: --config \S.*)?")


def job_cpu(results: Path) -> dict[tuple, float]:
    """(instance, horizon, policy, seed) → the run's CPU (s), from every simulate log that ended."""
    cpu = {}
    folder = results / "logs" / "simulate"
    for log in folder.glob("*/*/*/seed*.log"):
        match = CPU.search(log.read_text(errors="replace"))
        if match:
            instance, horizon, policy = log.relative_to(folder).parts[:3]
            cpu[instance, horizon, policy, log.stem] = float(match.group(1))
    return cpu


def by_trace(cpu: dict[tuple, float]) -> dict[tuple, set]:
    keys = defaultdict(set)
    for instance, horizon, policy, seed in cpu:
        keys[instance, horizon, seed].add(policy)
    return keys


def whole_run(clone: Path) -> dict:
    """The clone's last `cqb time` row of a whole replication (`snakemake --cores N`, perhaps with
    `--config` settings, and no target) and its commit."""
    with open(clone / "docs" / "results" / "timings.tsv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle, delimiter="\t")
                if WHOLE_RUN.fullmatch(row["command"].strip())]
    if not rows:
        sys.exit(f"common_jobs: no timed run of the whole replication in {clone}/docs/results/timings.tsv")
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    return {**rows[-1], "commit": commit}


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {round(seconds % 60):02d} s"


def report(clones: dict[str, Path]) -> str:
    runs = {name: job_cpu(clone / "results") for name, clone in clones.items()}
    timed = {name: whole_run(clone) for name, clone in clones.items()}
    traces = {name: by_trace(cpu) for name, cpu in runs.items()}
    baseline, this = list(clones)
    shared = {key for key, policies in traces[baseline].items() if traces[this].get(key) == policies}
    lines = ["| run | commit | wall time | CPU, all processes (s) | Snakemake's own (s) | load (1 min): mean "
             "| simulate runs | their CPU (s) | per run (ms) | common runs | their CPU (s) | per run (ms) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    common = {}
    for name, cpu in runs.items():
        row = timed[name]
        picked = [value for (instance, horizon, _, seed), value in cpu.items() if (instance, horizon, seed) in shared]
        common[name] = sum(picked)
        total = sum(cpu.values())
        lines.append(f"| {name} | {row['commit']} | {minutes(float(row['wall_seconds']))} | "
                     f"{float(row['cpu_seconds']):.0f} | {float(row['snakemake_cpu_seconds']):.0f} | "
                     f"{row['load_mean']} | {len(cpu)} | {total:.0f} | {1000 * total / max(len(cpu), 1):.1f} | "
                     f"{len(picked)} | {common[name]:.0f} | {1000 * common[name] / max(len(picked), 1):.1f} |")
    if common[baseline]:
        lines.append(f"\nOn the common runs ({len(shared)} trace keys), the simulations' CPU, "
                     f"{this} / {baseline}: {common[this] / common[baseline]:.3f}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", type=Path, help="the baseline's fresh clone")
    parser.add_argument("clone", type=Path, help="this code's fresh clone")
    parser.add_argument("--out", type=Path, help="write the Markdown here as well")
    args = parser.parse_args(argv)
    text = report({"baseline": args.baseline, "this code": args.clone})
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
