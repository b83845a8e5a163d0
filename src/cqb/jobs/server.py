"""A fork server for `cqb run` jobs: a pipeline's thousands of short jobs skip
Python's and numpy's start-up (docs/jobs.md).

The workflow's ``onstart`` starts one server (cqb.jobs.client.start) that
imports numpy, the simulator, the policies and scipy once, then listens on a
Unix socket in a private folder. Each ``cqb run`` job stays its own Snakemake
job and its own process: it finds the socket in ``CQB_RUN_SERVER``, sends its
command line, working folder, environment and umask with its stdout/stderr,
and waits. The server forks a child per request — a copy of the preloaded
process — which tells the job it has started and runs exactly what ``cqb run``
would have run in-process, writing to the job's own log; the server hands its
exit status back, which the job exits with.

A job runs once: where the server refuses it or is gone before the child said
it started, the job runs in its own process; after that, a lost server fails
the job (each child dies with the server, PR_SET_PDEATHSIG). A killed job
takes its child with it (the server sees the connection close). One bad
request closes only its own connection; SIGTERM stops accepting and lets the
runs in flight finish; SIGINT is Snakemake's to handle; the folder is removed
here only when the process that started the server is gone.

Run as ``python -m cqb.jobs.server``; the job side is cqb.jobs.client.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import struct
import sys
import time

from .client import (EXIT_STATUS, REFUSED, REQUEST_LIMIT, RUN_CLIENT_VARIABLE, RUN_FALLBACK_VARIABLE,
                     RUN_SERVER_VARIABLE, STARTED)

REQUEST_TIMEOUT = 10.0  # seconds a connection may take to send its request (a client sends it at once)
PR_SET_PDEATHSIG = 1  # <sys/prctl.h>
_PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
# Read by the interpreter, the dynamic loader, the C library or a numeric
# library when a process starts (or imports numpy): a fork of the server
# cannot take the job's value. The BLAS thread counts are not here: `cqb run`
# sets them itself (cqb.cli.pin_blas_to_one_thread), in-process as in a fork.
FIXED_AT_START_PREFIXES = ("PYTHON", "LD_", "LC_", "MALLOC_", "GLIBC_", "NPY_", "NUMPY_")
FIXED_AT_START_NAMES = ("LANG", "LANGUAGE", "VIRTUAL_ENV", "CONDA_PREFIX", "VECLIB_MAXIMUM_THREADS")
RUNTIME_VARIABLES = (RUN_SERVER_VARIABLE, RUN_CLIENT_VARIABLE, RUN_FALLBACK_VARIABLE)


def preload() -> str:
    """Import everything a run needs, once, in the server, and build the
    command line's parser; the code hash is taken now, so it describes the
    code the children actually run."""
    from .. import cli

    cli.pin_blas_to_one_thread()  # before numpy: the children inherit one BLAS thread
    # numpy.random (nine Cython modules, ~18 ms) and the core: a run imports no compiled module,
    # so it pays no such import and a Ctrl-C cannot land in one (cli.load_compiled_modules)
    cli.load_compiled_modules()
    from ..sim import runfile, simulate  # noqa: F401
    from ..sim.code_hash import simulation_code_hash
    from ..sim.policies import registered_policies

    registered_policies()
    # A first use each child would otherwise repeat: the core's build check.
    from ..sim.core import core

    core()
    # Each child parses with its own copy of this parser; one parse of a job's
    # command line here also leaves argparse's compiled patterns cached.
    cli.command_parser().parse_args(["run", "--instance-spec", "{}", "--policy", "oracle", "--params", "{}",
                                     "--horizon", "1", "--seed", "0", "--code-hash", "x", "--out", "x.npz"])
    return simulation_code_hash()


def fixed_at_start(name: str) -> bool:
    from ..cli import BLAS_THREAD_VARIABLES

    if name in BLAS_THREAD_VARIABLES:
        return False
    return name.startswith(FIXED_AT_START_PREFIXES) or name in FIXED_AT_START_NAMES or name.endswith("_NUM_THREADS")


def environment_difference(job: dict, server: dict) -> str | None:
    """Why a job with environment ``job`` cannot run in a fork of a server
    started with ``server`` (the variables that differ), or None."""
    names = sorted({name for name in (*job, *server)
                    if fixed_at_start(name) and job.get(name) != server.get(name)})
    if not names:
        return None
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"{shown} differ{'s' if len(names) == 1 else ''} from the server's, and cannot change after a fork"


def request_problem(request) -> str | None:
    """What makes ``request`` (parsed JSON) not a run request, or None."""
    if not isinstance(request, dict):
        return "not a JSON object"
    argv, cwd, env, umask = (request.get(key) for key in ("argv", "cwd", "env", "umask"))
    if not (isinstance(argv, list) and all(isinstance(item, str) for item in argv)):
        return "argv is not a list of strings"
    if argv[:1] != ["run"]:
        return "only `cqb run` is served"
    if not isinstance(cwd, str):
        return "cwd is not a string"
    if not (isinstance(env, dict) and all(isinstance(value, str) for value in env.values())):
        return "env is not a mapping of strings"
    if not (isinstance(umask, int) and not isinstance(umask, bool) and 0 <= umask <= 0o777):
        return "umask is not a mode"
    return None


def peer_credentials(connection: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end (SO_PEERCRED)."""
    return _PEER_CREDENTIALS.unpack(connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                          _PEER_CREDENTIALS.size))


