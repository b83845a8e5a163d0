"""CITATION.cff's version, kept the package's by ``cqb publish``."""

from __future__ import annotations

import re
from pathlib import Path

from ..io.files import atomic_write_text

def sync_citation_version(citation: Path, version: str) -> list[str]:
    """CITATION.cff's `version` set to the package's; [its path] if it changed."""
    if not citation.exists():
        return []
    text = citation.read_text()
    updated = re.sub(r'(?m)^version: .*$', f'version: "{version}"', text, count=1)
    if updated == text:
        return []
    atomic_write_text(citation, updated)
    return [str(citation)]
