"""``cqb run``: one (instance, policy, seed) simulated and its run file (or
its trace file) written: the command every `simulate` job of the workflow
runs, in a process of its own or in a fork of the run server
(:mod:`cqb.jobs.worker`). The ``cqb`` command line (:mod:`cqb.cli`) hands it
its arguments; a worker calls :func:`main` itself.

Start-up of a `cqb run` job (docs/benchmarks.md, "Job start-up"): this module
imports only the standard library; numpy, the policies and the rest load in
the run that needs them. Everything it reports goes to stderr; bad input
stops with one line naming the value and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import time
from pathlib import Path

from .. import __version__
from .client import STALE_SWEPT_VARIABLE

# Read by the BLAS library numpy loads, when it loads it: OpenBLAS (numpy's
# wheels), MKL and BLIS, the BLAS libraries of threadpoolctl's user_api="blas".
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


_blas_pinned = False


def pin_blas_to_one_thread() -> bool:
    """One BLAS thread for this process, set through the environment before
    numpy is imported: what simulate() would otherwise do with threadpoolctl,
    whose import and library scan cost ~10 ms of every job's start-up. False
    (and nothing set) when numpy was imported before any call, too late; True
    in a process (or a fork of one, cqb.jobs.server) that pinned in time."""
    global _blas_pinned
    if "numpy" not in sys.modules:
        os.environ.update(dict.fromkeys(BLAS_THREAD_VARIABLES, "1"))
        _blas_pinned = True
    return _blas_pinned


def _parse_value(text: str):
    """A --set value: JSON where it parses (numbers, null, true), else a string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _parse_settings(items: list[str], option: str = "--set") -> dict:
    settings = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{option} takes NAME=VALUE, got {item!r}")
        settings[name] = _parse_value(value)
    return settings


def policy_listing() -> str:
    from ..presentation import display_name, in_listing_order
    from ..sim.policies import policy_parameters, registered_policies

    lines = []
    for name in in_listing_order(registered_policies()):
        params = policy_parameters(name)
        shown = ", ".join(f"{key}={value!r}" for key, value in params.items()) or "no parameters"
        lines.append(f"  {name:<12} {display_name(name):<10} {shown}")
    return "\n".join(lines)


class ListingParser(argparse.ArgumentParser):
    """An epilog given as a function is built only when the help is printed:
    the policy listing imports every policy and the installed plugins, which
    parsing a `cqb run` command line must not pay for."""

    def format_help(self):
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