def accepts_peer(connection: socket.socket) -> bool:
    """Only this user's processes: the folder's mode keeps others out, this
    check whatever reaches the socket anyway."""
    return peer_credentials(connection)[1] == os.getuid()


def _report(message: str) -> None:
    try:
        print(f"cqb run server: {message}", file=sys.stderr, flush=True)
    except OSError:
        pass


def _close(*fds: int) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class Server:
    """The select loop's state: the listener, connections awaiting their
    request (with a deadline), and the children with their job's connection
    and stderr."""

    def __init__(self, socket_path: str, parent_pid: int | None, environment: dict,
                 request_timeout: float = REQUEST_TIMEOUT):
        import selectors

        self.parent_pid, self.environment, self.request_timeout = parent_pid, environment, request_timeout
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        self.listener.bind(socket_path)
        self.listener.listen(256)
        self.listener.setblocking(False)
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_read, False)
        os.set_blocking(self.wake_write, False)
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.stopping = False
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Snakemake's: it ends the jobs, then itself
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wake_read, selectors.EVENT_READ, "signal")
        self.accepting = True
        self.waiting: dict[socket.socket, float] = {}  # connection -> deadline of its request
        self.children: dict[int, tuple[socket.socket, int]] = {}  # pid -> (job's connection, its stderr)

    def _stop(self, *_):
        self.stopping = True

    def parent_gone(self) -> bool:
        return self.parent_pid is not None and os.getppid() != self.parent_pid

    def run(self) -> bool:
        """Serve until SIGTERM (then until the runs in flight end) or until
        the parent is gone. True when it is gone."""
        while True:
            if self.parent_gone():
                return True
            if self.stopping:
                self._stop_accepting()
                if not self.children:
                    return False
            now = time.monotonic()
            timeout = max(0.0, min([now + 1.0, *self.waiting.values()]) - now)
            for key, _ in self.selector.select(timeout):
                try:
                    self._handle(key)
                except Exception as error:  # one connection's fault: the loop goes on
                    _report(f"{type(error).__name__}: {error}")
            now = time.monotonic()
            for connection in [c for c, deadline in self.waiting.items() if deadline <= now]:
                self._drop(connection)  # connected and silent

    def _handle(self, key) -> None:
        if key.data == "accept":
            self._accept()
        elif key.data == "signal":
            while self._drain():
                pass
            self._reap()
        elif key.data == "request":
            if key.fileobj in self.waiting:
                self._take_request(key.fileobj)
        else:  # a running job's connection: readable when the job has gone
            entry = self.children.get(key.data)
            if entry is not None and entry[0] is key.fileobj:  # not a connection _reap closed in this batch
                try:
                    os.kill(key.data, signal.SIGKILL)  # not yet reaped, so still our child
                except ProcessLookupError:
                    pass
                self.selector.unregister(key.fileobj)

    def _drain(self) -> bool:
        try:
            return bool(os.read(self.wake_read, 4096))
        except BlockingIOError:
            return False

    def _stop_accepting(self) -> None:
        if self.listener.fileno() >= 0:
            if self.accepting:
                self.selector.unregister(self.listener)
            self.listener.close()  # queued connections are refused: their jobs run in their own process
            self.accepting = False
        for connection in list(self.waiting):
            self._drop(connection)

    def _accept(self) -> None:
        import selectors

        for _ in range(64):  # then let the other events in
            try:
                connection, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                if error.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of a resource: no more jobs here (they run in their own process), and no busy loop
                    _report(f"cannot accept jobs ({error}); the jobs from now on run in their own process")
                    self._stop_accepting()
                    return
                continue  # ECONNABORTED and the like: that connection's fault
            try:
                if not accepts_peer(connection):
                    connection.close()
                    continue
                connection.setblocking(False)
                self.selector.register(connection, selectors.EVENT_READ, "request")
            except Exception:
                connection.close()
                raise
            self.waiting[connection] = time.monotonic() + self.request_timeout

    def _drop(self, connection: socket.socket) -> None:
        self.waiting.pop(connection, None)
        try:
            self.selector.unregister(connection)
        except (KeyError, ValueError):
            pass
        connection.close()

    def _take_request(self, connection: socket.socket) -> None:
        import selectors

        try:
            message, fds, flags, _ = socket.recv_fds(connection, REQUEST_LIMIT, 2)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(connection)
            return
        del self.waiting[connection]
        self.selector.unregister(connection)
        try:
            problem = self._problem(message, fds, flags)
            if problem is not None:
                if isinstance(problem, tuple):  # a request we could run but must not: say why
                    connection.send(REFUSED + problem[0].encode())
                _close(*fds)
                connection.close()
                return
            request = json.loads(message)
            pid = self._fork(connection, request, fds)
        except BaseException:
            _close(*fds)
            connection.close()
            raise
        os.close(fds[0])
        self.children[pid] = (connection, fds[1])  # its stderr: for a word on how the run ended
        self.selector.register(connection, selectors.EVENT_READ, pid)

    def _problem(self, message: bytes, fds: list[int], flags: int):
        """None for a request to run; a string for one that is not one (closed
        without a word); a 1-tuple for one to refuse with its reason."""
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or len(fds) != 2 or not message:
            return "truncated, or not two file descriptors"
        try:
            request = json.loads(message)
        except ValueError:
            return "not JSON"
        problem = request_problem(request)
        if problem is not None:
            return (problem,)
        difference = environment_difference(request["env"], self.environment)
        return (difference,) if difference else None

    def _fork(self, connection: socket.socket, request: dict, fds: list[int]) -> int:
        server_pid = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(self, server_pid, connection, request, fds)
            except BaseException:
                try:
                    import traceback

                    traceback.print_exc()
                    sys.stderr.flush()
                except BaseException:
                    pass
            finally:
                os._exit(code)
        return pid

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            entry = self.children.pop(pid, None)
            if entry is None:
                continue
            connection, stderr = entry
            code = os.waitstatus_to_exitcode(status)
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = str(-code)
                try:
                    os.write(stderr, f"cqb: the run was killed by signal {name}\n".encode())
                except OSError:
                    pass
            os.close(stderr)
            try:
                connection.send(EXIT_STATUS.pack(code if code >= 0 else 128 - code))
            except OSError:
                pass  # the job has gone
            try:
                self.selector.unregister(connection)
            except (KeyError, ValueError):
                pass
            connection.close()

    def close(self) -> None:
        for pid in self.children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._stop_accepting()


