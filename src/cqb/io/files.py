"""Atomic outputs: a binary or pandas output through :func:`atomic_write`
(a context manager giving the temporary path), a generated text output
(Markdown, JSON, HTML) through :func:`atomic_write_text`."""

from __future__ import annotations

from pathlib import Path

from ..sim.runfile import atomic_write  # noqa: F401 (re-exported: the one home of output writing)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, UTF-8."""
    with atomic_write(path) as temporary:
        Path(temporary).write_text(text, encoding="utf-8")
