"""The job hand-off (cqb.jobs): jobs forked from one preloaded server write
the same run files as jobs that start their own Python, pass on exit codes
and messages, die with their job, and fall back when no server takes them;
the same through the compiled job client (client.c, built by the package
build), which sends what the Python client sends."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

import cqb
import pytest

from cqb.jobs import client as run_client
from cqb.jobs.client import (EXIT_STATUS, REQUEST_LIMIT, RUN_CLIENT_VARIABLE, RUN_FALLBACK_VARIABLE,
                             RUN_SERVER_VARIABLE, STARTED)
from cqb.sim.code_hash import simulation_code_hash

pytestmark = pytest.mark.skipif(not (hasattr(socket, "send_fds") and Path("/proc/self/stat").exists()),
                                reason="the run server's tests need socket.send_fds and /proc")

CQB = [sys.executable, "-m", "cqb.cli"]
# A job given --code-hash logs what it runs just before the simulation starts:
# with a run of seconds, the line says the run is under way.
CODE_HASH = simulation_code_hash()
RUN_START = f"cqb {cqb.__version__} code {CODE_HASH}: "
SERVER_VARIABLES = (RUN_SERVER_VARIABLE, RUN_CLIENT_VARIABLE, RUN_FALLBACK_VARIABLE)
HAS_CLIENT = run_client.current_client() is not None
needs_compiler = pytest.mark.skipif(
    not HAS_CLIENT, reason="the package build made no current job client (no C compiler?): jobs use `cqb run`, "
                           "which the other tests cover")


def _children(pid: int) -> list[int]:
    """Live child processes of ``pid`` (from /proc: Linux only, like the server's tests)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == pid and fields[0] != "Z":
            children.append(int(stat.parent.name))
    return children


def _gone(pid: int, seconds: float = 30) -> bool:
    """Whether ``pid`` has exited (a zombie counts: it runs no more)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX":
                return True
        except (OSError, IndexError):
            return True
        time.sleep(0.02)
    return False


def _own_environment(monkeypatch):
    """Let a test start its own server: the module's server variables come back after it."""
    for name in SERVER_VARIABLES:
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])
        else:
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def server():
    started = run_client.start()
    assert started is not None, "the run server did not start"
    socket_path = os.environ[RUN_SERVER_VARIABLE]
    assert os.stat(started.folder).st_mode & 0o777 == 0o700  # the folder keeps other users out
    yield started, socket_path
    started.stop()
    assert started.process.poll() is not None
    assert not os.path.exists(os.path.dirname(socket_path)), "the server's folder (socket, client) is left"
    assert not set(SERVER_VARIABLES) & set(os.environ)


@pytest.fixture(scope="module")
def client(server):
    """The compiled job client the module's server built."""
    if not HAS_CLIENT:
        pytest.skip(needs_compiler.kwargs["reason"])
    started, _ = server
    assert started.client == run_client.CLIENT_BINARY
    assert os.environ[RUN_CLIENT_VARIABLE] == started.client
    return started.client


def _environment(server_path=None, env_extra=None):
    env = {key: value for key, value in os.environ.items() if key != RUN_SERVER_VARIABLE}
    if server_path:
        env[RUN_SERVER_VARIABLE] = server_path
    env.update(env_extra or {})
    return env


def _run(args, env_extra=None, server_path=None, command=CQB, **kwargs):
    return subprocess.run([*command, *args], env=_environment(server_path, env_extra), capture_output=True,
                          text=True, **kwargs)


def _same_arrays(a: Path, b: Path) -> bool:
    with np.load(a) as left, np.load(b) as right:
        return left.files == right.files and all(
            np.array_equal(left[key], right[key], equal_nan=left[key].dtype.kind == "f") for key in left.files)


@pytest.mark.parametrize("policy, extra", [
    ("cqb_opt", []), ("cqb_eps", ["--set", "tau=40"]), ("cqb_ts", []), ("q_ths", []), ("random", []),
])
def test_forked_runs_write_the_files_an_own_process_writes(server, tmp_path, policy, extra):
    _, socket_path = server
    args = ["run", "--policy", policy, "--seed", "3", "--horizon", "400", "--dim", "3", *extra]
    forked = _run([*args, "--out", str(tmp_path / "forked.npz")], server_path=socket_path)
    own = _run([*args, "--out", str(tmp_path / "own.npz")])
    assert forked.returncode == own.returncode == 0, forked.stderr + own.stderr
    assert _same_arrays(tmp_path / "forked.npz", tmp_path / "own.npz")
    assert (tmp_path / "forked.npz").read_bytes() == (tmp_path / "own.npz").read_bytes()
    # the job's own stderr gets the child's report
    assert f"{policy} seed 3: Q(T) =" in forked.stderr


