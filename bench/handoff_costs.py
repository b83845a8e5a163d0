"""What a simulate job's hand-off to the run server costs, per job, variants side by side.

    python -m bench.handoff_costs [--jobs 50] [--rounds 3] [--baseline TREE [--build]] [--phases 20]

Starts a run server from this checkout (cqb.jobs.client.start, with the
compiled client the package build made) and, with ``--baseline``, one from another
checkout, built in place (bench.trees), by that tree's own start()
(cqb.jobs.client, or cqb.run_client in older trees), whose forked runs show
the fixed costs before a change. Then it runs the simulate
rule's shell line as the workflow does (``/bin/sh -c 'CLIENT run ... 2> LOG'``,
execution.simulate_in_sh; T = 500, the oracle at the base instance, a new
seed per job, the same seeds in every variant) one job at a time, ``--jobs``
per variant, the variants alternating within each of ``--rounds`` rounds so
that load changes hit them alike:

* the Python client (``cqb``) or the compiled one through this checkout's
  server; the compiled one through a server of this checkout that forks a
  worker for every run (``worker_runs=1``); and the baseline's compiled client through its own server (each
  server with the client of its own tree: their protocols may differ);
* the compiled client through this checkout's server in Snakemake's own
  shell, ``bash -c 'set -euo pipefail; ...'`` (execution.simulate_in_sh false);
* ``no server``: ``cqb run`` in its own process, as without the run server.

Per variant and job: the CPU of the job's process tree (the shell and the client,
``RUSAGE_CHILDREN`` of this process), of the server itself
(``/proc/PID/schedstat``) and of its workers' runs (``cutime + cstime`` of
``/proc/PID/stat`` for the workers it waited for, in clock ticks, so summed
over a batch, and the schedstat of those alive), and the median wall time of a job. With ``--phases N``, also the
in-process CPU of the phases of a run in N forks of a process prepared as the
server prepares itself (its preload), for this checkout and the
baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cqb.jobs import client as run_client
from cqb.publishing.timing import children_cpu

from . import trees

INSTANCE = {"kind": "synthetic", "n_servers": 5, "dim": 5, "arrival_rate": 0.7, "slack": 0.1}
FIRST_SEED = 700_000  # no experiment's
TICK = os.sysconf("SC_CLK_TCK")


def _schedstat(pid: int | str) -> float:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def _server_cpu(pid: int) -> tuple[float, float]:
    """(the server's own CPU seconds, its workers'): the workers it waited
    for (cutime + cstime) and those still alive (a worker serves many runs).
    A worker alive at one reading and reaped by the next counts once: its
    whole life is in cutime then, its part before in the first reading."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    waited = (int(fields[13]) + int(fields[14])) / TICK
    alive = 0.0
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            alive += _schedstat(child)
        except (FileNotFoundError, ProcessLookupError):  # gone since the listing: then in cutime
            pass
    return _schedstat(pid), waited + alive


# The job's shell as Snakemake runs it: bash gets Snakemake's strict-mode prefix, other shells none.
SHELL, BASH = "/bin/sh", "bash"


def _job_line(client: str, seed: int, out: Path, log: Path, code_hash: str, shell: str = SHELL) -> str:
    prefix = "set -euo pipefail; " if shell == BASH else ""
    return (f"{prefix}{shlex.quote(client)} run --instance-spec {shlex.quote(json.dumps(INSTANCE))} "
            f"--policy oracle --params '{{}}' --horizon 500 --seed {seed} --code-hash {code_hash} "
            f"--out {shlex.quote(str(out))} 2> {shlex.quote(str(log))}")


def run_batch(client: str, env: dict, server_pid: int | None, jobs: int, first_seed: int, scratch: Path,
              code_hash: str, shell: str = SHELL) -> dict:
    walls = []
    jobs_before = children_cpu()
    server_before = _server_cpu(server_pid) if server_pid else (0.0, 0.0)
    for index in range(jobs):
        out, log = scratch / f"run{index}.npz", scratch / f"run{index}.log"
        started = time.perf_counter()
        done = subprocess.run([shell, "-c", _job_line(client, first_seed + index, out, log, code_hash, shell)],
                              env=env)
        walls.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise RuntimeError(f"{client}: job failed ({done.returncode}): {log.read_text().strip()}")
        out.unlink()
        log.unlink()
    server_after = _server_cpu(server_pid) if server_pid else (0.0, 0.0)
    return {"job tree": (children_cpu() - jobs_before) / jobs, "server": (server_after[0] - server_before[0]) / jobs,
            "forked run": (server_after[1] - server_before[1]) / jobs, "wall": walls}


