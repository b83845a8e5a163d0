"""Faults of the job hand-off (docs/jobs.md, "Faults"): none turns into a
failed or doubled run. A small real workflow whose server is stopped or
killed mid-run; a server fed bad requests, a silent connection, another
user, jobs with another start-up environment, and crashed runs."""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import copy_workflow, run_file_of_log, snakemake
from cqb.jobs import client as run_client
from cqb.jobs import admission, worker as run_worker
from cqb.jobs import server as run_server
from cqb.jobs.client import ENDED, EXIT_STATUS, REFUSED, REPLY_LIMIT, RUN_SERVER_VARIABLE, STARTED
from test_jobs_handoff import CQB, REPO, RUN_START, SERVER_VARIABLES, _children, _gone, _start_long_job, needs_compiler

pytestmark = pytest.mark.skipif(not (sys.platform.startswith("linux") and hasattr(socket, "send_fds")),
                                reason="the run server runs on Linux (PR_SET_PDEATHSIG, SO_PEERCRED, /proc)")

# ------------------------------------------------------------ a real small workflow

FAULT_CONFIG = {
    "results_dir": "results/fault", "figures_dir": "results/fault/figures",
    "experiments": {"fault_check": {
        "description": "jobs of the hand-off's fault tests",
        "instance": {"kind": "synthetic", "n_servers": 5, "dim": 5, "arrival_rate": 0.7, "slack": 0.1},
        "horizon": 30000, "seeds": 2, "policies": ["random", "oracle"]}},
}
TARGET = "results/fault/aggregate/fault_check.tsv"
ARGS = (TARGET, "--cores", "2", "--rerun-incomplete", "--configfile", "config/smoke.yaml", "fault.yaml")


def _workflow(tmp_path: Path) -> tuple[Path, dict]:
    """A copy of the workflow with the fault config, and the environment to
    run it in: its own temporary folder, where the server's folder goes."""
    workdir = copy_workflow(tmp_path / "repo")
    (workdir / "fault.yaml").write_text(yaml.safe_dump(FAULT_CONFIG))
    (tmp_path / "tmp").mkdir()
    env = {key: value for key, value in os.environ.items() if key not in SERVER_VARIABLES}
    env["TMPDIR"] = str(tmp_path / "tmp")
    return workdir, env


def _outputs(workdir: Path) -> dict[str, bytes]:
    results = workdir / "results" / "fault"
    files = [*results.glob("runs/**/*.npz"), *results.glob("aggregate/*.tsv")]
    return {str(path.relative_to(results)): path.read_bytes() for path in files}