@needs_compiler
@pytest.mark.parametrize("policy, extra", [
    ("cqb_opt", ["--code-hash", "0123456789abcdef"]), ("cqb_eps", ["--set", "tau=40"]), ("cqb_ts", []),
    ("oracle", []),
])
def test_the_compiled_client_gives_the_bytes_an_own_process_writes(server, client, tmp_path, policy, extra):
    _, socket_path = server
    args = ["run", "--policy", policy, "--seed", "4", "--horizon", "300", "--dim", "3", *extra]
    compiled = _run([*args, "--out", str(tmp_path / "compiled.npz")], server_path=socket_path, command=[client])
    own = _run([*args, "--out", str(tmp_path / "own.npz")])
    assert compiled.returncode == own.returncode == 0, compiled.stderr + own.stderr
    assert (tmp_path / "compiled.npz").read_bytes() == (tmp_path / "own.npz").read_bytes()
    assert f"{policy} seed 4: Q(T) =" in compiled.stderr  # through the job's own stderr
    assert compiled.stderr.splitlines()[:-1] == own.stderr.splitlines()[:-1]  # all but the timings


# jobs one after another, each unlike the one before it: policy, instance, folder, umask, environment
REUSE_JOBS = [
    ("random", ["--horizon", "400000", "--dim", "2", "--slack", "0.01"], 0o022, {}),  # long: its CPU shows
    ("cqb_opt", ["--horizon", "300", "--dim", "3"], 0o027, {"CQB_TEST_ONLY_HERE": "1"}),
    ("cqb_eps", ["--horizon", "300", "--set", "tau=40"], 0o077, {}),
    ("q_ths", ["--horizon", "300", "--n-servers", "3"], 0o002, {"CQB_TEST_ONLY_HERE": "2"}),
]


@pytest.mark.parametrize("worker_runs, workers", [(3, ["a", "a", None, "b"]), (1, [None] * 4)])
def test_a_worker_serves_runs_in_turn_each_as_its_own_process_would(tmp_path, monkeypatch, worker_runs, workers):
    """A worker takes the next job after its run, up to worker_runs (then it
    exits, and a fresh fork takes the next): each run writes the bytes and log
    a process of its own writes, in the job's folder with the job's umask, and
    logs its own CPU, not the worker's so far (the first run is long, the
    second short). ``workers``: the idle worker after each job (None: none)."""
    _own_environment(monkeypatch)
    started = run_client.start(client=False, worker_runs=worker_runs)
    try:
        idle, cpu = [], []
        for number, (policy, extra, umask, env) in enumerate(REUSE_JOBS):
            folder = tmp_path / f"job{number}"
            folder.mkdir()
            args = ["run", "--policy", policy, "--seed", str(number), *extra]
            job = subprocess.run(["/bin/sh", "-c", f'umask {umask:o}; exec "$@"', "sh", *CQB, *args,
                                  "--out", "served.npz"], cwd=folder, env=_environment(started.socket_path, env),
                                 capture_output=True, text=True, timeout=60)  # a pipe left open hangs
            own = _run([*args, "--out", str(folder / "own.npz")], env_extra=env)
            assert job.returncode == own.returncode == 0, job.stderr + own.stderr
            assert "running in this process" not in job.stderr, job.stderr
            assert (folder / "served.npz").read_bytes() == (folder / "own.npz").read_bytes()
            assert (folder / "served.npz").stat().st_mode & 0o777 == 0o666 & ~umask
            assert job.stderr.splitlines()[:-1] == own.stderr.splitlines()[:-1]  # all but the timings
            cpu.append(float(run_client.OWN_CPU.search(job.stderr).group(1)))
            if workers[number] is None:  # it has served its last run: it exits
                assert _wait_for_no_children(started.pid), "a worker outlived its last run"
                idle.append(None)
            else:
                (worker,) = _children(started.pid)
                idle.append(worker)
        names = {pid: name for pid, name in zip(idle, workers) if pid is not None}
        assert [names.get(pid) for pid in idle] == workers and len(set(names.values())) == len(names)
        assert cpu[0] > 0.2 and cpu[1] < 0.1, cpu
    finally:
        started.stop()


