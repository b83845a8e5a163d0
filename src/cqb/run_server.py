"""A fork server for `cqb run` jobs: a pipeline's thousands of short jobs skip
Python's and numpy's start-up.

A local pipeline run starts one server (``cqb serve``, from the workflow's
``onstart``) that imports numpy, the simulator, the policies and scipy once,
then listens on a Unix socket in a private folder. Each ``cqb run`` job stays
its own Snakemake job and its own process: it finds the socket in
``CQB_RUN_SERVER``, sends its command line, working folder, environment and
its umask and its stdout/stderr to the server, and waits. The server forks a child per
request — a fresh copy of the pristine, preloaded process — that runs exactly
what ``cqb run`` would have run in-process, writing to the job's own log, and
hands its exit status back, which the job exits with. A job that is killed
takes its child with it (the server sees the connection close); a job that
finds no server, or loses it, runs in-process as before. Run files are
identical either way (tests/test_run_server.py).

In the workflow a job is not even a Python process: ``cqb.run_client.start``
compiles the C client run_client.c beside the socket, and the simulate rule
runs it (``$CQB_RUN_CLIENT run ...``) where that worked; it sends the same
request as the Python client and falls back to the Python `cqb` the same way.

The job side (forwarding, starting a server, the compiled client, the socket
variable) is cqb.run_client; this module is the server, run as
``python -m cqb.run_server``.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import sys

from .run_client import EXIT_STATUS, REQUEST_LIMIT, RUN_SERVER_VARIABLE



def preload() -> str:
    """Import everything a run needs, once, in the server, and build the
    command line's parser; the code hash is taken now, so it describes the
    code the children actually run."""
    from . import cli

    cli.pin_blas_to_one_thread()  # before numpy: the children inherit one BLAS thread
    import scipy.optimize  # noqa: F401 (the projection of the CQB estimates)

    from .sim import runfile, simulate  # noqa: F401
    from .sim.code_hash import simulation_code_hash
    from .sim.policies import registered_policies

    registered_policies()
    # Each child parses with its own copy of this parser; one parse of a job's
    # command line here also leaves argparse's compiled patterns cached.
    cli.command_parser().parse_args(["run", "--instance-spec", "{}", "--policy", "oracle", "--params", "{}",
                                     "--horizon", "1", "--seed", "0", "--code-hash", "x", "--out", "x.npz"])
    return simulation_code_hash()


def prepare() -> str:
    """The server's state before it forks its first child: preloaded, and
    what is loaded now kept out of the garbage collector's passes — a full
    collection in a child would write to (and so copy) every page of the
    preloaded heap, 20-30 ms measured. (The built-in policies' runs, T = 5000,
    make no full collection: this bounds the cost of one that does.)"""
    code_hash = preload()
    gc.collect()
    gc.freeze()
    return code_hash


def serve(socket_path: str, parent_pid: int | None = None, ready_fd: int | None = None,
          remove: tuple[str, ...] = ()) -> int:
    """Accept run requests on ``socket_path`` until the parent process (the
    Snakemake that started us) is gone, or SIGTERM/SIGINT; then remove the
    socket and the files and empty folders in ``remove``, in order."""
    import selectors
    import signal

    prepare()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    listener.bind(socket_path)
    listener.listen(256)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_read, selectors.EVENT_READ, "signal")
    children: dict[int, socket.socket] = {}  # child pid -> the job's connection
    if ready_fd is not None:
        os.write(ready_fd, b"ready\n")
        os.close(ready_fd)
    try:
        while not stopping and (parent_pid is None or os.getppid() == parent_pid):
            for key, _ in selector.select(timeout=1.0):
                if key.data == "accept":
                    _start_child(listener, selector, children, (listener.fileno(), wake_read, wake_write))
                elif key.data == "signal":
                    while _drain(wake_read):
                        pass
                    _reap(selector, children)
                else:  # a job's connection: readable only when the job has gone
                    os.kill(key.data, signal.SIGKILL)
                    selector.unregister(key.fileobj)
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        listener.close()
        os.unlink(socket_path)
        for path in remove:  # also when the process that started us was killed and cannot
            try:
                os.rmdir(path) if os.path.isdir(path) else os.unlink(path)
            except OSError:
                pass
    return 0


def _drain(fd: int) -> bool:
    try:
        return bool(os.read(fd, 4096))
    except BlockingIOError:
        return False


def _start_child(listener, selector, children, server_fds) -> None:
    import selectors

    connection, _ = listener.accept()
    connection.settimeout(5.0)  # a request arrives right after the connect
    try:
        message, fds, _, _ = socket.recv_fds(connection, REQUEST_LIMIT, 2)
        request = json.loads(message)
    except (OSError, ValueError):
        connection.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for fd in server_fds:
                os.close(fd)
            for other in children.values():
                other.close()
            connection.close()
            code = _child(request, fds)
        finally:
            os._exit(code)
    for fd in fds:
        os.close(fd)
    connection.setblocking(False)
    children[pid] = connection
    selector.register(connection, selectors.EVENT_READ, pid)


def _child(request: dict, fds: list[int]) -> int:
    """In the fork: the job's stdio, folder and environment, then `cqb run`."""
    import signal
    import traceback

    signal.set_wakeup_fd(-1)
    for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(number, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for target, fd in zip((1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.umask(request["umask"])  # the job's, so its run file gets the job's mode
    _use_environment(request["env"])
    from .cli import main

    try:
        code = main(list(request["argv"]))
    except SystemExit as exit:  # argparse's usage errors
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 2)
    except BaseException:  # what an in-process run would print
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _use_environment(env: dict) -> None:
    """The job's environment in place of the server's, setting only what
    differs: the two are mostly the same (both inherit Snakemake's), and
    every variable set or dropped copies pages of the preloaded heap (about
    0.5 ms a job against clearing and setting them all)."""
    env = {name: value for name, value in env.items() if name != RUN_SERVER_VARIABLE}  # the child runs it
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def _reap(selector, children) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = children.pop(pid, None)
        if connection is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        try:
            connection.send(EXIT_STATUS.pack(code if code >= 0 else 128 - code))
        except OSError:
            pass  # the job has gone
        try:
            selector.unregister(connection)
        except (KeyError, ValueError):
            pass
        connection.close()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cqb.run_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True, help="the Unix socket to listen on")
    parser.add_argument("--parent", type=int, help="stop when this process is gone")
    parser.add_argument("--ready-fd", type=int, help="write 'ready' to this file descriptor once listening")
    parser.add_argument("--remove", action="append", default=[], metavar="PATH",
                        help="a file or empty folder to remove when stopping (repeatable; in order)")
    args = parser.parse_args(argv)
    return serve(args.socket, args.parent, args.ready_fd, tuple(args.remove))


if __name__ == "__main__":
    sys.exit(main())
