"""The job side of the run server (cqb.run_server): what a `cqb run` job, the
workflow and the benchmarks need without importing the server, numpy or the
command line — the socket variable, forwarding a command, starting a server
and building its compiled client (run_client.c), and the CPU field of a run's
last log line.

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
# The compiled client (run_client.c) that start() built, when it could: a job
# runs "${CQB_RUN_CLIENT:-cqb}" run ..., a C program instead of a Python one.
RUN_CLIENT_VARIABLE = "CQB_RUN_CLIENT"
# The Python `cqb` the compiled client execs where no server takes the run
# (unset: `cqb` on PATH).
RUN_FALLBACK_VARIABLE = "CQB_RUN_FALLBACK"
CLIENT_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_client.c")
# The CPU seconds a run's process spent, in the last line `cqb run` prints
# (a forked run's own: the benchmarks read it from the job logs).
OWN_CPU = re.compile(r"\(([0-9.]+) s CPU in this process\)")
REQUEST_LIMIT = 1 << 20  # bytes of one request: a command line and an environment
EXIT_STATUS = struct.Struct("!i")


def forward(socket_path: str, argv: list[str]) -> int | None:
    """Run ``cqb <argv>`` in the server's fork; its exit code, or None when no
    server answers (the caller then runs the command itself)."""
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
            reply = connection.recv(EXIT_STATUS.size)
        except OSError:
            return None
    if len(reply) != EXIT_STATUS.size:  # the server went away before the run ended
        print("cqb: the run server went away; running in this process", file=sys.stderr, flush=True)
        return None
    return EXIT_STATUS.unpack(reply)[0]


def c_compiler() -> list[str]:
    """``$CC`` if set, else the C compiler Python was built with where it is
    installed, else ``cc``: a command, split as a shell would split it."""
    import shlex
    import shutil
    import sysconfig

    if os.environ.get("CC"):
        return shlex.split(os.environ["CC"])
    built_with = shlex.split(sysconfig.get_config_var("CC") or "")
    return built_with if built_with and shutil.which(built_with[0]) else ["cc"]


def compile_client(binary: str):
    """Start compiling run_client.c into ``binary`` (a process to wait for;
    None where the compiler cannot even start)."""
    import subprocess

    try:
        return subprocess.Popen([*c_compiler(), "-O2", "-o", binary, CLIENT_SOURCE], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None


def client_works(binary: str, compiler, timeout: float = 60.0) -> bool:
    """Whether the compile succeeded and its binary runs here (a noexec
    temporary folder would fail every job): with no server it execs its
    fallback, here `true`."""
    import shutil
    import subprocess

    true = shutil.which("true")
    try:
        if compiler.wait(timeout) != 0 or true is None:
            return False
        env = {key: value for key, value in os.environ.items() if key != RUN_SERVER_VARIABLE}
        env[RUN_FALLBACK_VARIABLE] = true
        return subprocess.run([binary, "run"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=timeout).returncode == 0
    except (OSError, subprocess.SubprocessError):
        if compiler.poll() is None:
            compiler.kill()
            compiler.wait()
        return False


def start(socket_dir: str | None = None, timeout: float = 60.0, client: bool = True):
    """Start a server for this process's jobs: ``CQB_RUN_SERVER`` is set in
    ``os.environ`` (jobs inherit it) and the server stops when this process
    exits. With ``client``, the compiled client is built beside the socket
    while the server loads, and ``CQB_RUN_CLIENT`` names it where that
    worked (else jobs use `cqb run`). The server process, or None where it
    cannot start (then jobs run in-process, as without it)."""
    import atexit
    import selectors
    import socket
    import subprocess
    import tempfile

    for inherited in (RUN_CLIENT_VARIABLE, RUN_FALLBACK_VARIABLE):  # from elsewhere: not this server's
        os.environ.pop(inherited, None)
    if not hasattr(socket, "AF_UNIX") or not hasattr(socket, "send_fds") or not hasattr(socket, "SOCK_SEQPACKET"):
        return None
    folder = tempfile.mkdtemp(prefix="cqb-run-server-", dir=socket_dir)  # private: mode 0700
    socket_path = os.path.join(folder, "socket")
    binary = os.path.join(folder, "client")
    ready_read, ready_write = os.pipe()
    command = [sys.executable, "-m", "cqb.run_server", "--socket", socket_path,
               "--parent", str(os.getpid()), "--ready-fd", str(ready_write),
               "--remove", binary, "--remove", folder]  # what a killed Snakemake's stop() cannot
    server = subprocess.Popen(command, pass_fds=(ready_write,), stdin=subprocess.DEVNULL)
    os.close(ready_write)
    compiler = compile_client(binary) if client else None  # meanwhile: the server takes a second to load
    with selectors.DefaultSelector() as selector:
        selector.register(ready_read, selectors.EVENT_READ)
        ready = bool(selector.select(timeout)) and os.read(ready_read, 16) == b"ready\n"
    os.close(ready_read)

    def remove_folder():
        for leftover in (binary, socket_path):  # the socket is the server's to remove, unless it was killed
            try:
                os.unlink(leftover)
            except OSError:
                pass
        try:
            os.rmdir(folder)
        except OSError:
            pass

    if not ready:
        for process in (server, compiler):
            if process is not None:
                process.kill()
                process.wait()
        remove_folder()
        return None
    os.environ[RUN_SERVER_VARIABLE] = socket_path
    client_built = compiler is not None and client_works(binary, compiler, timeout)
    if client_built:
        os.environ[RUN_CLIENT_VARIABLE] = binary
        fallback = os.path.join(os.path.dirname(sys.executable), "cqb")
        if os.access(fallback, os.X_OK):  # this environment's `cqb`, as the workflow puts it on PATH
            os.environ[RUN_FALLBACK_VARIABLE] = fallback

    def stop():
        os.environ.pop(RUN_SERVER_VARIABLE, None)
        if client_built:
            os.environ.pop(RUN_CLIENT_VARIABLE, None)
            os.environ.pop(RUN_FALLBACK_VARIABLE, None)
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        remove_folder()

    atexit.register(stop)
    server.stop, server.socket_path = stop, socket_path
    server.client = binary if client_built else None
    return server