def handoff_table(results: dict, jobs: int, rounds: int, load: tuple) -> str:
    lines = [f"T = 500 oracle runs (base instance), {jobs} jobs per variant in each of {rounds} rounds, "
             f"alternating; per job, mean of the rounds' CPU; load average (1, 5, 15 min) "
             f"{', '.join(f'{x:.2f}' for x in load[0])} before, {', '.join(f'{x:.2f}' for x in load[1])} after; "
             f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}", "",
             "| variant | job tree: shell + client (ms) | server (ms) | run in a worker (ms) | all (ms) "
             "| wall: median (ms) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, batches in results.items():
        cpu = {key: 1000 * statistics.mean(batch[key] for batch in batches)
               for key in ("job tree", "server", "forked run")}
        wall = 1000 * statistics.median(w for batch in batches for w in batch["wall"])
        lines.append(f"| {name} | {cpu['job tree']:.1f} | {cpu['server']:.1f} | {cpu['forked run']:.1f} "
                     f"| {sum(cpu.values()):.1f} | {wall:.1f} |")
    return "\n".join(lines)


PHASES_SCRIPT = r"""
import gc, json, os, resource, statistics, sys, time
try:  # what a worker runs: `cqb run` itself
    from cqb.jobs import run_command as command
    parser, run = "run_parser", lambda argv: command.main(argv[1:])
except ImportError:  # an older tree: the command line
    from cqb import cli as command
    parser, run = "command_parser" if hasattr(command, "command_parser") else "build_parser", command.main
try:
    from cqb.jobs import server as run_server
except ImportError:  # an older tree
    from cqb import run_server
getattr(run_server, "prepare", run_server.preload)()  # what the server does before its first fork
import cqb.sim.runfile as runfile, cqb.sim.simulate as simulate
argv = json.loads(sys.argv[1])
runs = []

def timed(module, name, phase, spent):
    function = getattr(module, name)
    def wrapper(*args, **kwargs):
        started = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[phase] = spent.get(phase, 0.0) + time.process_time() - started
    setattr(module, name, wrapper)

for index in range(int(sys.argv[2]) + 1):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        spent = {}
        timed(command, parser, "parser", spent)
        timed(simulate, "instance_from_spec", "instance", spent)
        timed(simulate, "draw_trace", "trace", spent)
        timed(simulate, "play", "policy", spent)
        timed(runfile, "save_run", "run file", spent)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        started = time.process_time()
        run(argv)
        spent["all"] = time.process_time() - started
        spent["page faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt / 1000
        os.write(write, json.dumps(spent).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    if index:  # the first fork is a warm-up
        runs.append(json.loads(data))
print(json.dumps({key: statistics.median(run.get(key, 0.0) for run in runs) for key in runs[0]}))
"""


