"""Which requests the run server takes (docs/jobs.md, "What the server
checks"): a run request's shape, the job's user, and the environment a fork
of the server cannot give a job.
"""

from __future__ import annotations

import os
import socket
import struct

from .client import RUN_CLIENT_VARIABLE, RUN_FALLBACK_VARIABLE, RUN_SERVER_VARIABLE
from .run_command import BLAS_THREAD_VARIABLES

_PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
# Read by the interpreter, the dynamic loader, the C library or a numeric
# library when a process starts (or imports numpy): a fork of the server
# cannot take the job's value. The BLAS thread counts are not here: `cqb run`
# sets them itself (cqb.jobs.run_command.pin_blas_to_one_thread), in-process as in a fork.
FIXED_AT_START_PREFIXES = ("PYTHON", "LD_", "LC_", "MALLOC_", "GLIBC_", "NPY_", "NUMPY_")
FIXED_AT_START_NAMES = ("LANG", "LANGUAGE", "VIRTUAL_ENV", "CONDA_PREFIX", "VECLIB_MAXIMUM_THREADS")
RUNTIME_VARIABLES = (RUN_SERVER_VARIABLE, RUN_CLIENT_VARIABLE, RUN_FALLBACK_VARIABLE)


def fixed_at_start(name: str) -> bool:
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