def _run(workdir: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", *ARGS], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=600)


def _wait_for(find, what: str, process: subprocess.Popen, seconds: float = 300):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = find()
        if found:
            return found
        if process.poll() is not None:
            break
        time.sleep(0.005)
    raise AssertionError(f"{what}: not seen before the workflow ended")


def _server_of(snakemake_pid: int) -> int | None:
    for pid in _children(snakemake_pid):
        try:
            if b"cqb.jobs.server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            pass
    return None


def _log_lines(workdir: Path) -> dict[Path, str]:
    return {log: log.read_text(errors="replace")
            for log in (workdir / "results" / "fault" / "logs" / "simulate").rglob("*.log")}


def _signalled_run(tmp_path, workdir, env, args, signal_number, ready):
    """Snakemake on ``args``, its server sent ``signal_number`` once
    ``ready(server)`` gives the server's children to watch: (exit code,
    output, those children)."""
    with open(tmp_path / "snakemake.out", "w+") as out:
        process = subprocess.Popen([sys.executable, "-m", "snakemake", *args], cwd=workdir, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, text=True)
        try:
            server = _wait_for(lambda: _server_of(process.pid), "the run server", process)
            children = _wait_for(lambda: ready(server), "the moment to signal the server", process)
            os.kill(server, signal_number)
            code = process.wait(1200)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        out.seek(0)
        output = out.read()
    assert _gone(server), "the server outlived the signal"
    return code, output, children


def _interrupted_run(tmp_path, signal_number):
    """The workflow, with its server sent ``signal_number`` while a forked run
    is in flight: (workdir, env, exit code, output, the run's pid)."""
    workdir, env = _workflow(tmp_path)
    code, output, (run, *_) = _signalled_run(tmp_path, workdir, env, ARGS, signal_number, _children)
    return workdir, env, code, output, run


@pytest.fixture(scope="module")
def clean_outputs(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("clean")
    workdir, env = _workflow(tmp_path)
    done = _run(workdir, env)
    assert done.returncode == 0, done.stderr[-4000:]
    outputs = _outputs(workdir)
    assert len(outputs) == 4 + 3  # the run files, the three tables
    for log, text in _log_lines(workdir).items():  # the server took every job: Snakemake's environment is its own
        assert "running in this process" not in text and "Q(T) =" in text, f"{log}:\n{text}"
    assert not list((tmp_path / "tmp").glob("cqb-run-server-*")), "the server's folder is left"
    return outputs


@pytest.mark.slow
def test_a_server_stopped_mid_run_fails_no_job(clean_outputs, tmp_path):
    workdir, _, code, output, run = _interrupted_run(tmp_path, signal.SIGTERM)
    assert code == 0, output[-4000:]
    assert _outputs(workdir) == clean_outputs
    assert not list((tmp_path / "tmp").glob("cqb-run-server-*")), "the server's folder is left"


# The base experiment's 16 jobs (8 policies, 2 seeds) at T = 100,000: runs of
# about a second, so that a kill lands in some.
BASE = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["experiments"]["synthetic_base"]
KILL_CONFIG = {"results_dir": "results/kill", "figures_dir": "results/kill/figures",
               "experiments": {"kill_check": {**BASE, "horizon": 100_000, "seeds": 2}}}
KILL_ARGS = ("results/kill/aggregate/kill_check.tsv", "--configfile", "config/smoke.yaml", "kill.yaml")


def _kill_workflow(tmp_path: Path) -> tuple[Path, dict]:
    workdir, env = _workflow(tmp_path)
    (workdir / "kill.yaml").write_text(yaml.safe_dump(KILL_CONFIG))
    return workdir, env


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:  # ended meanwhile
        pass


def _kill_outputs(workdir: Path) -> dict[str, bytes]:
    results = workdir / "results" / "kill"
    return {str(path.relative_to(results)): path.read_bytes()
            for path in [*results.glob("runs/**/*.npz"), *results.glob("aggregate/*.tsv")]}


def _kill_logs(workdir: Path) -> dict[Path, str]:
    return {log: log.read_text(errors="replace")
            for log in (workdir / "results" / "kill" / "logs" / "simulate").rglob("*.log")}


@pytest.fixture(scope="module")
def clean_base_outputs(tmp_path_factory):
    workdir, env = _kill_workflow(tmp_path_factory.mktemp("clean_base"))
    done = subprocess.run([sys.executable, "-m", "snakemake", *KILL_ARGS], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    outputs = _kill_outputs(workdir)
    assert len(outputs) == 16 + 3  # the run files, the three tables
    return outputs


@pytest.mark.slow
def test_a_server_killed_mid_run_fails_no_job_and_runs_none_twice(clean_base_outputs, tmp_path):
    """SIGKILL to the run server (as an OOM kill) once 4 of the 16 run files
    exist and a run is in flight, through the default profile (keep-going
    off): the jobs in flight run again in their own process once their runs
    have died, the rest run in theirs; Snakemake exits 0 with the clean run's
    bytes, and no log holds two runs."""
    workdir, env = _kill_workflow(tmp_path)
    runs = workdir / "results" / "kill" / "runs"

    def in_flight():  # a forked run that has started and not written its run file
        if len(list(runs.glob("**/*.npz"))) < 4:
            return None
        return [log for log, text in _kill_logs(workdir).items() if RUN_START in text and "Q(T) =" not in text
                and not run_file_of_log(workdir / "results" / "kill", log).exists()]

    def frozen_mid_run(server):
        """The server's workers, stopped while one is mid-run (so the kill lands
        in a run however late this process gets the CPU back); else None."""
        if not in_flight():
            return None
        workers = _children(server)
        for worker in workers:
            _signal(worker, signal.SIGSTOP)
        if in_flight():
            return workers  # the kill's PDEATHSIG reaches them stopped
        for worker in workers:
            _signal(worker, signal.SIGCONT)
        return None

    code, output, workers = _signalled_run(tmp_path, workdir, env, KILL_ARGS, signal.SIGKILL, frozen_mid_run)
    assert all(_gone(worker) for worker in workers), "a worker outlived its server"
    assert code == 0, output[-4000:]
    assert _kill_outputs(workdir) == clean_base_outputs
    logs = _kill_logs(workdir)
    assert len(logs) == 16
    for log, text in logs.items():
        assert text.count("Q(T) =") <= 1, f"{log} holds two runs:\n{text}"
    assert any(run_client.RUN_DIED in text for text in logs.values()), "no run was in flight at the kill"
    assert not list((tmp_path / "tmp").glob("cqb-run-server-*")), "the server's folder is left"
    assert not list(runs.glob("**/.*.tmp")), "a dead run's temporary is left"


# ------------------------------------------------------------ a server on its own

@pytest.fixture(scope="module")
def lone_server():
    """A server as the workflow starts it, its silent connections kept long
    (so that a test can tell a dropped one from one that waited)."""
    saved = {name: os.environ.get(name) for name in SERVER_VARIABLES}
    started = run_client.start(request_timeout=600)
    assert started is not None
    yield started
    started.stop()
    for name, value in saved.items():
        os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _job_environment(socket_path: str, extra=None) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in SERVER_VARIABLES}
    env[RUN_SERVER_VARIABLE] = socket_path
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])  # the fallback `cqb`
    env.update(extra or {})
    return env


