"""Atomic outputs: a binary or pandas output through :func:`atomic_write`
(a context manager giving the temporary path), a generated text output
(Markdown, JSON, HTML) through :func:`atomic_write_text`, the temporaries
that killed writes left (:func:`sweep_stale_temporaries`), a stopped job's
output with them (:func:`remove_partial_output`); and a file's
checksum (:func:`file_digest`), for the data's downloads and the results'
provenance alike."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..sim.runfile import atomic_write


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, UTF-8."""
    with atomic_write(path) as temporary:
        Path(temporary).write_text(text, encoding="utf-8")


def sweep_stale_temporaries(root: str | Path) -> int:
    """Remove every temporary file that an atomic write killed mid-write left
    under ``root`` (hidden ``.NAME.*.tmp`` files: :func:`atomic_write`'s
    names); the number removed. Only while no writer runs there: a running
    write's temporary has the same name."""
    removed = 0
    for folder, _, names in os.walk(root):
        for name in names:
            if name.startswith(".") and name.endswith(".tmp"):
                try:
                    os.unlink(os.path.join(folder, name))
                except FileNotFoundError:
                    continue
                removed += 1
    return removed


def remove_partial_output(path: str | Path) -> None:
    """Remove ``path`` and the temporaries of atomic writes to it (a job
    stopped before Snakemake saw it end: its output may be complete, but no
    record says so)."""
    path = Path(path)
    try:
        names = os.listdir(path.parent)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in names:
        if name == path.name or (name.startswith(f".{path.name}.") and name.endswith(".tmp")):
            try:
                os.unlink(path.parent / name)
            except (FileNotFoundError, IsADirectoryError):
                pass


CHUNK_BYTES = 1 << 20


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in chunks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()
