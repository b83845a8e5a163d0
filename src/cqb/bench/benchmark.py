"""Benchmark of the simulation core (not a test: timings depend on the machine).

Usage: cqb benchmark [--repeats 3] [--out docs/benchmarks.md]   (or python -m cqb.bench.benchmark)
       cqb benchmark --startup [--startup-runs 20] [--startup-baseline OLD/src]

Measures, for every policy, the wall time of one run (policy only; the trace
and the oracle excluded) at the base instance (K = 5, d = 5, λ = 0.7, ϵ = 0.1,
T = 5000), at an MNIST-sized pool (K = 10, d = 49, λ = 0.15, T = 4000) and at
a Coupon-sized pool (K = 2, d = 120, sparse binary contexts, λ = 0.4,
T = 4000); then CQB-Opt at the base instance on five seeds' traces; then the
per-round cost of CQB-Opt against queue length and d. Every CQB policy is
timed with both kernels ("numpy", the reference, and "compiled"), the two
alternating on the same trace, so a speed-up is a ratio taken side by side.

``--startup`` measures a `cqb run` job's start-up instead (see
:func:`startup_times`), optionally beside another checkout's source.
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

import numpy as np

from .. import __version__
from ..sim.instances import instance_from_spec, pool_instance
from ..sim.policies import PolicyEnv, make_policy, registered_policies
from ..sim.rng import stream
from ..sim.simulate import draw_trace, play
from ..pipeline.experiments import BASE_INSTANCE

BASE = BASE_INSTANCE


def mnist_sized_instance(seed: int):
    rng = np.random.default_rng(seed)
    contexts = np.abs(rng.normal(size=(4000, 49)))  # non-negative like pixel features
    contexts /= np.linalg.norm(contexts, axis=1).max()
    theta = rng.normal(size=(10, 49)) * 2
    return pool_instance(theta, contexts, 0.15)


def coupon_sized_instance(seed: int):
    """Binary contexts, ~10 % ones (like one-hot survey answers), scaled to norm
    ≤ 1; θ* ~ N(0, I), so S = max ‖θ*_k‖ ≈ 11 like the Coupon instance's 9.8
    (a tight S sends the estimates out of the ball, and SLSQP's projection in
    d = 120 then dominates everything: docs/real_data_sensitivity.md)."""
    rng = np.random.default_rng(seed)
    contexts = (rng.random((4000, 120)) < 0.1).astype(np.float64)
    contexts /= np.linalg.norm(contexts, axis=1).max()
    return pool_instance(rng.normal(size=(2, 120)), contexts, 0.4)


KERNELS = ("numpy", "compiled")  # the reference first: the old path, kept callable


def has_kernels(policy: str) -> bool:
    from ..sim.policies import policy_parameters

    return "kernel" in policy_parameters(policy)


def time_policy(instance, trace, policy, params, repeats, seed=0):
    """Best-of-``repeats`` seconds of one run per kernel ({None: …} for a policy
    without kernels), the kernels alternating, and the last run of each."""
    kernels = KERNELS if has_kernels(policy) else (None,)
    best, runs = dict.fromkeys(kernels, np.inf), {}
    for _ in range(repeats):
        for kernel in kernels:
            chosen = dict(params or {}, **({"kernel": kernel} if kernel else {}))
            started = time.perf_counter()
            runs[kernel], _ = play(instance, trace, policy, chosen, seed)
            best[kernel] = min(best[kernel], time.perf_counter() - started)
    return best, runs


def per_round_cost(queue_length, dim, n_servers=5, rounds=300, kernel="compiled"):
    """Seconds per CQB-Opt decision + update with a queue held at ``queue_length``."""
    rng = np.random.default_rng(0)
    contexts = rng.normal(size=(queue_length + rounds, dim))
    contexts /= np.linalg.norm(contexts, axis=1, keepdims=True)
    env = PolicyEnv(n_servers, dim, queue_length + rounds, 0.5, 0.1)
    policy, _ = make_policy("cqb_opt", env, contexts, stream(0, "policy"), {"kernel": kernel})
    queue = np.arange(queue_length)
    for t in range(1, 30):  # warm up: estimator state, caches
        position, server, _ = policy.choose(t, queue, False)
        policy.observe(t, int(queue[position]), server, bool(rng.random() < 0.5))
    started = time.perf_counter()
    for t in range(30, 30 + rounds):
        position, server, _ = policy.choose(t, queue, False)
        policy.observe(t, int(queue[position]), server, bool(rng.random() < 0.5))
    return (time.perf_counter() - started) / rounds


# What the console script `cqb` runs (without its argv[0] clean-up), with the
# loop-start probe wrapped around cqb.sim.simulate.run_policy from outside the
# simulation code: BLAS pinned first, as `cqb run` does before numpy's import.
LOOP_START_LINE = "cqb: loop start "
CLI_SCRIPT = (
    "import sys, time\n"
    "from cqb.cli import main, pin_blas_to_one_thread\n"
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


def seeds_table(repeats: int, seeds=range(5), horizon=5000, params: dict | None = None) -> list[str]:
    """CQB-Opt at the base instance on the traces of several seeds (each seed its own
    instance), numpy and compiled side by side: the headline ratio, over seeds
    rather than one trace, because an occasional slow projection (SLSQP at its
    iteration limit) can dominate a single run of either kernel."""
    setting = ", ".join(f"{k} = {v}" for k, v in (params or {}).items()) or "defaults"
    lines = [f"### CQB-Opt at the base instance, seeds {seeds[0]}–{seeds[-1]} (T={horizon}; {setting})", "",
             "| seed | numpy: s per run | compiled: s per run | speed-up | projections numpy / compiled "
             "| same queue path |", "| ---: | ---: | ---: | ---: | ---: | --- |"]
    totals = dict.fromkeys(KERNELS, 0.0)
    for seed in seeds:
        instance = instance_from_spec(BASE, stream(seed, "instance"))
        trace = draw_trace(instance, horizon, seed)
        seconds, runs = time_policy(instance, trace, "cqb_opt", params, repeats, seed)
        projections = [_projections(instance, trace, kernel, seed, params) for kernel in KERNELS]
        same = np.array_equal(runs["numpy"].queue, runs["compiled"].queue)
        for kernel in KERNELS:
            totals[kernel] += seconds[kernel]
        lines.append(f"| {seed} | {seconds['numpy']:.3f} | {seconds['compiled']:.3f} | "
                     f"{seconds['numpy'] / seconds['compiled']:.1f}× | {projections[0]} / {projections[1]} | "
                     f"{'yes' if same else 'no'} |")
        print(lines[-1], flush=True)
    lines += [f"| all | {totals['numpy']:.3f} | {totals['compiled']:.3f} | "
              f"{totals['numpy'] / totals['compiled']:.1f}× | | |", ""]
    return lines


def _projections(instance, trace, kernel, seed, params=None):
    from ..sim.simulate import policy_env, run_policy

    horizon = trace.arrivals.shape[0]
    policy, _ = make_policy("cqb_opt", policy_env(instance, horizon), trace.contexts, stream(seed, "policy"),
                            {**(params or {}), "kernel": kernel}, true_means=trace.true_means)
    run_policy(policy, trace)
    return policy.scorer.estimator.projections


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


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
    from ..pipeline.results import children_cpu  # pandas: only for this benchmark

    from ..jobs.client import OWN_CPU, RUN_SERVER_VARIABLE

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


def startup_main(args) -> str:
    sources = {"this checkout": Path(__file__).resolve().parents[2]}
    if args.startup_baseline:
        sources = {f"baseline {args.startup_baseline}": Path(args.startup_baseline), **sources}
    from ..jobs import client as run_client

    server = run_client.start()  # as the workflow starts it; None where it cannot run
    load_before = os.getloadavg()
    try:
        times = startup_times(sources, args.startup_runs, server_socket=server and server.socket_path)
    finally:
        if server:
            server.stop()
    return startup_table(times, load_before, os.getloadavg())


def main(args=None):
    if args is None:
        from .options import add_benchmark_arguments

        parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        add_benchmark_arguments(parser)
        args = parser.parse_args()
    if args.pipeline or args.startup or args.split:
        if args.pipeline or args.split:
            from .pipeline_benchmark import pipeline_main, split_main

            text = pipeline_main(args) if args.pipeline else split_main(args)
        else:
            text = startup_main(args)
        if args.out:
            Path(args.out).write_text(text)
        print(text)
        return

    load_before = os.getloadavg()
    lines = [f"cqb {__version__}, Python {platform.python_version()}, numpy {np.__version__}, "
             f"{platform.machine()} ({_cpu_model()}); best of {args.repeats} runs per kernel, the "
             f"kernels alternating; wall time of the policy's loop", ""]
    settings = [
        ("base: K=5, d=5, λ=0.7, ϵ=0.1, T=5000", instance_from_spec(BASE, stream(0, "instance")), 5000),
        ("MNIST-sized pool: K=10, d=49, λ=0.15, T=4000", mnist_sized_instance(0), 4000),
        ("Coupon-sized pool: K=2, d=120 (binary, ~10 % ones), λ=0.4, T=4000", coupon_sized_instance(0), 4000),
    ]
    for title, instance, horizon in settings:
        trace = draw_trace(instance, horizon, 0)
        lines += [f"### {title}", "",
                  "| policy | numpy: s per run | compiled: s per run | speed-up | rounds per second "
                  "(compiled) | mean Q(t) numpy | mean Q(t) compiled |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for policy in registered_policies():
            params = {"tau": horizon // 10} if policy == "cqb_eps" and instance.slack is None else None
            if policy == "cqb_eta2" and instance.slack is None:
                params = {"tau": horizon // 10, "eta": 0.02, "cutoff": horizon // 2}
            seconds, runs = time_policy(instance, trace, policy, params, args.repeats)
            if None in seconds:  # no kernels: one implementation
                run = runs[None]
                lines.append(f"| {policy} | | {seconds[None]:.3f} | | {horizon / seconds[None]:,.0f} | "
                             f"| {run.queue.mean():.2f} |")
            else:
                lines.append(f"| {policy} | {seconds['numpy']:.3f} | {seconds['compiled']:.3f} | "
                             f"{seconds['numpy'] / seconds['compiled']:.1f}× | "
                             f"{horizon / seconds['compiled']:,.0f} | {runs['numpy'].queue.mean():.2f} | "
                             f"{runs['compiled'].queue.mean():.2f} |")
            print(lines[-1], flush=True)
        lines.append("")

    lines += seeds_table(args.repeats)
    # the default before CQB-Opt's c_β was retuned, the setting the kernel was first timed at
    lines += seeds_table(args.repeats, params={"bonus_scale": 0.1})
    lines += ["### CQB-Opt per-round cost (decision + update) against queue length and d (K = 5), "
              "numpy / compiled", "",
              "| queue length | d = 5 | d = 20 | d = 49 |", "| ---: | ---: | ---: | ---: |"]
    for queue_length in (1, 10, 100, 1000):
        cells = [" / ".join(f"{per_round_cost(queue_length, dim, kernel=kernel) * 1e6:.0f} µs"
                            for kernel in KERNELS) for dim in (5, 20, 49)]
        lines.append(f"| {queue_length} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    load_after = os.getloadavg()
    lines += ["", f"Load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in load_before)} before, "
              f"{', '.join(f'{x:.2f}' for x in load_after)} after."]
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text)
    print(text)


if __name__ == "__main__":
    main()