def _raw_request(socket_path: str, message: bytes, n_fds: int = 2) -> tuple[list[bytes], list[bool]]:
    """Send ``message`` with ``n_fds`` pipe ends; (every reply until the
    server closes, for each pipe whether no one holds its write end anymore)."""
    pipes = [os.pipe() for _ in range(n_fds)]
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
        connection.connect(socket_path)
        socket.send_fds(connection, [message], [write for _, write in pipes])
        for _, write in pipes:
            os.close(write)
        connection.settimeout(120)
        replies = []
        while reply := connection.recv(REPLY_LIMIT):
            replies.append(reply)
    closed = []
    for read, _ in pipes:
        os.set_blocking(read, False)
        try:
            while os.read(read, 65536):  # what the run wrote, then the end
                pass
            closed.append(True)
        except BlockingIOError:
            closed.append(False)  # a write end is still open somewhere: the server's
        os.close(read)
    return replies, closed


def _request(argv=("run", "--policy", "random"), **changes) -> bytes:
    request = {"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ), "umask": 0o022}
    request.update(changes)
    return json.dumps(request).encode()


BAD_REQUESTS = {  # name -> (message, fds, what the server says)
    "not JSON": (b"{not json", 2, None),
    "empty": (b"", 2, None),
    "a JSON array": (b"[1, 2]", 2, "not a JSON object"),
    "no argv": (json.dumps({"cwd": "/", "env": {}, "umask": 18}).encode(), 2, "argv"),
    "another command": (_request(("time", "--", "sh", "-c", "true")), 2, "only `cqb run` is served"),
    "a bad umask": (_request(umask="022"), 2, "umask"),
    "no fds": (_request(), 0, None),
    "three fds": (_request(), 3, None),
    "a folder that is not there": (_request(cwd="/no/such/folder"), 2, "cannot enter the job's folder"),
}


def test_bad_requests_close_their_connection_and_fds_and_the_server_goes_on(lone_server, tmp_path):
    def send_all():
        for name, (message, n_fds, said) in BAD_REQUESTS.items():
            replies, closed = _raw_request(lone_server.socket_path, message, n_fds)
            assert all(closed), f"{name}: the server keeps a job's fd"
            assert STARTED not in replies, name
            if said is None:
                assert replies == [], name
            else:
                assert replies[0].startswith(REFUSED) and said in replies[0].decode(), (name, replies)

    send_all()  # whatever the server opens once
    before = _fds(lone_server.pid)
    for _ in range(6):  # 54 bad requests
        send_all()
    assert _fds(lone_server.pid) == before
    done = subprocess.run([*CQB, "run", "--policy", "random", "--seed", "1", "--horizon", "50",
                           "--out", str(tmp_path / "run.npz")], env=_job_environment(lone_server.socket_path),
                          capture_output=True, text=True)
    assert done.returncode == 0 and "running in this process" not in done.stderr, done.stderr
    assert _fds(lone_server.pid) == before


def test_a_silent_connection_does_not_hold_up_the_next_job(lone_server, tmp_path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as silent:
        silent.connect(lone_server.socket_path)
        done = subprocess.run([*CQB, "run", "--policy", "random", "--seed", "1", "--horizon", "50",
                               "--out", str(tmp_path / "run.npz")], env=_job_environment(lone_server.socket_path),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0 and "running in this process" not in done.stderr, done.stderr
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):  # still waited for: the job did not wait for it to be dropped
            silent.recv(1)


def test_a_silent_connection_is_dropped_after_the_request_timeout(monkeypatch):
    for name in SERVER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    started = run_client.start(client=False, request_timeout=0.2)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as silent:
            silent.connect(started.socket_path)
            silent.settimeout(120)
            assert silent.recv(16) == b""
    finally:
        started.stop()
        for name in SERVER_VARIABLES:
            os.environ.pop(name, None)


def test_only_the_servers_own_user_is_served(monkeypatch):
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with left, right:
        assert admission.accepts_peer(left)  # the real credential: this test's own user
        monkeypatch.setattr(admission, "peer_credentials", lambda connection: (1, os.getuid() + 1, os.getgid()))
        assert not admission.accepts_peer(left)


def _faulty_server_job(tmp_path, fault: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """A job through a real server with ``fault`` (Python run in the server
    before it starts, with mark(word) to record what it saw) injected: the
    job's result, and the words marked."""
    socket_path = str(tmp_path / "socket")
    marks = tmp_path / "marks"
    ready_read, ready_write = os.pipe()
    script = ("import errno, os, socket, sys; from cqb.jobs import admission, server\n"
              f"def mark(word): open({str(marks)!r}, 'a').write(word + ' ')\n"
              "fork = server.Server._fork\n"
              "def marked_fork(*args): mark('forked'); return fork(*args)\n"
              "server.Server._fork = marked_fork\n"
              f"{fault}\n"
              "sys.exit(server.main(sys.argv[1:]))")
    process = subprocess.Popen([sys.executable, "-c", script, "--socket", socket_path, "--ready-fd", str(ready_write)],
                               pass_fds=(ready_write,), env=_job_environment(""))
    os.close(ready_write)
    try:
        assert os.read(ready_read, 16) == b"ready\n"
        done = subprocess.run([*CQB, "run", "--policy", "random", "--seed", "1", "--horizon", "50",
                               "--out", str(tmp_path / "run.npz")], env=_job_environment(socket_path),
                              capture_output=True, text=True, timeout=300)
        assert process.poll() is None, "the server ended"
    finally:
        os.close(ready_read)
        process.terminate()
        process.wait(60)
    assert done.returncode == 0, done.stderr
    assert "random seed 1: Q(T) =" in done.stderr and (tmp_path / "run.npz").exists()
    return done, marks.read_text().split() if marks.exists() else []


def test_a_job_of_another_user_is_refused_and_runs_in_its_own_process(tmp_path):
    """The real server, its credential function made to see another uid
    (a second user cannot be made here)."""
    _, marks = _faulty_server_job(tmp_path, "def other_user(connection): mark('asked'); "
                                            "return (1, os.getuid() + 1, os.getgid())\n"
                                            "admission.peer_credentials = other_user")
    assert marks == ["asked"]  # and never forked: the job ran in its own process


def test_a_fork_that_fails_leaves_the_job_to_its_own_process(tmp_path):
    """EAGAIN from fork (a process limit; root, as these tests may run,
    ignores RLIMIT_NPROC, so it is injected)."""
    done, marks = _faulty_server_job(tmp_path, "def no_fork(): mark('fork failed'); "
                                               "raise OSError(errno.EAGAIN, 'Resource temporarily unavailable')\n"
                                               "os.fork = no_fork")
    assert marks == ["forked", "fork", "failed"]
    assert done.stderr.splitlines()[0] == run_client.WENT_AWAY


def test_a_server_out_of_fds_stops_taking_jobs_and_they_run_in_their_own_process(tmp_path):
    done, marks = _faulty_server_job(tmp_path, "def no_fds(self): mark('EMFILE'); "
                                               "raise OSError(errno.EMFILE, 'Too many open files')\n"
                                               "socket.socket.accept = no_fds")
    assert marks == ["EMFILE"]


def test_the_server_leaves_sigint_to_snakemake(lone_server, tmp_path):
    os.kill(lone_server.pid, signal.SIGINT)  # as a terminal's Ctrl-C, or a script's background `&` job
    done = subprocess.run([*CQB, "run", "--policy", "random", "--seed", "1", "--horizon", "50",
                           "--out", str(tmp_path / "run.npz")], env=_job_environment(lone_server.socket_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "running in this process" not in done.stderr, done.stderr
    assert lone_server.process.poll() is None


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_compiler)],
                         ids=["python client", "compiled client"])
@pytest.mark.parametrize("name, value", [("PYTHONHASHSEED", "123"), ("OMP_NUM_THREADS", "7"),
                                         ("LD_LIBRARY_PATH", "/nowhere")])
def test_a_job_with_another_start_up_environment_runs_in_its_own_process(lone_server, tmp_path, compiled, name,
                                                                         value):
    command = [run_client.CLIENT_BINARY] if compiled else CQB
    done = subprocess.run([*command, "run", "--policy", "random", "--seed", "1", "--horizon", "50",
                           "--out", str(tmp_path / "run.npz")],
                          env=_job_environment(lone_server.socket_path, {name: value}), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("cqb: the run server did not take this run (") and name in first, first
    assert first.endswith("; running in this process")
    assert "random seed 1: Q(T) =" in done.stderr


def test_the_environment_check_names_what_a_fork_cannot_change():
    server = {"PATH": "/bin", "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1", "HOME": "/h"}
    assert admission.environment_difference({**server, "PATH": "/usr/bin", "HOME": "/x", "CQB_X": "1"}, server) is None
    # `cqb run` pins the BLAS thread counts itself, in-process as in a fork
    assert admission.environment_difference({**server, "OPENBLAS_NUM_THREADS": "4"}, server) is None
    for name in ("PYTHONPATH", "LD_PRELOAD", "OMP_NUM_THREADS", "LC_ALL", "VIRTUAL_ENV", "CONDA_PREFIX"):
        assert name in admission.environment_difference({**server, name: "x"}, server)
    assert "LANG" in admission.environment_difference({k: v for k, v in server.items() if k != "LANG"}, server)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_compiler)],
                         ids=["python client", "compiled client"])