def phases_table(forks: int, scratch: Path, rounds: int, sources: dict[str, dict]) -> str:
    """The phases of a forked run in each source (label -> the environment that imports it)."""
    argv = ["run", "--instance-spec", json.dumps(INSTANCE), "--policy", "oracle", "--params", "{}", "--horizon", "500",
            "--seed", str(FIRST_SEED), "--code-hash", "x", "--out", str(scratch / "phases.npz")]
    medians = {label: [] for label in sources}
    for _ in range(rounds):
        for label, env in sources.items():
            done = subprocess.run([sys.executable, "-c", PHASES_SCRIPT, json.dumps(argv), str(forks)],
                                  env=env, capture_output=True, text=True, check=True)
            medians[label].append(json.loads(done.stdout))
    keys = list(medians[list(sources)[-1]][0])
    lines = [f"In-process CPU (ms; page faults in thousands) of the phases of one forked run (T = 500 oracle run), "
             f"median of {forks} forks of a process prepared as the server prepares itself, mean of {rounds} "
             f"alternating rounds; \"all\" is cli.main", "",
             "| source | " + " | ".join(keys) + " |", "| --- |" + " ---: |" * len(keys)]
    for label, runs in medians.items():
        cells = [statistics.mean(run.get(key, 0.0) for run in runs) * (1 if key == "page faults" else 1000)
                 for key in keys]
        lines.append(f"| {label} | " + " | ".join(f"{cell:.1f}" for cell in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout (or its src/) whose server to compare with")
    parser.add_argument("--build", action="store_true", help="first build the baseline in place")
    parser.add_argument("--phases", type=int, default=0, metavar="N", help="also time a run's phases in N forks")
    args = parser.parse_args(argv)
    from cqb.sim.code_hash import simulation_code_hash

    load_before = os.getloadavg()
    cqb = str(Path(sys.executable).parent / "cqb")
    base_env = {key: value for key, value in os.environ.items()
                if key not in (run_client.RUN_SERVER_VARIABLE, run_client.RUN_CLIENT_VARIABLE,
                               run_client.RUN_FALLBACK_VARIABLE)}
    servers = {}  # label -> (socket path, server pid, its own compiled client, the jobs' environment)
    baseline = None
    if args.baseline:  # started by the baseline's own client module, in a process that waits for our exit
        starter = ("import sys\ntry:\n    from cqb.jobs import client as run_client\n"
                   "except ImportError:\n    from cqb import run_client\nserver = run_client.start(); "
                   "print(server.socket_path, server.pid, server.client, flush=True); sys.stdin.read()")
        # its jobs carry the server's PYTHONPATH: a server forks only jobs whose start-up environment is its own
        baseline_env = {**base_env, "PYTHONPATH": str(trees.baseline(args.baseline, args.build))}
        baseline = subprocess.Popen([sys.executable, "-c", starter], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    env=baseline_env, text=True)
        socket_path, pid, client = baseline.stdout.readline().split()
        servers["the baseline's server"] = (socket_path, int(pid), client, baseline_env)
    server = run_client.start()
    if server is None or server.client is None:
        raise SystemExit("handoff_costs: the run server did not start, or its client was not built (no C compiler?)")
    servers["this checkout's server"] = (server.socket_path, server.pid, server.client, base_env)
    forking = run_client.start(worker_runs=1)  # the same server, a fresh fork for every run
    servers["this checkout's server, a fork per run"] = (forking.socket_path, forking.pid, forking.client, base_env)
    variants = {"no server: cqb run in its own process": (cqb, base_env, None, SHELL)}
    for label, (socket_path, pid, client, job_env) in servers.items():
        env = {**job_env, run_client.RUN_SERVER_VARIABLE: socket_path, run_client.RUN_FALLBACK_VARIABLE: cqb}
        if label == "this checkout's server":  # this checkout's `cqb` speaks this checkout's protocol only
            variants[f"Python client, {label}"] = (cqb, env, pid, SHELL)
            variants[f"compiled client, {label}, in bash"] = (client, env, pid, BASH)
        variants[f"compiled client, {label}"] = (client, env, pid, SHELL)  # each server's own client
    results = {name: [] for name in variants}
    code_hash = simulation_code_hash()
    with tempfile.TemporaryDirectory(prefix="cqb-handoff-") as scratch:
        scratch = Path(scratch)
        for round_index in range(args.rounds + 1):
            for name, (client, env, pid, shell) in variants.items():  # the same seeds: the same simulations
                batch = run_batch(client, env, pid, args.jobs, FIRST_SEED, scratch, code_hash, shell)
                if round_index:  # round 0 warms the bytecode and page caches
                    results[name].append(batch)
        print(handoff_table(results, args.jobs, args.rounds, (load_before, os.getloadavg())))
        if args.phases:
            print()
            sources = {"this checkout": base_env}  # no server variable: the forks run the command
            if args.baseline:
                sources = {"baseline": baseline_env, **sources}
            print(phases_table(args.phases, scratch, args.rounds, sources))
    server.stop()
    forking.stop()
    if baseline is not None:
        baseline.stdin.close()  # its start()'s atexit stops its server
        baseline.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
