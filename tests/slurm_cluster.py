"""Start and stop a throwaway single-node Slurm cluster on this machine.

Used by ``tests/test_workflow_slurm.py``; also runnable by hand::

    python tests/slurm_cluster.py            # starts, prints the env to use, waits for Ctrl-C

Everything the cluster needs lives in one temporary directory (config, munge
key and socket, state, spool, logs): the system's ``/etc/slurm`` and
``/etc/munge`` and any system daemons are never read, written or signalled.
Daemons run in the foreground (``munged -F``, ``slurmctld -D``, ``slurmd -D``)
as children of this process, so their pids are exact; :meth:`SlurmCluster.stop`
signals only those pids (SIGTERM, wait, SIGKILL).

Clients find the cluster through ``SLURM_CONF`` (see :attr:`SlurmCluster.env`).
Because the Snakemake slurm-jobstep executor strips every ``SLURM_*`` variable
before it calls ``srun`` inside a job, the cluster also puts a ``bin/``
directory first on ``PATH`` whose wrappers (``srun``, ``sbatch``, ``squeue``,
...) set ``SLURM_CONF`` when it is missing and exec the real command.

Needs root (slurmd and ``SlurmUser=root``) and the Debian packages
slurmctld, slurmd, slurm-client and munge (``.ci/install-slurm.sh``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

REPO_ROOT = Path(__file__).resolve().parent.parent
INSTALL_SCRIPT = REPO_ROOT / ".ci" / "install-slurm.sh"

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = (
    "srun",
    "sbatch",
    "squeue",
    "sinfo",
    "scancel",
    "scontrol",
    "sacct",
    "sacctmgr",
    "sshare",
    "salloc",
)
SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")


class SlurmUnavailable(RuntimeError):
    """Slurm or munge binaries are missing and could not be installed."""


class SlurmStartError(RuntimeError):
    """The cluster did not come up; the message carries the daemons' logs."""


def find_binary(name: str) -> str | None:
    """Path of ``name`` on PATH or in the usual sbin directories."""
    found = shutil.which(name)
    if found:
        return found
    for d in SBIN_DIRS:
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def missing_binaries() -> list[str]:
    needed = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel", "srun")
    return [b for b in needed if find_binary(b) is None]