ISOLATION_SCRIPT = r"""
import json, os, socket, sys, warnings
from cqb.jobs import worker

class FakeRunCommand:  # cqb.jobs.run_command's main: the arguments after `run`
    def main(argv):
        print("ran", argv[0], os.getcwd(), oct(os.umask(0)), os.environ.get("CQB_TEST_VAR"), flush=True)
        warnings.warn("a warning each run shows")
        if argv[0] == "crash":
            raise RuntimeError("a bug")
        return int(argv[1])

folder = sys.argv[1]
results = []
for number, (word, code, umask, env) in enumerate([("first", "0", 0o027, {"CQB_TEST_VAR": "set"}),
                                                   ("second", "3", 0o077, {}), ("crash", "0", 0o022, {})]):
    os.makedirs(os.path.join(folder, word))
    job, ours = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    out = os.open(os.path.join(folder, word + ".out"), os.O_WRONLY | os.O_CREAT, 0o644)
    err = os.open(os.path.join(folder, word + ".err"), os.O_WRONLY | os.O_CREAT, 0o644)
    request = {"argv": ["run", word, code], "cwd": os.path.join(folder, word), "umask": umask,
               "env": {**{k: v for k, v in os.environ.items() if k != "CQB_TEST_VAR"}, **env}}
    results.append([*worker._run_job(ours, request, [out, err], FakeRunCommand), job.recv(100).decode(),
                    os.readlink("/proc/self/fd/1"), os.readlink("/proc/self/fd/2")])
print(json.dumps(results), file=open(os.path.join(folder, "results.json"), "w"))
"""


def test_each_run_of_a_worker_gets_its_jobs_stdio_folder_umask_and_environment_and_a_crash_ends_the_worker(
        tmp_path):
    """worker._run_job three times in one process, as a worker runs jobs:
    each run sees its job's folder, umask and environment (a variable of the
    first job gone in the second), writes to its job's stdout and stderr
    (released after it: /dev/null in their place), shows a warning again, and
    reports its exit code; after an unexpected exception the worker takes no
    other job."""
    done = subprocess.run([sys.executable, "-c", ISOLATION_SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert [row[:3] for row in results] == [[0, True, "started"], [3, True, "started"], [1, False, "started"]]
    assert all(row[3:] == ["/dev/null", "/dev/null"] for row in results)
    for word, umask, variable in [("first", "0o27", "set"), ("second", "0o77", "None"), ("crash", "0o22", "None")]:
        assert (tmp_path / f"{word}.out").read_text() == f"ran {word} {tmp_path / word} {umask} {variable}\n"
        assert "a warning each run shows" in (tmp_path / f"{word}.err").read_text()
    assert "RuntimeError: a bug" in (tmp_path / "crash.err").read_text()


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_compiler)],
                         ids=["python client", "compiled client"])
def test_a_forked_job_runs_in_its_own_folder_with_its_own_umask(server, tmp_path, request, compiled):
    _, socket_path = server
    folder = tmp_path / "job"
    folder.mkdir()
    command = request.getfixturevalue("client") if compiled else " ".join(CQB)
    done = subprocess.run(["/bin/sh", "-c", f"umask 027; exec {command} run --policy random --seed 1 "
                                            "--horizon 50 --out rel.npz"],
                          cwd=folder, env=_environment(socket_path), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (folder / "rel.npz").stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_compiler)],
                         ids=["python client", "compiled client"])
def test_a_trace_cache_through_the_server_is_drawn_once_with_the_jobs_umask(server, tmp_path, request, compiled):
    """--trace-cache reaches the forked run: the first job writes the cache
    (with the job's umask), the second reads it; both are the own process's run."""
    _, socket_path = server
    command = request.getfixturevalue("client") if compiled else " ".join(CQB)
    cache = tmp_path / "traces" / "seed3.npz"
    args = "run --policy cqb_opt --seed 3 --horizon 300 --dim 3"
    for name in ("first", "second"):
        done = subprocess.run(["/bin/sh", "-c", f"umask 027; exec {command} {args} --trace-cache {cache} "
                                                f"--out {tmp_path / name}.npz"],
                              env=_environment(socket_path), capture_output=True, text=True)
        assert done.returncode == 0 and "run server" not in done.stderr, done.stderr
        assert "trace cache" not in done.stderr
        if name == "first":
            assert cache.stat().st_mode & 0o777 == 0o640
            drawn = (cache.stat().st_ino, cache.stat().st_mtime_ns)
    assert (cache.stat().st_ino, cache.stat().st_mtime_ns) == drawn
    own = _run([*args.split(), "--out", str(tmp_path / "own.npz")])
    assert own.returncode == 0, own.stderr
    assert _same_arrays(tmp_path / "first.npz", tmp_path / "own.npz")
    assert _same_arrays(tmp_path / "second.npz", tmp_path / "own.npz")


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_compiler)],
                         ids=["python client", "compiled client"])
def test_bad_input_through_the_server_is_one_line_and_exit_2(server, tmp_path, request, compiled):
    _, socket_path = server
    command = [request.getfixturevalue("client")] if compiled else CQB
    done = _run(["run", "--policy", "no_such_policy", "--seed", "1", "--out", str(tmp_path / "x.npz")],
                server_path=socket_path, command=command)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "unknown policy 'no_such_policy'" in done.stderr
    usage = _run(["run", "--seed", "1", "--out", str(tmp_path / "x.npz")], server_path=socket_path, command=command)
    assert usage.returncode == 2 and "--policy" in usage.stderr


