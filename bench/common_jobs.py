"""The simulations' own CPU of two full runs, on the jobs both ran.

    python -m bench.common_jobs RESULTS_BASELINE RESULTS_THIS

Each simulate log (RESULTS/logs/simulate/INSTANCE/T/POLICY/seedN.log) ends
with the run's CPU in its process. Two runs of the whole replication from
different commits hold different experiments; this sums each run's CPU over
the jobs of the trace keys (instance, horizon, seed) whose every job, and
only those, both ran: the first job of a key draws its trace and the others
read it, so a key's total is comparable whichever of its jobs drew it.
Prints a Markdown table: all jobs of each run, and the common ones.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

CPU = re.compile(r"\(([\d.]+) s CPU in this process\)")


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


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    runs = {"baseline": job_cpu(Path(argv[0])), "this checkout": job_cpu(Path(argv[1]))}
    traces = {name: by_trace(cpu) for name, cpu in runs.items()}
    shared = {key for key, policies in traces["baseline"].items() if traces["this checkout"].get(key) == policies}
    rows = ["| run | jobs | CPU (s) | per job (ms) | common jobs | their CPU (s) | per job (ms) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    common = {}
    for name, cpu in runs.items():
        picked = [value for (instance, horizon, policy, seed), value in cpu.items() if (instance, horizon, seed) in shared]
        common[name] = sum(picked)
        rows.append(f"| {name} ({argv[0] if name == 'baseline' else argv[1]}) | {len(cpu)} | {sum(cpu.values()):.0f} | "
                    f"{1000 * sum(cpu.values()) / max(len(cpu), 1):.1f} | {len(picked)} | {common[name]:.0f} | "
                    f"{1000 * common[name] / max(len(picked), 1):.1f} |")
    print("\n".join(rows))
    if common["baseline"]:
        print(f"\nOn the common jobs ({len(shared)} trace keys), this / baseline: "
              f"{common['this checkout'] / common['baseline']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
