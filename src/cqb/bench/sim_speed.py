"""CPU per simulation of this checkout against another source tree, side by side.

    python -m cqb.bench.sim_speed BASELINE_SRC [--horizon 5000] [--seeds 0-9] [--rounds 3]
                              [--policies cqb_opt,cqb_ts,...] [--instance JSON]

Each round, for each policy, runs the same seeds' simulations (the whole
simulate(): instance, trace, policy, oracle) in one fresh Python process per
source, the sources alternating so that load drifts hit both alike, and
reads the process CPU the runs took (after one untimed warm-up run). Prints
a Markdown table of the median CPU per run of each source and their ratio,
with the load averages. BASELINE_SRC is a `src/` folder of another checkout
(e.g. from `git archive`); it needs its compiled kernel beside its
`_kernel.c` (copy the built `.so` if the C file is the same).

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

from cqb.cli import BLAS_THREAD_VARIABLES
from cqb.pipeline.experiments import BASE_INSTANCE

BASE_INSTANCE = {**BASE_INSTANCE, "min_accept_rate": 0.005}
POLICIES = "cqb_opt,cqb_ts,cqb_eps,cqb_eta2,cqb_eps_opt,q_ths,q_ucb,random,oracle"

WORKER = """
import json, sys, time
from cqb.sim.simulate import simulate
spec, policy, horizon, seeds = json.loads(sys.argv[1])
simulate(spec, policy, None, horizon, seeds[0])  # warm-up: lazy imports, first-use caches
start = time.process_time()
for seed in seeds:
    simulate(spec, policy, None, horizon, seed)
print((time.process_time() - start) / len(seeds))
"""


def cpu_per_run(src: Path, spec: dict, policy: str, horizon: int, seeds: list[int]) -> float:
    environment = dict(os.environ, PYTHONPATH=str(src), **dict.fromkeys(BLAS_THREAD_VARIABLES, "1"))
    done = subprocess.run([sys.executable, "-c", WORKER, json.dumps([spec, policy, horizon, seeds])],
                          env=environment, capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        sys.exit(f"sim_speed: {policy} on {src} failed: {last}")
    return float(done.stdout.split()[-1])


def seed_range(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", type=Path, help="the other source tree's src/ folder")
    parser.add_argument("--horizon", type=int, default=5000)
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-9"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--policies", default=POLICIES)
    parser.add_argument("--instance", type=json.loads, default=BASE_INSTANCE)
    args = parser.parse_args(argv)
    this = Path(__file__).resolve().parents[2]
    sources = {"baseline": args.baseline.resolve(), "this checkout": this}
    policies = args.policies.split(",")
    times = {(name, policy): [] for name in sources for policy in policies}
    load_before = os.getloadavg()
    for round_number in range(args.rounds):
        for policy in policies:
            order = list(sources) if round_number % 2 == 0 else list(reversed(sources))
            for name in order:
                times[name, policy].append(cpu_per_run(sources[name], args.instance, policy, args.horizon,
                                                       args.seeds))
    load_after = os.getloadavg()
    print(f"simulate() per run, {len(args.seeds)} seeds ({args.seeds[0]}–{args.seeds[-1]}) × {args.rounds} "
          f"rounds per source, alternating; T = {args.horizon}; instance {json.dumps(args.instance)}; "
          f"baseline {args.baseline}; load average (1, 5, 15 min) "
          f"{', '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{', '.join(f'{x:.2f}' for x in load_after)} after\n")
    print("| policy | baseline: CPU per run (ms) | this checkout (ms) | this / baseline |")
    print("| --- | ---: | ---: | ---: |")
    for policy in policies:
        before = statistics.median(times["baseline", policy]) * 1000
        after = statistics.median(times["this checkout", policy]) * 1000
        print(f"| {policy} | {before:.1f} | {after:.1f} | {after / before:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
