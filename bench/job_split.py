"""Where a `cqb run` job's in-process CPU goes: the policy's round loop against
everything else (instance, trace, oracle, I/O), with and without a trace file.

    python -m bench.job_split [--policy cqb_opt] [--horizon 5000] [--seeds 0-9]
                              [--instance JSON] [--baseline TREE [--build]] [--out FILE]

Each seed runs ``cqb.cli.main(["run", ...])`` in this process
(after one untimed warm-up run): once drawing its trace itself, once on the
trace file that ``cqb run --draw-trace`` wrote for it. The loop is the CPU
time inside cqb.sim.simulate.run_policy, timed by a wrapper put around it
from here, so the simulation code carries no probe. ``--baseline TREE``
(another checkout, built in place: bench.trees) times that code's drawn jobs
beside, in a process of its own. Prints a Markdown table of the medians.

A measurement for docs/benchmarks.md, not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cqb.cli import main as cqb_main
from cqb.jobs.run_command import pin_blas_to_one_thread
from cqb.config.experiments import BASE_INSTANCE

from . import trees


def _profiled(argv: list[str]) -> tuple[float, float]:
    """(CPU seconds of the whole call, CPU seconds inside run_policy), the loop
    timed by a wrapper around cqb.sim.simulate.run_policy (no profiler: its
    per-call cost would inflate the loop's many small calls)."""
    from cqb.sim import simulate

    inner, spent = simulate.run_policy, []

    def timed(*args, **kwargs):
        started = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent.append(time.process_time() - started)

    simulate.run_policy = timed
    try:
        started = time.process_time()
        code = cqb_main(argv)
        total = time.process_time() - started
    finally:
        simulate.run_policy = inner
    if code != 0:
        raise RuntimeError(f"cqb {' '.join(argv)} exited {code}")
    return total, sum(spent)


def split(policy: str, horizon: int, seeds: list[int], instance: dict, scratch: Path) -> dict:
    common = ["--instance-spec", json.dumps(instance), "--horizon", str(horizon)]
    cqb_main(["run", "--policy", policy, *common, "--seed", str(seeds[0]), "--out", str(scratch / "warm.npz")])
    rows = {"drawn": [], "trace file": [], "drawing the trace file": []}
    for seed in seeds:
        trace = scratch / f"trace{seed}.npz"
        rows["drawing the trace file"].append(
            (_profiled(["run", "--draw-trace", *common, "--seed", str(seed), "--out", str(trace)])[0], 0.0))
        rows["drawn"].append(_profiled(["run", "--policy", policy, *common, "--seed", str(seed),
                                        "--out", str(scratch / "drawn.npz")]))
        rows["trace file"].append(_profiled(["run", "--policy", policy, *common, "--seed", str(seed),
                                             "--trace", str(trace), "--out", str(scratch / "read.npz")]))
    return rows


# The drawn job of another checkout, timed the same way in its own process.
BASELINE_SCRIPT = """
import json, sys, time
from cqb.cli import main
try:
    from cqb.jobs.run_command import pin_blas_to_one_thread
except ImportError:  # an older tree
    from cqb.cli import pin_blas_to_one_thread
pin_blas_to_one_thread()
from cqb.sim import simulate
inner, spent = simulate.run_policy, []
def timed(*args, **kwargs):
    started = time.process_time()
    try:
        return inner(*args, **kwargs)
    finally:
        spent.append(time.process_time() - started)
simulate.run_policy = timed
policy, common, seeds, out = json.loads(sys.argv[1])
main(["run", "--policy", policy, *common, "--seed", str(seeds[0]), "--out", out])
rows = []
for seed in seeds:
    spent.clear()
    started = time.process_time()
    main(["run", "--policy", policy, *common, "--seed", str(seed), "--out", out])
    rows.append((time.process_time() - started, sum(spent)))
print(json.dumps(rows))
"""


def baseline_split(src: Path, policy: str, horizon: int, seeds: list[int], instance: dict, scratch: Path) -> list:
    import subprocess

    common = ["--instance-spec", json.dumps(instance), "--horizon", str(horizon)]
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", BASELINE_SCRIPT,
                           json.dumps([policy, common, seeds, str(scratch / "baseline.npz")])],
                          env=env, capture_output=True, text=True, check=True)
    return [tuple(row) for row in json.loads(done.stdout.splitlines()[-1])]


def table(rows: dict, policy: str, horizon: int, seeds: list[int], instance: dict) -> str:
    lines = [f"{policy}, T = {horizon}, seeds {seeds[0]}–{seeds[-1]}, instance {json.dumps(instance)}; "
             "in-process CPU (process time, medians over seeds)", "",
             "| job | total | policy's round loop | outside the loop | outside, share |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for label, values in rows.items():
        total = statistics.median(t for t, _ in values)
        loop = statistics.median(loop for _, loop in values)
        share = statistics.median((t - loop) / t for t, loop in values)
        lines.append(f"| {label} | {total * 1e3:.1f} ms | {loop * 1e3:.1f} ms | {(total - loop) * 1e3:.1f} ms "
                     f"| {share:.0%} |")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return "\n".join(lines + ["", f"Load average (1, 5, 15 min) after: {load}."]) + "\n"


def _seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="cqb_opt")
    parser.add_argument("--horizon", type=int, default=5000)
    parser.add_argument("--seeds", default="0-9", help="a range, e.g. 0-9")
    parser.add_argument("--instance", default=json.dumps(BASE_INSTANCE), help="instance spec as JSON")
    parser.add_argument("--baseline", metavar="TREE", help="another checkout (or its src/), its drawn jobs timed beside")
    parser.add_argument("--build", action="store_true", help="first build the baseline in place")
    parser.add_argument("--out", help="write the table here as well")
    args = parser.parse_args(argv)
    pin_blas_to_one_thread()
    seeds, instance = _seeds(args.seeds), json.loads(args.instance)
    with tempfile.TemporaryDirectory() as scratch:
        rows = {}
        if args.baseline:
            src = trees.baseline(args.baseline, args.build)
            rows["baseline checkout, drawn"] = baseline_split(src, args.policy, args.horizon, seeds, instance,
                                                              Path(scratch))
        rows.update(split(args.policy, args.horizon, seeds, instance, Path(scratch)))
        text = table(rows, args.policy, args.horizon, seeds, instance)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
