"""The job side of the run server (cqb.run_server): what a `cqb run` job, the
workflow and the benchmarks need without importing the server, numpy or the
command line — the socket variable, forwarding a command, starting a server,
and the CPU field of a run's last log line.

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


def start(socket_dir: str | None = None, timeout: float = 60.0):
    """Start a server for this process's jobs: ``CQB_RUN_SERVER`` is set in
    ``os.environ`` (jobs inherit it) and the server stops when this process
    exits. The server process, or None where it cannot start (then jobs run
    in-process, as without it)."""
    import atexit
    import selectors
    import socket
    import subprocess
    import tempfile

    if not hasattr(socket, "AF_UNIX") or not hasattr(socket, "send_fds") or not hasattr(socket, "SOCK_SEQPACKET"):
        return None
    folder = tempfile.mkdtemp(prefix="cqb-run-server-", dir=socket_dir)  # private: mode 0700
    socket_path = os.path.join(folder, "socket")
    ready_read, ready_write = os.pipe()
    command = [sys.executable, "-m", "cqb.run_server", "--socket", socket_path,
               "--parent", str(os.getpid()), "--ready-fd", str(ready_write)]
    server = subprocess.Popen(command, pass_fds=(ready_write,), stdin=subprocess.DEVNULL)
    os.close(ready_write)
    with selectors.DefaultSelector() as selector:
        selector.register(ready_read, selectors.EVENT_READ)
        ready = bool(selector.select(timeout)) and os.read(ready_read, 16) == b"ready\n"
    os.close(ready_read)
    if not ready:
        server.kill()
        server.wait()
        os.rmdir(folder)
        return None
    os.environ[RUN_SERVER_VARIABLE] = socket_path

    def stop():
        os.environ.pop(RUN_SERVER_VARIABLE, None)
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
        try:
            os.rmdir(folder)
        except OSError:
            pass

    atexit.register(stop)
    server.stop, server.socket_path = stop, socket_path
    return server
