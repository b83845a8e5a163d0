"""The run server's forked workers (docs/jobs.md, "The workers"): what the
server loads before it forks them (preload), and what a worker does, in the
fork, with each job the server hands it: the job's stdio, folder, umask and
environment, `cqb run` as in a process of its own, and the run's exit status.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import time

from .client import ENDED, EXIT_STATUS, REFUSED, REQUEST_LIMIT, RUN_SERVER_VARIABLE, STARTED

PR_SET_PDEATHSIG = 1  # <sys/prctl.h>
# A worker's word after each run: the run's exit code, and whether it takes another run.
REPORT = struct.Struct("!i?")


class Worker:
    """A forked worker as the server sees it: its end of the pair of sockets
    the two talk over, and while it runs a job, the job's connection and
    stderr (for a word on how the run ended)."""

    def __init__(self, channel: socket.socket):
        self.channel = channel
        self.connection: socket.socket | None = None
        self.stderr = -1
        self.job_gone = False  # killed because its job went (a Ctrl-C): the log says "interrupted"


def preload() -> str:
    """Import everything a run needs, once, in the server, and build the
    command line's parser; the code hash is taken now, so it describes the
    code the children actually run."""
    from . import run_command

    run_command.pin_blas_to_one_thread()  # before numpy: the children inherit one BLAS thread
    # numpy.random (nine Cython modules, ~18 ms) and the core: a run imports no compiled module,
    # so it pays no such import and a Ctrl-C cannot land in one (run_command.load_compiled_modules)
    run_command.load_compiled_modules()
    from ..sim import runfile, simulate  # noqa: F401
    from ..sim.code_hash import simulation_code_hash
    from ..sim.policies import registered_policies

    registered_policies()
    # A first use each child would otherwise repeat: the core's build check.
    from ..sim.core import core

    core()
    # Each child parses with its own copy of this parser; one parse of a job's
    # command line here also leaves argparse's compiled patterns cached.
    run_command.run_parser().parse_args(["--instance-spec", "{}", "--policy", "oracle", "--params", "{}",
                                         "--horizon", "1", "--seed", "0", "--code-hash", "x", "--out", "x.npz"])
    return simulation_code_hash()


def _close(*fds: int) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _die_with_server(server_pid: int) -> bool:
    """PR_SET_PDEATHSIG: SIGKILL when the server is gone (Linux), then
    whether it is still there (it may have gone before the call)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    return os.getppid() == server_pid


def work(server, server_pid: int, channel: socket.socket, connection: socket.socket, request: dict,
         fds: list[int]) -> int:
    """In the fork of ``server`` (a cqb.jobs.server.Server): tied to the
    server, rid of its descriptors; then the job it was forked for, and each
    job the server sends after it (a request with its connection, stdout and
    stderr) until it has served ``server.worker_runs``, a run ended in an
    unexpected exception, or the server closes the socket."""
    if not _die_with_server(server_pid):
        return 1  # the server is gone and said nothing: the job runs in its own process
    signal.set_wakeup_fd(-1)
    for number in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)
    server.selector.close()
    _close(server.wake_read, server.wake_write)
    server.listener.close()
    for other in [*server.waiting, *(worker.connection for worker in server.children.values()
                                     if worker.connection is not None)]:
        other.close()
    for worker in server.children.values():  # else a retired worker would never see its socket close
        worker.channel.close()
        _close(worker.stderr)
    from . import run_command

    runs = 0
    while True:
        code, reusable = _run_job(connection, request, fds, run_command)
        runs += 1
        more = reusable and runs < server.worker_runs
        try:  # before ENDED: a job that has ended may close, and the server must know by then the run is over
            channel.send(REPORT.pack(code, more))
        except OSError:  # the server has gone (this process's SIGKILL is on its way)
            more = False
        if connection.fileno() >= 0:  # a run that started: the job may end now (its log is complete)
            _end(connection)
        if not more:
            return code
        try:
            message, fds, _, _ = socket.recv_fds(channel, REQUEST_LIMIT, 3)
        except OSError:
            return 0
        if not message or len(fds) != 3:  # the server closed the socket: no more jobs
            _close(*fds)
            return 0
        connection = socket.socket(fileno=fds[0])
        fds, request = fds[1:], json.loads(message)
        run_command.run_cpu_origin = time.process_time()  # the run's CPU, not the worker's so far


def _run_job(connection: socket.socket, request: dict, fds: list[int], command) -> tuple[int, bool]:
    """One job in the worker: the job's stdio, folder, umask and environment;
    STARTED; `cqb run` (``command``: cqb.jobs.run_command) as in a process of its own; the job's stdio let go and
    its status sent (if the run has not sent it). Its exit code, and whether
    the worker may take another."""
    import warnings

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a `cqb run` of its own
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    for target, fd in zip((1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    try:
        os.chdir(request["cwd"])
        os.umask(request["umask"])  # the job's, so its run file gets the job's mode
        _use_environment(request["env"])
    except OSError as error:  # nothing ran yet: the job runs in its own process
        connection.send(REFUSED + f"cannot enter the job's folder: {error}".encode())
        connection.close()
        _release_stdio(null)
        return 1, True
    # The job's connection stays open until ENDED (_end): closed without a status, it tells the job that
    # this process has ended, run and all, and the job may run again in a process of its own. A run that
    # wrote its output sends the status before its last log line (run_command.before_last_line): a kill after
    # that line then leaves the job its status, not a second run.
    connection.send(STARTED)
    status = []

    def send_status(code: int) -> None:
        if not status:
            status.append(code)
            try:
                connection.send(EXIT_STATUS.pack(code))
            except OSError:
                pass  # the job has gone

    command.before_last_line = lambda: send_status(0)
    reusable = True
    try:
        # the filters as the run found them, and a warning shown again in each run's log
        with warnings.catch_warnings():
            code = command.main(list(request["argv"][1:]))  # after `run` (admission checked it)
    except SystemExit as exit:  # as the interpreter ends a `cqb run` of its own
        code = _exit_code(exit)
    except KeyboardInterrupt:  # as the interpreter does: the traceback, then death by SIGINT
        import traceback

        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    except BaseException:
        import traceback

        traceback.print_exc()
        code, reusable = 1, False  # what it left behind is unknown: no run after it here
    command.before_last_line = None
    _flush()
    _release_stdio(null)
    code = code if isinstance(code, int) else 0
    send_status(code)
    return code, reusable


def _end(connection: socket.socket) -> None:
    """ENDED: the run's log is complete; the job's connection let go."""
    try:
        connection.send(ENDED)
    except OSError:
        pass  # the job has gone
    connection.close()


def _release_stdio(null: int) -> None:
    """The job's stdout and stderr closed in the worker (a pipe's reader sees
    its end), /dev/null in their place."""
    for target in (1, 2):
        os.dup2(null, target)
    os.close(null)


def _flush() -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass


def _exit_code(exit: SystemExit) -> int:
    """What Python does with an uncaught SystemExit: None is 0, an integer
    itself, anything else printed to stderr and 1."""
    if exit.code is None:
        return 0
    if isinstance(exit.code, int):
        return exit.code
    print(exit.code, file=sys.stderr)
    return 1


def _use_environment(env: dict) -> None:
    """The job's environment in place of the server's, setting only what
    differs: the two are mostly the same (both inherit Snakemake's), and
    every variable set or dropped copies pages of the preloaded heap."""
    env = {name: value for name, value in env.items() if name != RUN_SERVER_VARIABLE}  # the child runs it
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value