def _start_long_job(command, socket_path, out):
    """A job through the server whose run has started its simulation: a million
    rounds (seconds), which cannot end before the test acts on it."""
    job = subprocess.Popen([*command, "run", "--policy", "random", "--seed", "1", "--horizon", "1000000",
                            "--dim", "2", "--slack", "0.01", "--code-hash", CODE_HASH, "--out", str(out)],
                           env=_environment(socket_path),
                           stderr=subprocess.PIPE, text=True)
    for line in job.stderr:
        if line.startswith(RUN_START):
            break
    return job


def _wait_for_no_children(pid: int, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while _children(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _children(pid)


@pytest.mark.parametrize("compiled, signal_number", [
    (False, signal.SIGKILL), (False, signal.SIGTERM),
    pytest.param(True, signal.SIGKILL, marks=needs_compiler),
    pytest.param(True, signal.SIGTERM, marks=needs_compiler),
], ids=["python client, SIGKILL", "python client, SIGTERM", "compiled client, SIGKILL", "compiled client, SIGTERM"])
def test_a_killed_job_takes_its_forked_run_with_it(server, tmp_path, request, compiled, signal_number):
    started, socket_path = server
    out = tmp_path / "killed.npz"
    job = _start_long_job([request.getfixturevalue("client")] if compiled else CQB, socket_path, out)
    try:
        assert _children(started.pid), "the run is not a child of the server"
        job.send_signal(signal_number)
        job.wait(30)
    finally:
        job.kill()
        job.wait()
        job.stderr.close()
    assert _wait_for_no_children(started.pid), "the forked run outlived its job"
    assert job.returncode == -signal_number
    assert not out.exists()
    assert not list(tmp_path.glob(".killed.npz.*"))


@needs_compiler
def test_the_compiled_client_exits_with_the_status_of_a_killed_run(server, client, tmp_path):
    started, socket_path = server
    job = _start_long_job([client], socket_path, tmp_path / "x.npz")
    try:
        (child,) = _children(started.pid)
        os.kill(child, signal.SIGKILL)
        assert job.wait(30) == 128 + signal.SIGKILL  # as a shell reports a killed command
        assert job.stderr.read().endswith("cqb: the run was killed by signal SIGKILL\n")  # in the job's log
    finally:
        job.kill()
        job.wait()
        job.stderr.close()


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_compiler)],
                         ids=["python client", "compiled client"])
@pytest.mark.parametrize("server_variable", ["no such socket", "unset"])
def test_without_a_server_the_job_runs_in_its_own_process(tmp_path, request, compiled, server_variable):
    out = tmp_path / "own.npz"
    command = [request.getfixturevalue("client")] if compiled else CQB
    env = _environment(str(tmp_path / "no-such-socket") if server_variable == "no such socket" else None)
    done = subprocess.run(["/bin/sh", "-c", 'umask 027; exec "$@"', "sh", *command, "run", "--policy", "random",
                           "--seed", "1", "--horizon", "50", "--out", str(out)],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_mode & 0o777 == 0o640  # the job's umask, there too
    assert "random seed 1: Q(T) =" in done.stderr and "went away" not in done.stderr


# 300,000 rounds: seconds, far longer than a test takes to act on the run
LONG_RUN = ["run", "--policy", "random", "--seed", "2", "--horizon", "300000", "--dim", "2", "--slack", "0.01",
            "--code-hash", CODE_HASH]


def _long_job(command, socket_path, out, env_extra=None):
    """A job (umask 027) through ``socket_path`` whose run has started its
    simulation: (the job, the lines of its log so far)."""
    job = subprocess.Popen(["/bin/sh", "-c", 'umask 027; exec "$@"', "sh", *command, *LONG_RUN, "--out", str(out)],
                           env=_environment(socket_path, env_extra), stderr=subprocess.PIPE, text=True)
    lines = []
    for line in job.stderr:
        lines.append(line.rstrip("\n"))
        if line.startswith(RUN_START):
            break
    return job, lines


def _rest(job) -> list[str]:
    """The rest of the job's log (until every writer has let it go) and its exit code."""
    rest = job.stderr.read().splitlines()
    job.stderr.close()
    return rest, job.wait(60)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_compiler)],
                         ids=["python client", "compiled client"])
