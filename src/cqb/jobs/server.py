"""A fork server for `cqb run` jobs: a pipeline's thousands of short jobs skip
Python's and numpy's start-up (docs/jobs.md).

The workflow's ``onstart`` starts one server (cqb.jobs.client.start) that
imports numpy, the simulator, the policies and scipy once, then listens on a
Unix socket in a private folder. Each ``cqb run`` job stays its own Snakemake
job and its own process: it finds the socket in ``CQB_RUN_SERVER``, sends its
command line, working folder, environment and umask with its stdout/stderr,
and waits. The server hands the request to a *worker*, a fork of the
preloaded process, which tells the job it has started and runs exactly what
``cqb run`` would have run in-process, writing to the job's own log; the
server hands its exit status back, which the job exits with. A worker then
waits for the next request and serves up to ``--worker-runs`` runs, one after
another, before it exits: a fork's first run pays the copy-on-write faults of
the pages it touches (most of a short run's cost outside the simulation), the
runs after it do not.

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
                     RUN_SERVER_VARIABLE, STARTED, WORKER_RUNS)

REQUEST_TIMEOUT = 10.0  # seconds a connection may take to send its request (a client sends it at once)
PR_SET_PDEATHSIG = 1  # <sys/prctl.h>
_PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
# A worker's word after each run: the run's exit code, and whether it takes another run.
_REPORT = struct.Struct("!i?")
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


class Worker:
    """A forked worker as the server sees it: its end of the pair of sockets
    the two talk over, and while it runs a job, the job's connection and
    stderr (for a word on how the run ended)."""

    def __init__(self, channel: socket.socket):
        self.channel = channel
        self.connection: socket.socket | None = None
        self.stderr = -1
        self.job_gone = False  # killed because its job went (a Ctrl-C): the log says "interrupted"


class Server:
    """The select loop's state: the listener, connections awaiting their
    request (with a deadline), and the workers (children), busy with a job
    or idle."""

    def __init__(self, socket_path: str, parent_pid: int | None, environment: dict,
                 request_timeout: float = REQUEST_TIMEOUT, worker_runs: int = WORKER_RUNS):
        import selectors

        self.parent_pid, self.environment, self.request_timeout = parent_pid, environment, request_timeout
        self.worker_runs = worker_runs
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
        self.children: dict[int, Worker] = {}  # pid -> its worker, busy or idle
        self.idle: list[int] = []  # idle workers, the last to finish last: it is taken first (its pages are warm)

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
        elif isinstance(key.data, tuple):  # ("worker", pid): a worker's report, or its end
            worker = self.children.get(key.data[1])
            if worker is not None and worker.channel is key.fileobj:
                self._read_report(key.data[1], worker)
        else:  # a running job's connection: readable when the job has gone
            entry = self.children.get(key.data)
            if entry is not None and entry.connection is key.fileobj:  # not a connection closed in this batch
                entry.job_gone = True
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
        while self.idle:  # no more jobs: an idle worker sees its socket close and exits
            self._retire(self.children[self.idle.pop()])

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
            pid = self._hand_to_idle_worker(connection, message, fds)
            if pid is None:
                pid = self._fork(connection, json.loads(message), fds)
        except BaseException:
            _close(*fds)
            connection.close()
            raise
        os.close(fds[0])
        worker = self.children[pid]
        worker.connection, worker.stderr = connection, fds[1]
        self.selector.register(connection, selectors.EVENT_READ, pid)

    def _hand_to_idle_worker(self, connection: socket.socket, message: bytes, fds: list[int]) -> int | None:
        """The pid of the idle worker now running the request, or None (no
        worker is idle, or none took it: a fork runs it)."""
        while self.idle:
            pid = self.idle.pop()
            worker = self.children[pid]
            try:
                socket.send_fds(worker.channel, [message], [connection.fileno(), *fds])
            except OSError as error:
                if error.errno == errno.EMSGSIZE:  # too large for the pair: a fork has it in its memory
                    self.idle.append(pid)
                    return None
                self._retire(worker)  # it has gone: _reap sees to it
                continue
            return pid
        return None

    def _read_report(self, pid: int, worker: Worker) -> None:
        """A worker's word after a run: the job gets its exit status, and the
        worker becomes idle, or is retired. An end of file: it has exited
        (_reap tells its job, if any)."""
        try:
            report = worker.channel.recv(_REPORT.size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            report = b""
        if len(report) != _REPORT.size:
            self._retire(worker)
            return
        code, more = _REPORT.unpack(report)
        self._answer(worker, code)
        if more and self.accepting and not self.stopping:
            self.idle.append(pid)
        else:
            self._retire(worker)

    def _answer(self, worker: Worker, code: int) -> None:
        """The job's exit status, and its connection and stderr closed."""
        if worker.connection is None:
            return
        os.close(worker.stderr)
        try:
            worker.connection.send(EXIT_STATUS.pack(code))
        except OSError:
            pass  # the job has gone
        try:
            self.selector.unregister(worker.connection)
        except (KeyError, ValueError):
            pass
        worker.connection.close()
        worker.connection, worker.stderr = None, -1

    def _retire(self, worker: Worker) -> None:
        """Closed, the worker's socket tells it to exit once its run (if any) is done."""
        if worker.channel.fileno() >= 0:
            try:
                self.selector.unregister(worker.channel)
            except (KeyError, ValueError):
                pass
            worker.channel.close()

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
        import selectors

        server_pid = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        channel, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = os.fork()
        except BaseException:
            channel.close()
            worker_end.close()
            raise
        if pid == 0:
            code = 1
            try:
                channel.close()
                code = _worker(self, server_pid, worker_end, connection, request, fds)
            except BaseException:
                try:
                    import traceback

                    traceback.print_exc()
                    sys.stderr.flush()
                except BaseException:
                    pass
            finally:
                os._exit(code)
        worker_end.close()
        channel.setblocking(False)
        self.children[pid] = Worker(channel)
        self.selector.register(channel, selectors.EVENT_READ, ("worker", pid))
        return pid

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            worker = self.children.get(pid)
            if worker is None:
                continue
            if worker.connection is not None and worker.channel.fileno() >= 0:
                self._read_report(pid, worker)  # a report it sent before it ended comes first
            del self.children[pid]
            if pid in self.idle:
                self.idle.remove(pid)
            self._retire(worker)
            if worker.connection is None:
                continue
            code = os.waitstatus_to_exitcode(status)  # it ended in its run
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = str(-code)
                ending = "interrupted: its job was stopped" if worker.job_gone else f"killed by signal {name}"
                try:
                    os.write(worker.stderr, f"cqb: the run was {ending}\n".encode())
                except OSError:
                    pass
            self._answer(worker, code if code >= 0 else 128 - code)

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