def add_run_arguments(run: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of `cqb run`, on ``run`` (the ``cqb`` parser's ``run`` command, or run_parser's)."""
    run.add_argument("--policy", help="policy name (see `cqb policies`); required unless --draw-trace")
    run.add_argument("--seed", type=int, required=True, help="root of the seed tree")
    run.add_argument("--horizon", type=int, default=5000, help="number of rounds T (default 5000)")
    run.add_argument("--instance", default="synthetic", metavar="KIND",
                     help="the context stream (cqb.sim.streams; default synthetic): synthetic or pool (i.i.d.), "
                          "or an adversarial one, e.g. subspace_shift, deceptive_switch, sorted_pool")
    run.add_argument("--stream-param", action="append", default=[], metavar="KEY=VALUE",
                     help="a parameter of the stream (repeatable), e.g. --stream-param noise_scale=0.1")
    run.add_argument("--n-servers", type=int, default=5, help="K (synthetic; default 5)")
    run.add_argument("--dim", type=int, default=5, help="d (synthetic; default 5)")
    run.add_argument("--arrival-rate", type=float, default=0.7, help="λ (default 0.7)")
    run.add_argument("--slack", type=float, default=0.1, help="ϵ (synthetic; default 0.1)")
    run.add_argument("--pool", help="pool instance file (.npz with contexts, theta)")
    run.add_argument("--instance-spec", metavar="JSON",
                     help="the whole instance spec as JSON (as in config; overrides the instance options)")
    run.add_argument("--params", default="{}", metavar="JSON", help="policy parameters as a JSON object")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="a policy parameter, e.g. --set bonus_scale=0.1 (repeatable; over --params)")
    run.add_argument("--code-hash", default="",
                     help="the simulation code hash the caller scheduled the run with (recorded)")
    traces = run.add_mutually_exclusive_group()
    traces.add_argument("--trace", metavar="FILE",
                        help="play on this trace file (from --draw-trace) instead of drawing the trace; "
                             "the same run, bit for bit")
    traces.add_argument("--trace-cache", metavar="FILE",
                        help="play on this trace file if it holds this run's trace, else draw the trace and "
                             "write it there (atomically) first; the same run, bit for bit")
    traces.add_argument("--draw-trace", action="store_true",
                        help="write the seed's trace file (arrivals, contexts, service uniforms, Q*) to --out "
                             "instead of a run file")
    run.add_argument("--out", required=True, help="output .npz (written atomically)")
    return run


@functools.lru_cache(maxsize=1)
def run_parser() -> argparse.ArgumentParser:
    """The parser :func:`main` uses, built once per process: the run server
    builds it while it preloads, so that its forked runs do not (4-6 ms of each)."""
    return add_run_arguments(ListingParser(prog="cqb run", formatter_class=argparse.RawDescriptionHelpFormatter,
                                           epilog=lambda: "policies:\n" + policy_listing()))


def main(argv: list[str]) -> int:
    """`cqb run` with the arguments ``argv`` (those after ``run``)."""
    return run(run_parser().parse_args(argv))


def _json_object(option: str, text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{option} is not JSON ({error.msg}): {text!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{option} must be a JSON object, got {text!r}")
    return value


def _instance_spec(args) -> dict:
    if args.instance_spec is not None:
        return _json_object("--instance-spec", args.instance_spec)
    from ..sim.streams import family_of

    own = _parse_settings(args.stream_param, "--stream-param")
    if family_of({"kind": args.instance}) == "pool":
        if not args.pool:
            raise ValueError(f"--instance {args.instance} needs --pool FILE")
        return {"kind": args.instance, "pool": args.pool, "arrival_rate": args.arrival_rate, **own}
    return {"kind": args.instance, "n_servers": args.n_servers, "dim": args.dim,
            "arrival_rate": args.arrival_rate, "slack": args.slack, **own}


def _check_pool_file(spec: dict) -> None:
    """One line for a pool file that is not a complete .npz archive (another
    format, or one truncated by a crashed copy): numpy reports the first as
    "pickled data" and suggests allow_pickle, the wrong way, and the second as
    zipfile.BadZipFile, naming no file. A missing file is left to the OSError report."""
    import zipfile  # here: a synthetic run's start-up does not pay for it

    pool = spec.get("pool")
    if isinstance(pool, str) and os.path.isfile(pool) and not zipfile.is_zipfile(pool):
        raise ValueError(f"pool file {pool} is not an .npz archive (another format, or truncated): "
                         "give the instance file the data rules write (contexts, theta), "
                         "e.g. data/processed/mnist/instance.npz")


# The process's CPU time when its run began: 0 for a process of its own or a
# run server's fresh fork (its CPU counts from the fork); a worker that has
# served runs before sets it as it takes the next (cqb.jobs.server).
run_cpu_origin = 0.0


# Set by a run server's worker (cqb.jobs.worker): called once a run's output is
# written, before its last log line, to send the job its status, so that a
# worker killed after a run's last line leaves its job nothing to run again.
before_last_line = None


def _wrote(summary: str, started: float, out: Path) -> int:
    """A job's last log line: what it wrote, its wall and CPU time (the CPU
    part is what the pipeline's split and the benchmarks read)."""
    if before_last_line is not None:
        before_last_line()
    print(f"{summary}, {time.perf_counter() - started:.2f} s "
          f"({time.process_time() - run_cpu_origin:.2f} s CPU in this process), wrote {out}", file=sys.stderr)
    return 0


def _write_failed(out: Path, error: OSError) -> int:
    """One line for an output that could not be written (a full disk or quota,
    a read-only folder); the atomic write left nothing behind."""
    import errno

    remedy = ("free space on its disk" if error.errno in (errno.ENOSPC, errno.EDQUOT)
              else "make its folder writable")
    print(f"cqb: error: cannot write {out}: {error.strerror or error}; nothing was written: "
          f"{remedy} (or give another --out) and rerun", file=sys.stderr)
    return 2


def _draw_trace(args, spec: dict, out: Path, blas_pinned: bool) -> int:
    """``cqb run --draw-trace``: the trace file of (instance, horizon, seed)."""
    if args.policy:
        raise ValueError("--draw-trace writes a trace: it takes no --policy")
    from ..sim.simulate import _one_blas_thread, draw
    from ..sim.trace import save_trace

    started = time.perf_counter()
    with contextlib.nullcontext() if blas_pinned else _one_blas_thread():
        instance, spec, trace, oracle_path = draw(spec, args.horizon, args.seed)
    try:
        digest = save_trace(out, instance, spec, args.horizon, args.seed, trace, oracle_path)
    except OSError as error:
        return _write_failed(out, error)
    return _wrote(f"trace seed {args.seed}: {int(trace.arrivals.sum())} arrivals, Q*(T) = {int(oracle_path[-1])}, "
                  f"content {digest}", started, out)


def load_compiled_modules() -> None:
    """Import the Cython modules a run uses (numpy.random's, the kernels) with
    SIGINT held back. A Cython module's import registers its types with
    collections.abc under a bare ``except: pass``: a Ctrl-C handled there
    would be swallowed and the run would go on to its end. Held back, the
    signal arrives as the mask is restored, a KeyboardInterrupt like any
    other. The run server imports them before it forks (preload), so its
    runs find them loaded."""
    import signal

    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        import numpy.random  # noqa: F401

        from ..sim.core import import_kernels

        import_kernels()  # cqb.sim.core checks the build when a run first uses them
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


# STALE_SWEPT_VARIABLE (cqb.jobs.client) names the folder a local workflow run
# swept of stale temporaries at its start, before any job ran
# (cqb.io.files.sweep_stale_temporaries): a run whose output is inside it skips
# the listing of its output's folder, which holds up to thousands of run files
# (about 1 ms of every job).


def remove_stale_temporaries(out: Path) -> None:
    """Remove the temporary files of an earlier attempt at ``out`` that was
    killed mid-write (cqb.sim.runfile.atomic_write names them ``.NAME.*``)."""
    swept = os.environ.get(STALE_SWEPT_VARIABLE)
    if swept and os.path.abspath(out).startswith(os.path.join(os.path.abspath(swept), "")):
        return
    prefix = f".{out.name}."
    try:
        names = os.listdir(out.parent)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in names:
        if name.startswith(prefix):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(out.parent, name))