def _die_with_server(server_pid: int) -> bool:
    """PR_SET_PDEATHSIG: SIGKILL when the server is gone (Linux), then
    whether it is still there (it may have gone before the call)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    return os.getppid() == server_pid


def _child(server: Server, server_pid: int, connection: socket.socket, request: dict, fds: list[int]) -> int:
    """In the fork: tied to the server, the job's stdio, folder and
    environment; STARTED; then `cqb run`."""
    if not _die_with_server(server_pid):
        return 1  # the server is gone and said nothing: the job runs in its own process
    signal.set_wakeup_fd(-1)
    for number in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a `cqb run` of its own
    server.selector.close()
    _close(server.wake_read, server.wake_write)
    server.listener.close()
    for other in [*server.waiting, *(entry[0] for entry in server.children.values())]:
        other.close()
    _close(*(entry[1] for entry in server.children.values()))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for target, fd in zip((1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    try:
        os.chdir(request["cwd"])
        os.umask(request["umask"])  # the job's, so its run file gets the job's mode
        _use_environment(request["env"])
    except OSError as error:  # nothing ran yet: the job runs in its own process
        connection.send(REFUSED + f"cannot enter the job's folder: {error}".encode())
        return 1
    connection.send(STARTED)
    connection.close()
    from ..cli import main

    try:
        code = main(list(request["argv"]))
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
        code = 1
    _flush()
    return code if isinstance(code, int) else 0


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


def remove(paths) -> None:
    for path in paths:
        try:
            if os.path.isdir(path):
                for name in os.listdir(path):
                    os.unlink(os.path.join(path, name))
                os.rmdir(path)
            else:
                os.unlink(path)
        except OSError:
            pass


def serve(socket_path: str, parent_pid: int | None = None, ready_fd: int | None = None,
          remove_when_orphaned: tuple[str, ...] = (), request_timeout: float = REQUEST_TIMEOUT) -> int:
    """Accept run requests on ``socket_path`` until SIGTERM or until the
    parent process (the Snakemake that started us) is gone; in that case only,
    the paths in ``remove_when_orphaned`` are removed (else the parent does)."""
    environment = {name: value for name, value in os.environ.items() if name not in RUNTIME_VARIABLES}
    preload()
    server = Server(socket_path, parent_pid, environment, request_timeout)
    if ready_fd is not None:
        os.write(ready_fd, b"ready\n")
        os.close(ready_fd)
    orphaned = True
    try:
        orphaned = server.run()
    finally:
        server.close()
        if orphaned:
            remove(remove_when_orphaned)
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cqb.jobs.server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True, help="the Unix socket to listen on")
    parser.add_argument("--parent", type=int, help="stop when this process is gone")
    parser.add_argument("--ready-fd", type=int, help="write 'ready' to this file descriptor once listening")
    parser.add_argument("--remove", action="append", default=[], metavar="PATH",
                        help="a file or folder (with its files) to remove when the parent is gone (repeatable)")
    parser.add_argument("--request-timeout", type=float, default=REQUEST_TIMEOUT, metavar="SECONDS",
                        help="drop a connection that sends no request for this long")
    args = parser.parse_args(argv)
    return serve(args.socket, args.parent, args.ready_fd, tuple(args.remove), args.request_timeout)


if __name__ == "__main__":
    sys.exit(main())
