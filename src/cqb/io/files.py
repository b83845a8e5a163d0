"""Atomic outputs: a binary or pandas output through :func:`atomic_write`
(a context manager giving the temporary path), a generated text output
(Markdown, JSON, HTML) through :func:`atomic_write_text`; and a file's
checksum (:func:`file_digest`), for the data's downloads and the results'
provenance alike."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..sim.runfile import atomic_write  # noqa: F401 (re-exported: the one home of output writing)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, UTF-8."""
    with atomic_write(path) as temporary:
        Path(temporary).write_text(text, encoding="utf-8")


CHUNK_BYTES = 1 << 20


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in chunks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()