def test_a_job_whose_server_is_killed_mid_run_runs_again_once_its_run_has_died(tmp_path, monkeypatch, compiled):
    """The worker dies with its server (PR_SET_PDEATHSIG); its job sees the
    connection the worker held close without a status, and runs the job again
    in its own process: one complete run in the log, which says what happened,
    and the dead run's temporary removed (the workflow's sweep, named in
    CQB_STALE_SWEPT, came before it)."""
    _own_environment(monkeypatch)
    started = run_client.start(client=compiled)
    out = tmp_path / "run.npz"
    stale = tmp_path / ".run.npz.dead-run.tmp"  # what a run killed mid-write leaves
    stale.write_bytes(b"partial")
    try:
        assert (started.client is not None) == compiled
        job, lines = _long_job([started.client] if compiled else CQB, started.socket_path, out,
                               {"CQB_STALE_SWEPT": str(tmp_path)})
        workers = _children(started.pid)
        assert workers
        started.process.kill()
        started.process.wait()
        rest, code = _rest(job)
    finally:
        started.stop()
    assert all(_gone(worker, seconds=10) for worker in workers), "the run outlived its server"
    assert code == 0, rest
    log = lines + rest
    assert log[1] == run_client.RUN_DIED and log[2].startswith(RUN_START), log  # the dead run's first line, then
    assert sum("random seed 2: Q(T) =" in line for line in log) == 1, log
    assert out.stat().st_mode & 0o777 == 0o640  # the job's umask
    assert not stale.exists()


SERVER_WITHOUT_PDEATHSIG = """
import os, sys
from cqb.jobs import server, worker
worker._die_with_server = lambda server_pid: os.getppid() == server_pid  # no PR_SET_PDEATHSIG
sys.exit(server.main(sys.argv[1:]))
"""
# The server killed by its worker just after the run's last log line; the worker dies with it.
SERVER_KILLED_AFTER_THE_LAST_LINE = """
import os, signal, sys, time
from cqb.jobs import run_command, server
wrote = run_command._wrote
def wrote_then_kill_the_server(*args):
    wrote(*args)
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(60)
run_command._wrote = wrote_then_kill_the_server
sys.exit(server.main(sys.argv[1:]))
"""


FALLBACK = str(Path(sys.executable).parent / "cqb")  # the compiled client's `cqb run` (start() sets it so)


def _scripted_server(script: str, socket_path: str) -> subprocess.Popen:
    """A server run by ``script`` (python -c) on ``socket_path``, once it is ready."""
    ready_read, ready_write = os.pipe()
    server = subprocess.Popen([sys.executable, "-c", script, "--socket", socket_path, "--ready-fd", str(ready_write)],
                              pass_fds=(ready_write,), env=_environment(), start_new_session=True)
    os.close(ready_write)
    try:
        assert os.read(ready_read, 16) == b"ready\n"
    finally:
        os.close(ready_read)
    return server


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_compiler)],
                         ids=["python client", "compiled client"])
def test_a_run_that_outlives_its_server_is_waited_for_and_not_run_again(tmp_path, compiled):
    """A worker that does not die with its server (PR_SET_PDEATHSIG not set):
    its job does not run again beside it; the worker, still holding the job's
    connection, sends the status itself."""
    server = _scripted_server(SERVER_WITHOUT_PDEATHSIG, str(tmp_path / "socket"))
    try:
        job, lines = _long_job([run_client.CLIENT_BINARY] if compiled else CQB, str(tmp_path / "socket"),
                               tmp_path / "run.npz", {RUN_FALLBACK_VARIABLE: FALLBACK})
        (orphan,) = _children(server.pid)
        server.kill()
        server.wait()
        rest, code = _rest(job)
    finally:
        server.kill()
        server.wait()
    assert _gone(orphan)
    assert code == 0, rest
    assert sum("random seed 2: Q(T) =" in line for line in lines + rest) == 1, lines + rest
    assert "went away" not in "\n".join(rest)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_compiler)],
                         ids=["python client", "compiled client"])
def test_a_server_killed_after_a_runs_last_log_line_leaves_its_job_the_status(tmp_path, compiled):
    """The status reaches the job before the run's last log line: a kill
    after that line is no second run."""
    server = _scripted_server(SERVER_KILLED_AFTER_THE_LAST_LINE, str(tmp_path / "socket"))
    try:
        done = _run(["run", "--policy", "random", "--seed", "1", "--horizon", "50", "--out", str(tmp_path / "run.npz")],
                    server_path=str(tmp_path / "socket"), command=[run_client.CLIENT_BINARY] if compiled else CQB,
                    env_extra={RUN_FALLBACK_VARIABLE: FALLBACK}, timeout=120)
        assert server.wait(60) == -signal.SIGKILL
    finally:
        server.kill()
        server.wait()
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("Q(T) =") == 1 and "went away" not in done.stderr, done.stderr


