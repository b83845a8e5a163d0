"""A `cqb run` job's start-up as a new process, beside another tree's.

    python -m bench.startup [--runs 20] [--baseline TREE [--build]] [--out FILE]

Times ``cqb run --policy cqb_opt --seed 0 --horizon 500`` as a new process
(see :func:`startup_times`): to its exit, and to the start of its first
simulation loop (a probe wrapped around cqb.sim.simulate.run_policy from
outside the simulation code). Then the same job handed to a run server
(cqb.jobs), as the workflow's jobs are. Prints a Markdown table.

A measurement for docs/benchmarks.md, not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import trees

# What the console script `cqb` runs (without its argv[0] clean-up), with the
# loop-start probe wrapped around cqb.sim.simulate.run_policy from outside the
# simulation code: BLAS pinned first, as `cqb run` does before numpy's import.
LOOP_START_LINE = "cqb: loop start "
CLI_SCRIPT = (
    "import sys, time\n"
    "from cqb.cli import main\n"
    "try:\n"
    "    from cqb.jobs.run_command import pin_blas_to_one_thread\n"
    "except ImportError:  # an older tree\n"
    "    from cqb.cli import pin_blas_to_one_thread\n"
    "pin_blas_to_one_thread()\n"
    "import cqb.sim.simulate as simulate\n"
    "inner = simulate.run_policy\n"
    "def probed(*args, **kwargs):\n"
    f"    print(f'{LOOP_START_LINE}{{time.time():.6f}}', file=sys.stderr, flush=True)\n"
    "    return inner(*args, **kwargs)\n"
    "simulate.run_policy = probed\n"
    "sys.exit(main())\n")
STARTUP_RUN = ["run", "--policy", "cqb_opt", "--seed", "0", "--horizon", "500"]
FORKED = "this checkout, forked by the run server"


def startup_times(sources: dict[str, Path], runs: int = 20, out_dir: Path | None = None,
                  server_socket: str | None = None) -> dict:
    """Wall times of `cqb run --policy cqb_opt --seed 0 --horizon 500` as a new
    process, ``runs`` times for each labelled source directory (put first on
    PYTHONPATH), interleaved so that load changes hit every source alike.

    Per label: "process" (seconds from spawning to exit), "cpu" (its user +
    system CPU seconds, less sensitive to the machine's load) and "loop_start"
    (seconds from spawning to the start of the first simulation loop: the
    process runs CLI_SCRIPT, which wraps cqb.sim.simulate.run_policy with a
    probe; empty for a forked job, whose loop runs in the server's fork). One untimed run per source first writes its bytecode
    caches, as a pipeline job finds them; PYTHONDONTWRITEBYTECODE is dropped
    for that reason. With ``server_socket`` (a running cqb.jobs.server), the
    last source is timed a second time as a job the server forks (label
    FORKED; its CPU is the job's process plus the forked run's own)."""
    from cqb.jobs.client import OWN_CPU, RUN_SERVER_VARIABLE
    from cqb.publishing.timing import children_cpu

    labels = list(sources) + ([FORKED] if server_socket else [])
    times = {label: {"process": [], "cpu": [], "loop_start": []} for label in labels}
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(out_dir or scratch) / "startup.npz"
        environments = {}
        for label, src in sources.items():
            env = {key: value for key, value in os.environ.items()
                   if key not in ("PYTHONDONTWRITEBYTECODE", RUN_SERVER_VARIABLE)}
            env.update(PYTHONPATH=str(Path(src).resolve()))
            environments[label] = env
        if server_socket:
            # without PYTHONPATH: the server (the installed cqb) takes only jobs whose start-up
            # environment is its own
            environments[FORKED] = {**{key: value for key, value in os.environ.items()
                                       if key != RUN_SERVER_VARIABLE}, RUN_SERVER_VARIABLE: server_socket}
        command = [sys.executable, "-c", CLI_SCRIPT, *STARTUP_RUN, "--out", str(out)]
        for repeat in range(runs + 1):
            for label in labels:
                cpu_before = children_cpu()
                spawned, started = time.time(), time.perf_counter()
                done = subprocess.run(command, env=environments[label], capture_output=True, text=True)
                elapsed = time.perf_counter() - started
                cpu = children_cpu() - cpu_before
                if done.returncode != 0:
                    raise RuntimeError(f"{label}: cqb run failed: {done.stderr.strip()}")
                if repeat == 0:
                    continue  # the warm-up run
                times[label]["process"].append(elapsed)
                if label == FORKED:
                    cpu += float(OWN_CPU.search(done.stderr).group(1))
                times[label]["cpu"].append(cpu)
                probes = [line for line in done.stderr.splitlines() if line.startswith(LOOP_START_LINE)]
                if probes:
                    times[label]["loop_start"].append(float(probes[0][len(LOOP_START_LINE):]) - spawned)
    return times


def startup_table(times: dict, load_before: tuple, load_after: tuple) -> str:
    def cells(values):
        if not values:
            return "no probe | no probe"
        return f"{statistics.median(values):.3f} s | {min(values):.3f} s"

    runs = max(len(entry["process"]) for entry in times.values())
    lines = [f"`cqb {' '.join(STARTUP_RUN)} --out …` as a new process, {runs} runs per source, "
             f"interleaved; Python {platform.python_version()}; load average (1, 5, 15 min) "
             f"{', '.join(f'{x:.2f}' for x in load_before)} before, "
             f"{', '.join(f'{x:.2f}' for x in load_after)} after", "",
             "| source | process: median | process: min | to the first round: median "
             "| to the first round: min | CPU of the process: median |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for label, entry in times.items():
        lines.append(f"| {label} | {cells(entry['process'])} | {cells(entry['loop_start'])} "
                     f"| {statistics.median(entry['cpu']):.3f} s |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="runs per source (default 20)")
    parser.add_argument("--baseline", metavar="TREE", help="another checkout (or its src/), timed beside this one")
    parser.add_argument("--build", action="store_true", help="first build the baseline in place")
    parser.add_argument("--out", help="write the table here as well")
    args = parser.parse_args(argv)
    sources = {"this checkout": trees.SOURCE}
    if args.baseline:
        sources = {f"baseline {args.baseline}": trees.baseline(args.baseline, args.build), **sources}
    from cqb.jobs import client as run_client

    server = run_client.start()  # as the workflow starts it; None where it cannot run
    load_before = os.getloadavg()
    try:
        times = startup_times(sources, args.runs, server_socket=server and server.socket_path)
    finally:
        if server:
            server.stop()
    text = startup_table(times, load_before, os.getloadavg())
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
