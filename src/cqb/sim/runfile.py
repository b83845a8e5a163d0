"""Run files: one compressed ``.npz`` per (instance, policy, seed), written atomically."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from .code_hash import simulation_code_hash

RUN_KEYS = ("queue", "oracle_queue", "gap", "explored")


def current_umask() -> int:
    """The process umask (reading it means setting it, so it is set straight back)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path, suffix: str = ".tmp"):
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if
    the block finishes, so an interrupted write leaves no partial file (and a
    hard kill leaves at most a hidden ``.tmp`` file, never a partial output).

    The file gets the mode a plain ``open(path, "w")`` would give it (0666
    minus the umask): mkstemp creates it 0600, which would hide every output
    from collaborators sharing the results folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    try:
        try:
            os.fchmod(handle, 0o666 & ~current_umask())
        finally:
            os.close(handle)
        yield Path(temporary)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


# zlib level of run files: 1 writes a run file in 0.9 ms against numpy's 2.4 ms
# (level 6) for 14 % more bytes (docs/benchmarks.md, "Files on disk")
RUN_FILE_LEVEL = 1


def write_npz(path, arrays: dict, level: int | None) -> None:
    """An ``.npz`` archive of ``arrays`` (no pickle) written atomically at ``path``,
    as numpy.savez writes one: deflated at zlib ``level``, or stored for None."""
    compression = zipfile.ZIP_STORED if level is None else zipfile.ZIP_DEFLATED
    with atomic_write(path) as temporary, open(temporary, "wb") as handle, \
            zipfile.ZipFile(handle, mode="w", compression=compression, compresslevel=level,
                            allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def save_run(path, result) -> None:
    metadata = dict(result.metadata, code_hash=simulation_code_hash())
    write_npz(path, {
        "queue": result.queue.astype(np.int64),
        "oracle_queue": result.oracle_queue.astype(np.int64),
        "gap": result.gap.astype(np.float64),
        "explored": result.explored.astype(bool),
        "metadata": np.array(json.dumps(metadata, sort_keys=True)),
    }, RUN_FILE_LEVEL)


def load_run(path) -> dict:
    """The arrays of a run file plus its ``metadata`` as a dict."""
    with np.load(path, allow_pickle=False) as data:
        missing = set(RUN_KEYS + ("metadata",)) - set(data.files)
        if missing:
            raise ValueError(f"run file {path} lacks {sorted(missing)}")
        run = {key: data[key] for key in RUN_KEYS}
        run["metadata"] = json.loads(str(data["metadata"]))
    return run
