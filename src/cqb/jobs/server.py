"""A fork server for `cqb run` jobs: a pipeline's thousands of short jobs skip
Python's and numpy's start-up (docs/jobs.md).

The workflow's ``onstart`` starts one server (cqb.jobs.client.start) that
imports what a run needs once (cqb.jobs.worker.preload), then listens on a
Unix socket in a private folder. Each ``cqb run`` job stays its own Snakemake
job and its own process: it sends its command line, working folder,
environment and umask with its stdout/stderr, and waits. This loop checks the
request (cqb.jobs.admission) and hands it to a *worker*, a fork of the
preloaded process (cqb.jobs.worker), which says it has started, runs what
``cqb run`` would have run in-process, writing to the job's own log, and sends
the exit status, which the job exits with. A worker serves up to
``--worker-runs`` runs, one after another: a fork's first run pays the
copy-on-write faults of the pages it touches, the runs after it do not.

No job gets two runs: a job the server refuses, or loses before the worker
said it started, runs in its own process; a server lost during the run takes
its workers with it (PR_SET_PDEATHSIG), and the job runs again in its own
process once its connection's close says the worker has exited (a run that
wrote its output has sent its status by then). A killed job takes its worker
with it (the server sees the connection close).
One bad request closes only its connection; SIGTERM stops accepting and lets
the runs in flight finish; SIGINT is Snakemake's; the folder is removed here
only when the process that started the server is gone.

Run as ``python -m cqb.jobs.server``; the job side is cqb.jobs.client.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import sys
import time

from .admission import RUNTIME_VARIABLES, accepts_peer, environment_difference, request_problem
from .client import EXIT_STATUS, REFUSED, REQUEST_LIMIT, WORKER_RUNS
from .worker import REPORT, Worker, _close, preload, work

REQUEST_TIMEOUT = 10.0  # seconds a connection may take to send its request (a client sends it at once)


def _report(message: str) -> None:
    try:
        print(f"cqb run server: {message}", file=sys.stderr, flush=True)
    except OSError:
        pass



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
            if entry is not None and entry.connection is key.fileobj:
                # a worker reports before it tells its job the status: a report waiting here is a run that is
                # over, whose job has ended after it, not a killed job
                self._read_report(key.data, entry)
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
        """A worker's word after a run (it sends the job the status itself):
        the job let go here, and the worker becomes idle, or is retired. An end
        of file: it has exited (_reap tells its job, if any)."""
        try:
            report = worker.channel.recv(REPORT.size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            report = b""
        if len(report) != REPORT.size:
            self._retire(worker)
            return
        code, more = REPORT.unpack(report)
        self._answer(worker, None)
        if more and self.accepting and not self.stopping:
            self.idle.append(pid)
        else:
            self._retire(worker)

    def _answer(self, worker: Worker, code: int | None) -> None:
        """The job's exit status (None: the worker sent it), and its connection and stderr closed."""
        if worker.connection is None:
            return
        os.close(worker.stderr)
        try:
            if code is not None:
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
                code = work(self, server_pid, worker_end, connection, request, fds)
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
