"""The job side of the hand-off (docs/jobs.md): what a `cqb run` job, the
workflow and the benchmarks need without importing the server, numpy or the
command line — the protocol's constants, forwarding a command, starting a
server and finding its compiled client (client.c, built by the package
build), and the CPU field of a run's last log line.

Only the standard library, imported lazily where it costs: this module is
part of every job's start-up.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys

# The socket of the workflow's run server, when one runs; jobs inherit it.
RUN_SERVER_VARIABLE = "CQB_RUN_SERVER"
# The compiled client, when start() found a current one: the simulate rule
# runs it where it is an executable file, else `cqb`.
RUN_CLIENT_VARIABLE = "CQB_RUN_CLIENT"
# The Python `cqb` the compiled client execs where no server takes the run
# (unset: `cqb` on PATH).
RUN_FALLBACK_VARIABLE = "CQB_RUN_FALLBACK"
HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_SOURCE = os.path.join(HERE, "client.c")
CLIENT_BINARY = os.path.join(HERE, "job-client")  # where setup.py builds it
# The CPU seconds a run's process spent, in the last line `cqb run` prints
# (a forked run's own: the benchmarks read it from the job logs).
OWN_CPU = re.compile(r"\(([0-9.]+) s CPU in this process\)")
# Runs one forked worker of the server serves, one after another, before it
# exits (the default of execution.worker_runs): bounds what runs may leave in
# a worker's heap; 1 is a fresh fork per run.
WORKER_RUNS = 100
REQUEST_LIMIT = 1 << 20  # bytes of one request: a command line and an environment
REPLY_LIMIT = 4096
# The replies, each one SOCK_SEQPACKET message: STARTED (the forked run is
# about to start), then its exit status, then ENDED (its log is complete); or
# REFUSED and why (nothing ran: the client runs the job itself).
STARTED = b"started"
ENDED = b"ended"
REFUSED = b"refused: "
EXIT_STATUS = struct.Struct("!i")
# The exit code of a job whose server went away after STARTED when the job
# cannot tell whether its run has ended (its connection failed otherwise than
# by closing): the run must not run a second time beside it; Snakemake's rerun
# runs the failed job (EX_TEMPFAIL of sysexits.h).
LOST_AFTER_START = 75
# What Snakemake's shell sets to a job's thread count (snakemake.shell).
SNAKEMAKE_THREAD_VARIABLES = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                              "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
WENT_AWAY = "cqb: the run server went away; running in this process"
# The folder the workflow swept of stale temporaries (cqb.jobs.run_command.
# remove_stale_temporaries); a job whose forked run died unsets it, so that its
# own run removes the dead run's temporary.
STALE_SWEPT_VARIABLE = "CQB_STALE_SWEPT"
# The worker holds the job's connection until it has sent the run's status:
# closed without one (and the server gone), the worker has exited, its run
# with it (the kernel closes a process's sockets as it exits).
RUN_DIED = ("cqb: the run server went away during the run, and the run died with it; "
            "running the job again in this process")


def forward(socket_path: str, argv: list[str]) -> int | None:
    """Run ``cqb <argv>`` in the server's fork; its exit code, or None when no
    server took the run (the caller then runs the command itself)."""
    import socket

    try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        connection.connect(socket_path)
    except OSError:
        return None
    with connection:
        umask = os.umask(0o077)
        os.umask(umask)
        request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
                              "umask": umask}).encode()
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            socket.send_fds(connection, [request], [sys.stdout.fileno(), sys.stderr.fileno()])
        except OSError:  # e.g. EMSGSIZE: quietly in this process
            return None
        try:
            reply = connection.recv(REPLY_LIMIT)
        except OSError:
            reply = b""
        if reply.startswith(REFUSED):
            reason = reply[len(REFUSED):].decode(errors="replace")
            print(f"cqb: the run server did not take this run ({reason}); running in this process",
                  file=sys.stderr, flush=True)
            return None
        if reply != STARTED:
            print(WENT_AWAY, file=sys.stderr, flush=True)
            return None
        try:
            status = connection.recv(EXIT_STATUS.size)
        except ConnectionResetError:
            status = b""
        except OSError:
            status = None
        if status is not None and len(status) == EXIT_STATUS.size:
            try:
                connection.recv(REPLY_LIMIT)  # ENDED, or the close of a worker killed since: the log is complete
            except OSError:
                pass
    if status == b"":  # closed by every process that held it, the run's worker too: it has exited
        print(RUN_DIED, file=sys.stderr, flush=True)
        os.environ.pop(STALE_SWEPT_VARIABLE, None)  # the run here removes the dead run's temporary
        return None
    if status is None or len(status) != EXIT_STATUS.size:
        print("cqb: the run server went away during the run; this job fails, to be rerun",
              file=sys.stderr, flush=True)
        return LOST_AFTER_START
    return EXIT_STATUS.unpack(status)[0]


def source_hash() -> str:
    import hashlib

    with open(CLIENT_SOURCE, "rb") as source:
        return hashlib.sha256(source.read()).hexdigest()


def current_client(binary: str = CLIENT_BINARY, timeout: float = 30.0) -> str | None:
    """``binary`` where it runs here and was built from today's client.c (it
    prints the hash it was built from), else None: jobs then use `cqb run`."""
    import subprocess

    if not os.access(binary, os.X_OK):
        return None
    try:
        done = subprocess.run([binary, "--source-hash"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return binary if done.returncode == 0 and done.stdout.decode(errors="replace").strip() == source_hash() else None


class RunServer:
    """A started server: its process, its socket, the compiled client the
    jobs use (None: `cqb run`), and stop()."""

    def __init__(self, process, folder: str, socket_path: str, client: str | None, variables: tuple[str, ...]):
        self.process, self.folder, self.socket_path, self.client = process, folder, socket_path, client
        self._variables = variables

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        """End the server (SIGTERM: it lets its runs finish) and remove its
        folder; the variables it set are dropped. Safe to call twice."""
        import subprocess

        for name in self._variables:
            os.environ.pop(name, None)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        remove_folder(self.folder)


def remove_folder(folder: str) -> None:
    for name in ("socket",):
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass
    try:
        os.rmdir(folder)
    except OSError:
        pass


def start(socket_dir: str | None = None, timeout: float = 60.0, client: bool = True,
          job_threads: int | None = None, request_timeout: float | None = None,
          worker_runs: int = WORKER_RUNS) -> RunServer | None:
    """Start a server for this process's jobs: ``CQB_RUN_SERVER`` is set in
    ``os.environ`` (jobs inherit it), and ``CQB_RUN_CLIENT`` where ``client``
    and a current compiled client is installed. ``job_threads``: the server
    starts with the thread counts Snakemake gives a job of that many threads,
    so that such jobs find its environment equal to theirs; ``request_timeout``:
    the server's (cqb.jobs.server.REQUEST_TIMEOUT if None); ``worker_runs``:
    the runs each of its forked workers serves. The server stops
    when this process exits (atexit) or is gone. None where it cannot start
    (then jobs run in their own process, as without it)."""
    import atexit
    import selectors
    import socket
    import subprocess
    import tempfile

    for inherited in (RUN_SERVER_VARIABLE, RUN_CLIENT_VARIABLE, RUN_FALLBACK_VARIABLE):  # not this server's
        os.environ.pop(inherited, None)
    if not sys.platform.startswith("linux") or not all(
            hasattr(socket, name) for name in ("AF_UNIX", "SOCK_SEQPACKET", "send_fds", "SO_PEERCRED")):
        return None  # the server needs PR_SET_PDEATHSIG and SO_PEERCRED (Linux)
    folder = tempfile.mkdtemp(prefix="cqb-run-server-", dir=socket_dir)  # private: mode 0700
    socket_path = os.path.join(folder, "socket")
    ready_read, ready_write = os.pipe()
    env = dict(os.environ)
    if job_threads is not None:
        env.update(dict.fromkeys(SNAKEMAKE_THREAD_VARIABLES, str(job_threads)))
    command = [sys.executable, "-m", "cqb.jobs.server", "--socket", socket_path,
               "--parent", str(os.getpid()), "--ready-fd", str(ready_write),
               "--remove", folder]  # what a killed parent cannot remove
    if request_timeout is not None:
        command += ["--request-timeout", str(request_timeout)]
    command += ["--worker-runs", str(worker_runs)]
    try:
        # its own session: a kill of Snakemake's process group leaves it the moment it needs to
        # see its parent gone and remove its folder
        process = subprocess.Popen(command, pass_fds=(ready_write,), stdin=subprocess.DEVNULL, env=env,
                                   start_new_session=True)
    except OSError:
        os.close(ready_read)
        os.close(ready_write)
        remove_folder(folder)
        return None
    os.close(ready_write)
    binary = current_client() if client else None  # meanwhile: the server takes a second to load
    with selectors.DefaultSelector() as selector:
        selector.register(ready_read, selectors.EVENT_READ)
        ready = bool(selector.select(timeout)) and os.read(ready_read, 16) == b"ready\n"
    os.close(ready_read)
    if not ready:
        process.kill()
        process.wait()
        remove_folder(folder)
        return None
    os.environ[RUN_SERVER_VARIABLE] = socket_path
    variables = [RUN_SERVER_VARIABLE]
    if binary:
        os.environ[RUN_CLIENT_VARIABLE] = binary
        variables.append(RUN_CLIENT_VARIABLE)
        fallback = os.path.join(os.path.dirname(sys.executable), "cqb")
        if os.access(fallback, os.X_OK):  # this environment's `cqb`, as the workflow puts it on PATH
            os.environ[RUN_FALLBACK_VARIABLE] = fallback
            variables.append(RUN_FALLBACK_VARIABLE)
    server = RunServer(process, folder, socket_path, binary, tuple(variables))
    atexit.register(server.stop)
    return server