def _worker(server: Server, server_pid: int, channel: socket.socket, connection: socket.socket, request: dict,
            fds: list[int]) -> int:
    """In the fork: tied to the server, rid of the server's descriptors; then
    the job it was forked for, and each job the server sends after it (a
    request with its connection, stdout and stderr) until it has served
    ``server.worker_runs``, a run ended in an unexpected exception, or the
    server closes the socket."""
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
    from .. import cli

    runs = 0
    while True:
        code, reusable = _run_job(connection, request, fds, cli)
        runs += 1
        more = reusable and runs < server.worker_runs
        channel.send(_REPORT.pack(code, more))
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
        cli.run_cpu_origin = time.process_time()  # the run's CPU, not the worker's so far


def _run_job(connection: socket.socket, request: dict, fds: list[int], cli) -> tuple[int, bool]:
    """One job in the worker: the job's stdio, folder, umask and environment;
    STARTED; `cqb run` as in a process of its own; then the job's stdio let
    go. Its exit code, and whether the worker may take another."""
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
    connection.send(STARTED)
    connection.close()
    reusable = True
    try:
        # the filters as the run found them, and a warning shown again in each run's log
        with warnings.catch_warnings():
            code = cli.main(list(request["argv"]))
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
    _flush()
    _release_stdio(null)
    return (code if isinstance(code, int) else 0), reusable


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
          remove_when_orphaned: tuple[str, ...] = (), request_timeout: float = REQUEST_TIMEOUT,
          worker_runs: int = WORKER_RUNS) -> int:
    """Accept run requests on ``socket_path`` until SIGTERM or until the
    parent process (the Snakemake that started us) is gone; in that case only,
    the paths in ``remove_when_orphaned`` are removed (else the parent does)."""
    environment = {name: value for name, value in os.environ.items() if name not in RUNTIME_VARIABLES}
    preload()
    server = Server(socket_path, parent_pid, environment, request_timeout, worker_runs)
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
    parser.add_argument("--worker-runs", type=_positive, default=WORKER_RUNS, metavar="N",
                        help="runs one forked worker serves, one after another, before it exits (1: a fork per run)")
    args = parser.parse_args(argv)
    return serve(args.socket, args.parent, args.ready_fd, tuple(args.remove), args.request_timeout,
                 args.worker_runs)


def _positive(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a positive integer: {text!r}")
    return value


if __name__ == "__main__":
    sys.exit(main())