class FakeServer:
    """One connection at a time on a socket of its own, as the run server
    takes it: the request, and the fds that came with it. ``reply`` is the
    status to send back after `started`, bytes to send in its place, or None
    to close without either (a server gone away)."""

    def __init__(self, folder: Path, reply=None, write=b""):
        self.path = str(folder / "fake.socket")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.reply, self.write, self.requests = reply, write, []
        self.thread = threading.Thread(target=self._serve_one, daemon=True)
        self.thread.start()

    def _serve_one(self):
        self.listener.settimeout(60)
        connection, _ = self.listener.accept()
        with connection:
            message, fds, _, _ = socket.recv_fds(connection, REQUEST_LIMIT, 2)
            try:
                for fd in fds:
                    os.write(fd, self.write)
            finally:  # else the job's pipes stay open here, and its caller waits for their end
                for fd in fds:
                    os.close(fd)
            try:
                self.requests.append((json.loads(message), len(fds)))
            except ValueError:  # what the run server refuses, closing without a reply
                self.requests.append((message, len(fds)))
                return
            if self.reply is not None:
                connection.send(STARTED)
                connection.send(self.reply if isinstance(self.reply, bytes) else EXIT_STATUS.pack(self.reply))

    def close(self):
        self.thread.join(10)
        self.listener.close()
        os.unlink(self.path)


# what an environment and a command line can hold that JSON must escape
AWKWARD = {
    "CQB_QUOTES": 'say "hi" \\ back\\slash',
    "CQB_CONTROL": "line\nbreak\ttab\rreturn\x01\x1f\x7f",
    "CQB_UNICODE": "λ ϵ — 😀 café",
    "CQB_NOT_UTF8": "caf\udce9 \udcff\udce2\udc82",  # the bytes caf\xe9 \xff\xe2\x82, as Python reads them
    "CQB_EMPTY": "",
    "LC_ALL": "C.UTF-8",  # no locale coercion in the Python client: both see the same environment
}
AWKWARD_ARGV = ["run", "--params", '{"name": "a \\"b\\" \\\\ c"}', "--set", "x=line\nnext\ttab λ", "--out",
                "caf\udce9.npz"]


def _requests_of(command, tmp_path, env_extra=None, **fake):
    """What ``command`` sends a server, its exit code and its output."""
    server = FakeServer(tmp_path, **fake)
    env = {key: value for key, value in os.environ.items() if key not in SERVER_VARIABLES}
    env.update(AWKWARD, **{RUN_SERVER_VARIABLE: server.path}, **(env_extra or {}))
    try:
        done = subprocess.run(["/bin/sh", "-c", 'umask 023; exec "$@"', "sh", *command, *AWKWARD_ARGV],
                              cwd=tmp_path, env=env, capture_output=True, timeout=60)
    finally:
        server.close()
    expected = {"argv": AWKWARD_ARGV, "cwd": str(tmp_path), "umask": 0o023}
    return server.requests, expected, env, done


@needs_compiler
def test_the_compiled_client_sends_what_the_python_client_sends(client, tmp_path):
    requests, expected, env, done = _requests_of([client], tmp_path, reply=7, write=b"from the server\n")
    assert done.returncode == 7, done.stderr
    assert done.stdout == done.stderr == b"from the server\n"  # the fds were its own stdout and stderr
    ((request, fds),) = requests
    assert fds == 2
    assert {key: request[key] for key in expected} == expected
    shell_set = {"PWD"}  # by the /bin/sh that starts the client
    assert {key: value for key, value in request["env"].items() if key not in shell_set} == {
        key: value for key, value in env.items() if key not in shell_set}
    ((python_request, _),), _, _, _ = _requests_of(CQB, tmp_path, reply=7)
    assert request == python_request


@needs_compiler
def test_of_a_variable_set_twice_the_compiled_client_sends_the_first_as_python_does(client, tmp_path):
    server = FakeServer(tmp_path, reply=0)
    # an environment a mapping cannot express, so execve from ctypes; getenv and os.environ take the first
    execve = ("import ctypes, sys; libc = ctypes.CDLL(None); strings = lambda items: (ctypes.c_char_p * "
              "(len(items) + 1))(*[item.encode() for item in items], None); "
              "libc.execve(sys.argv[1].encode(), strings([sys.argv[1], 'run']), strings(sys.argv[2:]))")
    try:
        done = subprocess.run([sys.executable, "-c", execve, client, f"{RUN_SERVER_VARIABLE}={server.path}",
                               "CQB_TWICE=first", "CQB_TWICE=second", "=no name"], capture_output=True, timeout=60)
    finally:
        server.close()
    assert done.returncode == 0, done.stderr
    ((request, _),) = server.requests
    assert request["env"] == {RUN_SERVER_VARIABLE: server.path, "CQB_TWICE": "first"}


@needs_compiler
@pytest.mark.parametrize("status", [0, 1, 3, 137, 255])
def test_the_compiled_client_exits_with_the_status_it_is_sent(client, tmp_path, status):
    _, _, _, done = _requests_of([client], tmp_path, reply=status)
    assert done.returncode == status