def run(args) -> int:
    blas_pinned = pin_blas_to_one_thread()  # before anything imports numpy
    load_compiled_modules()
    from ..sim.code_hash import simulation_code_hash
    from ..sim.simulate import simulate

    out = Path(args.out)
    remove_stale_temporaries(out)
    code_hash = simulation_code_hash()
    if args.code_hash and args.code_hash != code_hash:
        print(f"cqb: warning: the caller expected simulation code {args.code_hash}, this is {code_hash}",
              file=sys.stderr)
    started = time.perf_counter()
    try:
        spec = _instance_spec(args)
        _check_pool_file(spec)
        params = {**_json_object("--params", args.params), **_parse_settings(args.set)}
        if args.code_hash:  # a workflow job: the log says what ran, even if it is killed
            print(f"cqb {__version__} code {code_hash}: {args.policy or 'trace'} {json.dumps(params, sort_keys=True)} "
                  f"on {json.dumps(spec, sort_keys=True)}, T = {args.horizon}, seed {args.seed}",
                  file=sys.stderr, flush=True)
        if args.draw_trace:
            return _draw_trace(args, spec, out, blas_pinned)
        if not args.policy:
            raise ValueError("cqb run needs --policy (or --draw-trace)")
        result = simulate(spec, args.policy, params, args.horizon, args.seed,
                          blas_threads_pinned=blas_pinned, trace_file=args.trace, trace_cache=args.trace_cache)
    except (ValueError, TypeError) as error:  # bad input: one line, no traceback
        print(f"cqb: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # e.g. a pool file that does not exist
        print(f"cqb: error: cannot read {error.filename or ''}: {error.strerror or error}", file=sys.stderr)
        return 2
    if args.code_hash:
        result.metadata["workflow_code_hash"] = args.code_hash
    from ..sim.runfile import save_run  # after the simulation: its imports are not start-up

    try:
        save_run(out, result)  # atomic: a killed run leaves no partial output
    except OSError as error:
        return _write_failed(out, error)
    unconverged = result.metadata.get("projection_unconverged")
    projections = ("" if unconverged is None else
                   f", {unconverged} of {result.metadata['projections']} projections not converged")
    return _wrote(f"{args.policy} seed {args.seed}: Q(T) = {int(result.queue[-1])}, "
                  f"Q*(T) = {int(result.oracle_queue[-1])}{projections}", started, out)