def test_a_crashed_run_says_so_in_its_log(lone_server, tmp_path, compiled):
    """SIGINT in the run: the traceback and the signal, as a `cqb run` of its
    own prints and ends (130 through a shell)."""
    job = _start_long_job([run_client.CLIENT_BINARY] if compiled else CQB, lone_server.socket_path,
                          tmp_path / "x.npz")
    try:
        (child,) = _children(lone_server.pid)
        os.kill(child, signal.SIGINT)  # one: none is lost (tests/test_cli.py, test_sim_core.py)
        rest = job.stderr.read()
        assert job.wait(60) == 130, rest
    finally:
        job.kill()
        job.wait()
        job.stderr.close()
    assert "Traceback" in rest and "KeyboardInterrupt" in rest
    assert rest.rstrip().endswith("cqb: the run was killed by signal SIGINT")


@pytest.mark.parametrize("raised, code, printed", [
    (SystemExit("a message"), 1, "a message\n"), (SystemExit(3), 3, ""), (SystemExit(None), 0, ""),
    (SystemExit(True), True, ""),
])
def test_a_forked_systemexit_ends_as_the_interpreter_ends_one(raised, code, printed, capsys):
    own = subprocess.run([sys.executable, "-c", f"raise SystemExit({raised.code!r})"], capture_output=True, text=True)
    assert run_worker._exit_code(raised) == code == own.returncode
    assert capsys.readouterr().err == printed == own.stderr


def test_a_stale_key_kills_nothing():
    """A connection whose child was reaped in the same batch (or whose pid is
    not a child) is not a reason to kill that pid: it may be another process."""
    bystander = subprocess.Popen(["sleep", "60"])
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        server = run_server.Server.__new__(run_server.Server)
        server.children = {}
        server.selector = None  # not reached
        Key = collections.namedtuple("Key", "fileobj data")
        server._handle(Key(left, bystander.pid))  # reaped already: not among the children
        worker = run_worker.Worker(right)
        worker.connection = right
        server.children = {bystander.pid: worker}
        server._handle(Key(left, bystander.pid))  # a closed connection of an earlier child with that pid
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
        left.close()
        right.close()


def test_the_status_of_a_run_comes_after_its_start(lone_server, tmp_path):
    replies, closed = _raw_request(lone_server.socket_path, _request(
        ("run", "--policy", "random", "--seed", "1", "--horizon", "20", "--out", str(tmp_path / "r.npz")),
        cwd=str(tmp_path)))
    assert replies == [STARTED, EXIT_STATUS.pack(0), ENDED] and all(closed)