@needs_compiler
def test_a_compiled_client_whose_server_goes_away_execs_its_fallback_without_the_server(client, tmp_path):
    record = tmp_path / "fallback.txt"
    fallback = tmp_path / "fallback.sh"
    fallback.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                        f"json.dump([sys.argv, os.environ.get({RUN_SERVER_VARIABLE!r})], open({str(record)!r}, 'w'))\n")
    fallback.chmod(0o755)
    requests, _, _, done = _requests_of([client], tmp_path, {RUN_FALLBACK_VARIABLE: str(fallback)}, reply=None)
    assert len(requests) == 1 and done.returncode == 0
    assert done.stderr.decode() == "cqb: the run server went away; running in this process\n"
    # the same command line, and no server: the fallback runs the job itself
    assert json.loads(record.read_text()) == [[str(fallback), *AWKWARD_ARGV], None]


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_compiler)],
                         ids=["python client", "compiled client"])
@pytest.mark.parametrize("status", [b"\x00", b"\x00\x00\x07"], ids=["1 byte", "3 bytes"])
def test_a_status_that_is_not_one_fails_the_job_to_be_rerun_and_runs_nothing(tmp_path, compiled, status):
    """After `started`, a status read that fails other than by the close of
    the connection (here: a message too short to be a status) leaves the run
    possibly going: the job fails with LOST_AFTER_START (EX_TEMPFAIL) and is
    not run here as well (twice at once)."""
    fallback_ran = tmp_path / "fallback-ran"
    fallback = tmp_path / "fallback.sh"
    fallback.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(fallback_ran))}\n")
    fallback.chmod(0o755)
    server = FakeServer(tmp_path, reply=status)
    try:
        done = _run(["run", "--policy", "random", "--seed", "1", "--horizon", "30", "--out", "run.npz"],
                    server_path=server.path, command=[run_client.CLIENT_BINARY] if compiled else CQB,
                    env_extra={RUN_FALLBACK_VARIABLE: str(fallback)}, cwd=tmp_path, timeout=120)
    finally:
        server.close()
    assert len(server.requests) == 1
    assert done.returncode == run_client.LOST_AFTER_START == 75, done.stderr
    assert done.stderr == "cqb: the run server went away during the run; this job fails, to be rerun\n"
    assert not fallback_ran.exists() and not (tmp_path / "run.npz").exists()


@needs_compiler
@pytest.mark.parametrize("variables", [3, 11], ids=["over the socket buffer", "over REQUEST_LIMIT"])
def test_a_request_too_large_to_send_runs_in_its_own_process_quietly(server, client, tmp_path, variables):
    _, socket_path = server
    large = {f"CQB_LARGE_{index}": "x" * 100_000 for index in range(variables)}  # 128 kB at most each (Linux)
    done = _run(["run", "--policy", "random", "--seed", "1", "--horizon", "30", "--out", str(tmp_path / "run.npz")],
                server_path=socket_path, command=[client], env_extra=large)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "run.npz").exists()
    assert done.stderr.startswith("random seed 1: Q(T) =")  # no word of a server


@needs_compiler
def test_a_missing_fallback_is_one_line_and_exit_127(client, tmp_path):
    done = _run(["run", "--policy", "random"], command=[client],
                env_extra={RUN_FALLBACK_VARIABLE: str(tmp_path / "no-cqb")})
    assert done.returncode == 127
    assert done.stderr.splitlines() == [f"cqb: cannot run {tmp_path / 'no-cqb'} (the fallback of the run client): "
                                        "No such file or directory"]


@needs_compiler
def test_the_awkward_environment_reaches_a_real_run(server, client, tmp_path):
    _, socket_path = server
    env = dict(AWKWARD)
    done = _run(["run", "--policy", "random", "--seed", "1", "--horizon", "30", "--out", "caf\udce9.npz"],
                server_path=socket_path, command=[client], env_extra=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "caf\udce9.npz").exists()