def ensure_slurm_installed(install: bool = True) -> None:
    """Make sure the binaries exist; else run .ci/install-slurm.sh as root.

    Raises :class:`SlurmUnavailable` with a reason when Slurm cannot be had.
    """
    missing = missing_binaries()
    if not missing:
        return
    if not install:
        raise SlurmUnavailable(f"Slurm binaries missing: {', '.join(missing)}")
    if os.geteuid() != 0:
        raise SlurmUnavailable(
            f"Slurm binaries missing ({', '.join(missing)}) and not running as "
            f"root, so {INSTALL_SCRIPT.relative_to(REPO_ROOT)} cannot install them"
        )
    if not INSTALL_SCRIPT.is_file():
        raise SlurmUnavailable(f"Slurm binaries missing and {INSTALL_SCRIPT} not found")
    proc = subprocess.run(
        ["bash", str(INSTALL_SCRIPT)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise SlurmUnavailable(
            f"{INSTALL_SCRIPT.name} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}"
        )
    missing = missing_binaries()
    if missing:
        raise SlurmUnavailable(
            f"after {INSTALL_SCRIPT.name}, still missing: {', '.join(missing)}"
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _short_hostname() -> str:
    try:
        out = subprocess.run(
            ["hostname", "-s"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if out:
            return out
    except (OSError, subprocess.CalledProcessError):
        pass
    return socket.gethostname().split(".")[0]


def _mem_total_mb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise RuntimeError("MemTotal not found in /proc/meminfo")


def _node_hardware(slurmd: str) -> dict[str, int]:
    """CPUs, topology and RealMemory of this node (a bit under the real memory)."""
    hw: dict[str, int] = {}
    try:
        out = subprocess.run(
            [slurmd, "-C"], capture_output=True, text=True, timeout=30
        ).stdout
        for key in ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory"):
            m = re.search(rf"\b{key}=(\d+)", out)
            if m:
                hw[key] = int(m.group(1))
    except (OSError, subprocess.TimeoutExpired):
        pass
    cpus = os.cpu_count() or 1
    if hw.get("CPUs") != cpus or not all(
        k in hw for k in ("Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore")
    ):
        # topology unknown or inconsistent with what we can use: keep it flat
        hw = {"CPUs": cpus, "RealMemory": hw.get("RealMemory", 0)}
    real = hw.get("RealMemory") or _mem_total_mb()
    # leave headroom for the OS and the daemons: 10 %, at least 512 MB
    hw["RealMemory"] = max(256, min(int(real * 0.9), real - 512))
    return hw


class SlurmCluster:
    """A single-node Slurm cluster living in a private temporary directory.

    Use as a context manager (``with SlurmCluster() as c: ...``) or call
    :meth:`start` / :meth:`stop`. While it runs, pass :attr:`env` to every
    process that talks to it (sbatch, squeue, snakemake with the slurm executor).
    """

    def __init__(
        self,
        base_dir: str | os.PathLike | None = None,
        *,
        partition: str = "debug",
        cluster_name: str = "cqbtest",
        start_timeout: float = 60.0,
        keep_dir: bool | None = None,
        install: bool = True,
    ) -> None:
        self.partition = partition
        self.cluster_name = cluster_name
        self.start_timeout = start_timeout
        self.install = install
        self._given_base = Path(base_dir) if base_dir is not None else None
        if keep_dir is None:
            keep_dir = os.environ.get("CQB_SLURM_KEEP", "") not in ("", "0")
        self.keep_dir = keep_dir
        self.root: Path | None = None
        self.hostname = _short_hostname()
        self.procs: dict[str, subprocess.Popen] = {}
        self._logs: dict[str, object] = {}
        self.env: dict[str, str] = {}

    # ------------------------------------------------------------------ paths
    @property
    def conf(self) -> Path:
        assert self.root is not None
        return self.root / "slurm.conf"

    @property
    def bin_dir(self) -> Path:
        assert self.root is not None
        return self.root / "bin"

    @property
    def log_dir(self) -> Path:
        assert self.root is not None
        return self.root / "log"

    @property
    def munge_socket(self) -> Path:
        assert self.root is not None
        return self.root / "munge" / "munge.socket"

    @property
    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.procs.items()}

    # --------------------------------------------------------------- start-up
    def start(self) -> "SlurmCluster":
        if os.geteuid() != 0:
            raise SlurmUnavailable("a local slurmd needs root (SlurmUser=root)")
        ensure_slurm_installed(self.install)
        if self._given_base is not None:
            self._given_base.mkdir(parents=True, exist_ok=True)
            self.root = Path(tempfile.mkdtemp(prefix="slurm-", dir=self._given_base))
        else:
            # short path: the munge socket path must stay under ~100 chars
            self.root = Path(tempfile.mkdtemp(prefix="cqb-slurm-"))
        # munged insists every directory above its socket is world-executable
        self.root.chmod(0o755)
        for sub in ("munge", "state", "spool", "log", "bin"):
            (self.root / sub).mkdir(mode=0o755)
        (self.root / "munge").chmod(0o755)
        try:
            self._write_munge_key()
            self._write_conf()
            self._write_client_wrappers()
            self._start_daemon(
                "munged",
                [
                    find_binary("munged"),
                    "-F",
                    f"--key-file={self.root / 'munge' / 'munge.key'}",
                    f"--socket={self.munge_socket}",
                    f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                    f"--log-file={self.log_dir / 'munged.log'}",
                    f"--seed-file={self.root / 'munge' / 'munged.seed'}",
                ],
            )
            self._wait_for(lambda: self.munge_socket.exists(), "munged socket", 20)
            self._start_daemon(
                "slurmctld", [find_binary("slurmctld"), "-D", "-c", "-f", str(self.conf)]
            )
            self._wait_for(self._ctld_responds, "slurmctld to answer", self.start_timeout)
            self._start_daemon(
                "slurmd",
                [find_binary("slurmd"), "-D", "-f", str(self.conf), "-N", self.hostname],
            )
            self._wait_for(self.node_idle, f"node {self.hostname} idle in sinfo", self.start_timeout)
        except BaseException as exc:
            diag = self.diagnostics()
            self.stop(remove_dir=False)
            if isinstance(exc, (SlurmUnavailable, KeyboardInterrupt)):
                raise
            raise SlurmStartError(
                f"single-node Slurm did not start: {exc}\n"
                f"(files kept in {self.root})\n{diag}"
            ) from exc
        return self

    def _write_munge_key(self) -> None:
        key = self.root / "munge" / "munge.key"
        if key.exists():
            return
        mungekey = find_binary("mungekey")
        if mungekey:
            subprocess.run(
                [mungekey, "--create", f"--keyfile={key}", "--bits=1024"],
                check=True,
                capture_output=True,
            )
        else:  # munge < 0.5.14 has no mungekey: 1024 random bytes do the same
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(1024))
        key.chmod(0o400)

    def _write_conf(self) -> None:
        hw = _node_hardware(find_binary("slurmd"))
        self.ctld_port = _free_port()
        self.slurmd_port = _free_port()
        while self.slurmd_port == self.ctld_port:
            self.slurmd_port = _free_port()
        node_hw = " ".join(f"{k}={v}" for k, v in hw.items())
        r = self.root
        plugstack = r / "plugstack.conf"
        plugstack.write_text("")
        text = f"""\
# generated by tests/slurm_cluster.py -- throwaway single-node cluster
ClusterName={self.cluster_name}
SlurmctldHost={self.hostname}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={r / 'state'}
SlurmdSpoolDir={r / 'spool'}
SlurmctldPidFile={r / 'slurmctld.pid'}
SlurmdPidFile={r / 'slurmd.pid'}
SlurmctldLogFile={self.log_dir / 'slurmctld.log'}
SlurmdLogFile={self.log_dir / 'slurmd.log'}
PlugStackConfig={plugstack}
MailProg=/bin/true
# no cgroups in a container/VM sandbox
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
ReturnToService=2
# finished jobs stay visible to squeue for 5 min: the snakemake plugin's
# squeue status mode needs MinJobAge >= 3 x its first status-check delay
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
NodeName={self.hostname} NodeAddr=127.0.0.1 {node_hw} State=UNKNOWN
PartitionName={self.partition} Nodes={self.hostname} Default=YES MaxTime=INFINITE State=UP
"""
        self.conf.write_text(text)
        self.env = dict(os.environ)
        self.env["SLURM_CONF"] = str(self.conf)
        self.env["PATH"] = f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        # never inherit an outer allocation's identity
        for var in list(self.env):
            if var.startswith(("SLURM_JOB", "SLURM_STEP", "SLURM_ARRAY")):
                del self.env[var]

    def _write_client_wrappers(self) -> None:
        """bin/<client>: set SLURM_CONF if unset, exec the real client.

        The slurm-jobstep executor drops all SLURM_* variables before its
        ``srun`` call inside a job; PATH survives, so the wrapper restores
        the config location.
        """
        for name in CLIENTS:
            real = find_binary(name)
            if real is None:
                continue
            w = self.bin_dir / name
            w.write_text(
                "#!/bin/sh\n"
                f": \"${{SLURM_CONF:={self.conf}}}\"\n"
                "export SLURM_CONF\n"
                f"exec {real} \"$@\"\n"
            )
            w.chmod(0o755)

    def _start_daemon(self, name: str, argv: list[str]) -> None:
        log = open(self.log_dir / f"{name}.out", "ab")
        self._logs[name] = log
        self.procs[name] = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.root,
            start_new_session=True,  # a Ctrl-C in the terminal is ours to relay
        )

    def _wait_for(self, predicate, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise SlurmStartError(f"{name} exited with {p.returncode} while waiting for {what}")
            try:
                if predicate():
                    return
            except (OSError, subprocess.SubprocessError):
                pass
            time.sleep(0.5)
        raise SlurmStartError(f"timed out after {timeout:.0f}s waiting for {what}")

    def _ctld_responds(self) -> bool:
        return self.run(["scontrol", "ping"], check=False, timeout=10).returncode == 0

    def node_state(self) -> str:
        out = self.run(
            ["sinfo", "-h", "-N", "-n", self.hostname, "-o", "%t"], check=False, timeout=10
        )
        return out.stdout.strip() if out.returncode == 0 else ""

    def node_idle(self) -> bool:
        return self.node_state() == "idle"

    # ------------------------------------------------------------- utilities
    def run(self, argv: list[str], *, check: bool = True, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        """Run a client command against this cluster (text output captured)."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(argv, env=self.env, check=check, timeout=timeout, **kw)

    def jobs(self) -> dict[str, str]:
        """{job id: state} of every job slurmctld still remembers (MinJobAge)."""
        out = self.run(["squeue", "--states=all", "-h", "-o", "%i|%T"], check=False)
        res = {}
        for line in out.stdout.splitlines():
            if "|" in line:
                jid, state = line.split("|", 1)
                res[jid.strip()] = state.strip()
        return res

    def job_names(self) -> dict[str, str]:
        """{job id: job name} of the jobs slurmctld still remembers."""
        out = self.run(["squeue", "--states=all", "-h", "-o", "%i|%j"], check=False)
        return dict(line.split("|", 1) for line in out.stdout.splitlines() if "|" in line)

    def wait_job(self, job_id: str, timeout: float = 60) -> str:
        """Wait until the job leaves PENDING/RUNNING/COMPLETING; return its state."""
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.jobs().get(str(job_id), "")
            if state and state not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING"):
                return state
            time.sleep(0.5)
        raise TimeoutError(f"job {job_id} still {state or 'unknown'} after {timeout}s")

    def diagnostics(self, tail: int = 40) -> str:
        if self.root is None or not self.log_dir.exists():
            return ""
        parts = []
        for f in sorted(self.log_dir.iterdir()):
            try:
                lines = f.read_text(errors="replace").splitlines()[-tail:]
            except OSError:
                continue
            parts.append(f"--- {f.name} (last {len(lines)} lines)\n" + "\n".join(lines))
        return "\n".join(parts)

    # --------------------------------------------------------------- shutdown
    def _cancel_all_jobs(self, timeout: float = 20) -> None:
        """Cancel whatever still runs, so slurmd's step daemons exit too."""
        if "slurmctld" not in self.procs or self.procs["slurmctld"].poll() is not None:
            return
        try:
            active = [j for j, s in self.jobs().items() if s in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED")]
            if not active:
                return
            self.run(["scancel", *active], check=False, timeout=20)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if not any(s in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING") for s in self.jobs().values()):
                    return
                time.sleep(0.5)
        except (OSError, subprocess.SubprocessError):
            pass

    def stop(self, remove_dir: bool | None = None) -> None:
        """Stop the daemons this object started (by pid), newest first."""
        self._cancel_all_jobs()
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.get(name)
            if p is None:
                continue
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
                except ProcessLookupError:
                    pass
            log = self._logs.pop(name, None)
            if log is not None:
                log.close()
        self.procs.clear()
        if remove_dir is None:
            remove_dir = not self.keep_dir
        if remove_dir and self.root is not None and self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "SlurmCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def slurm_cluster(**kwargs) -> Iterator[SlurmCluster]:
    """``with slurm_cluster() as c:`` -- a started cluster, stopped on exit."""
    cluster = SlurmCluster(**kwargs)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs) after stopping")
    args = ap.parse_args(argv)
    cluster = SlurmCluster(keep_dir=args.keep)
    cluster.start()
    stop = {"flag": False}

    def _handler(signum, frame):
        stop["flag"] = True

    signal.signal(signal.SIGINT, _handler)
    signal.signal(signal.SIGTERM, _handler)
    print(f"Slurm is up: node {cluster.hostname}, partition {cluster.partition}, pids {cluster.pids}")
    print("In another shell:")
    print(f"  export SLURM_CONF={cluster.conf}")
    print(f"  export PATH={cluster.bin_dir}:$PATH")
    print("Ctrl-C (or SIGTERM) stops it.", flush=True)
    try:
        while not stop["flag"]:
            time.sleep(0.5)
    finally:
        cluster.stop()
        print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
