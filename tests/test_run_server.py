"""The run server (cqb.run_server): jobs forked from one preloaded process
write the same run files as jobs that start their own Python, pass on exit
codes and messages, die with their job, and fall back when no server answers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cqb import run_client as run_server
from cqb.run_client import RUN_SERVER_VARIABLE

pytestmark = pytest.mark.skipif(not (hasattr(__import__("socket"), "send_fds") and Path("/proc/self/stat").exists()),
                                reason="the run server's tests need socket.send_fds and /proc")

CQB = [sys.executable, "-m", "cqb.cli"]
LOOP_START = "cqb: loop start"


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


@pytest.fixture(scope="module")
def server():
    started = run_server.start()
    assert started is not None, "the run server did not start"
    socket_path = os.environ[RUN_SERVER_VARIABLE]
    yield started, socket_path
    started.stop()
    assert started.poll() is not None
    assert not os.path.exists(socket_path)


def _run(args, env_extra=None, server_path=None, **kwargs):
    env = {key: value for key, value in os.environ.items() if key != RUN_SERVER_VARIABLE}
    if server_path:
        env[RUN_SERVER_VARIABLE] = server_path
    env.update(env_extra or {})
    return subprocess.run([*CQB, *args], env=env, capture_output=True, text=True, **kwargs)


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
    # the job's own stderr gets the child's report
    assert f"{policy} seed 3: Q(T) =" in forked.stderr


def test_a_forked_job_runs_in_its_own_folder_with_its_own_umask(server, tmp_path):
    _, socket_path = server
    folder = tmp_path / "job"
    folder.mkdir()
    env = {key: value for key, value in os.environ.items() if key != RUN_SERVER_VARIABLE}
    env[RUN_SERVER_VARIABLE] = socket_path
    done = subprocess.run(["/bin/sh", "-c", f"umask 027; exec {' '.join(CQB)} run --policy random --seed 1 "
                                            "--horizon 50 --out rel.npz"],
                          cwd=folder, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (folder / "rel.npz").stat().st_mode & 0o777 == 0o640


def test_bad_input_through_the_server_is_one_line_and_exit_2(server, tmp_path):
    _, socket_path = server
    done = _run(["run", "--policy", "no_such_policy", "--seed", "1", "--out", str(tmp_path / "x.npz")],
                server_path=socket_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "unknown policy 'no_such_policy'" in done.stderr
    usage = _run(["run", "--seed", "1", "--out", str(tmp_path / "x.npz")], server_path=socket_path)
    assert usage.returncode == 2 and "--policy" in usage.stderr


def test_a_killed_job_takes_its_forked_run_with_it(server, tmp_path):
    started, socket_path = server
    out = tmp_path / "killed.npz"
    env = {key: value for key, value in os.environ.items() if key != RUN_SERVER_VARIABLE}
    env.update({RUN_SERVER_VARIABLE: socket_path, "CQB_REPORT_LOOP_START": "1"})
    # long by construction: a million rounds (seconds) cannot end between the loop start and the kill
    job = subprocess.Popen([*CQB, "run", "--policy", "random", "--seed", "1", "--horizon", "1000000",
                            "--dim", "2", "--slack", "0.01", "--out", str(out)],
                           env=env, stderr=subprocess.PIPE, text=True)
    for line in job.stderr:
        if line.startswith(LOOP_START):
            break
    assert _children(started.pid), "the run is not a child of the server"
    job.send_signal(signal.SIGKILL)
    job.wait()
    job.stderr.close()
    deadline = time.monotonic() + 30
    while _children(started.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _children(started.pid), "the forked run outlived its job"
    assert job.returncode == -signal.SIGKILL
    assert not out.exists()
    assert not list(tmp_path.glob(".killed.npz.*"))


def test_without_a_server_the_job_runs_in_its_own_process(tmp_path):
    out = tmp_path / "own.npz"
    done = _run(["run", "--policy", "random", "--seed", "1", "--horizon", "50", "--out", str(out)],
                server_path=str(tmp_path / "no-such-socket"))
    assert done.returncode == 0, done.stderr
    assert out.exists()


def test_the_server_stops_when_the_process_that_started_it_is_gone(tmp_path):
    script = ("import os, sys, time; from cqb import run_client; server = run_client.start(); "
              "print(server.pid, os.environ['CQB_RUN_SERVER'], flush=True); os._exit(0)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    pid, socket_path = done.stdout.split()
    deadline = time.monotonic() + 10
    while os.path.exists(socket_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(socket_path)
    with pytest.raises(ProcessLookupError):
        for _ in range(100):  # reaped by init once it exits
            os.kill(int(pid), 0)
            time.sleep(0.05)