def test_a_forked_run_gets_exactly_the_jobs_environment():
    """The child changes only what differs from the server's environment
    (cqb.jobs.worker._use_environment); what it ends with is the job's, at the C
    level too (what a subprocess of the run inherits)."""
    script = ("import json, os, subprocess, sys; from cqb.jobs.worker import _use_environment; "
              "os.environ.update(CQB_ONLY_SERVER='1', CQB_BOTH='server'); _use_environment(json.loads(sys.argv[1])); "
              "inherited = os.fsdecode(subprocess.run(['env', '-0'], capture_output=True).stdout); "
              "print(json.dumps([dict(os.environ), dict(line.split('=', 1) for line in inherited.split('\\0') if line)]))")
    job = {key: value for key, value in os.environ.items() if key not in SERVER_VARIABLES}
    job.update(CQB_BOTH="job", CQB_ONLY_JOB="x", **AWKWARD)
    done = subprocess.run([sys.executable, "-c", script, json.dumps({**job, RUN_SERVER_VARIABLE: "/a/socket"})],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    python_level, c_level = json.loads(done.stdout)
    assert python_level == c_level == job


def _job_prefix() -> str:
    """The simulate rule's choice of client, from the rule itself (Snakemake's {{ }} unescaped)."""
    text = (REPO / "workflow" / "rules" / "simulate.smk").read_text()
    (prefix,) = re.findall(r"'(cqb_job\(\) .*?; )'", text)
    return prefix.replace("{{", "{").replace("}}", "}")


REPO = Path(__file__).resolve().parent.parent
WORKFLOW_JOB = _job_prefix() + 'cqb_job run --policy random --seed 1 --horizon 50 --out "$1" 2> "$2"'
# The job line as Snakemake runs it: in /bin/sh (execution.simulate_in_sh), or
# in bash with Snakemake's strict-mode prefix.
JOB_SHELLS = {"sh": ["/bin/sh", "-c", WORKFLOW_JOB], "bash": ["bash", "-c", "set -euo pipefail; " + WORKFLOW_JOB]}


@pytest.mark.parametrize("shell", sorted(JOB_SHELLS))
@pytest.mark.parametrize("client_file", ["unset", "missing", "not executable"])
def test_without_a_compiled_client_workflow_jobs_use_cqb_run(server, tmp_path, client_file, shell):
    """Whatever became of the client (never built, deleted, its folder gone),
    the job line runs `cqb run`, which the server still takes."""
    _, socket_path = server
    extra = {}
    if client_file != "unset":
        extra[RUN_CLIENT_VARIABLE] = str(tmp_path / "client")
        if client_file == "not executable":
            (tmp_path / "client").write_text("#!/bin/sh\nexit 99\n")
    env = _environment(socket_path, extra)
    env.pop(RUN_CLIENT_VARIABLE, None) if client_file == "unset" else None
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    done = subprocess.run([*JOB_SHELLS[shell], "job", str(tmp_path / "run.npz"), str(tmp_path / "log")],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, (tmp_path / "log").read_text()
    assert (tmp_path / "run.npz").exists()
    assert "random seed 1: Q(T) =" in (tmp_path / "log").read_text()


@needs_compiler
@pytest.mark.parametrize("shell", sorted(JOB_SHELLS))
def test_the_workflow_job_line_runs_the_compiled_client(server, client, tmp_path, shell):
    _, socket_path = server
    probe = tmp_path / "probe"
    probe.write_text(f'#!/bin/sh\necho compiled client > {tmp_path / "used"}\nexec {client} "$@"\n')
    probe.chmod(0o755)
    env = _environment(socket_path, {RUN_CLIENT_VARIABLE: str(probe)})
    done = subprocess.run([*JOB_SHELLS[shell], "job", str(tmp_path / "run.npz"), str(tmp_path / "log")],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, (tmp_path / "log").read_text()
    assert (tmp_path / "used").exists() and (tmp_path / "run.npz").exists()


@needs_compiler
def test_a_client_built_from_another_source_is_not_used(tmp_path):
    assert run_client.current_client() == run_client.CLIENT_BINARY  # built from today's client.c
    stale = tmp_path / "job-client"
    stale.write_text("#!/bin/sh\necho 0123abcd\n")
    stale.chmod(0o755)
    assert run_client.current_client(str(stale)) is None
    assert run_client.current_client(str(tmp_path / "missing")) is None


def test_the_server_stops_when_the_process_that_started_it_is_gone(tmp_path):
    script = ("import os, sys, time; from cqb.jobs import client; server = client.start(); "
              "print(server.pid, os.environ['CQB_RUN_SERVER'], flush=True); os._exit(0)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    pid, socket_path = done.stdout.split()
    folder = os.path.dirname(socket_path)
    deadline = time.monotonic() + 10
    while os.path.exists(folder) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(folder), f"left: {os.listdir(folder)}"  # the socket, the client, the folder
    with pytest.raises(ProcessLookupError):
        for _ in range(100):  # reaped by init once it exits
            os.kill(int(pid), 0)
            time.sleep(0.05)


def test_a_forked_run_imports_no_compiled_module(tmp_path):
    """After the server's preload a run, its trace drawn or read from the
    cache, loads no extension module: none of their imports (numpy.random's
    nine take ~18 ms) is paid per job, and no Ctrl-C can land in one
    (cqb.jobs.run_command.load_compiled_modules)."""
    code = f"""
import json, sys
from cqb.jobs.worker import preload
preload()
before = set(sys.modules)
from cqb.cli import main
for _ in range(2):  # the trace drawn and written, then read
    assert main(["run", "--policy", "cqb_opt", "--seed", "1", "--horizon", "300",
                 "--trace-cache", {str(tmp_path / 'trace.npz')!r}, "--out", {str(tmp_path / 'run.npz')!r}]) == 0
loaded = [name for name in set(sys.modules) - before
          if str(getattr(sys.modules[name], "__file__", None) or "").endswith((".so", ".pyd"))]
print(json.dumps(sorted(loaded)))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
