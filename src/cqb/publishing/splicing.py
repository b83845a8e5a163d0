"""Generated blocks: the text between a block's two markers in the README or a
docs page, read and replaced (``cqb publish``); no number there is typed by hand."""

from __future__ import annotations

import re
from pathlib import Path

from ..io.files import atomic_write_text

BEGIN = "<!-- generated:{name} begin (cqb publish; do not edit) -->"
END = "<!-- generated:{name} end -->"


def splice(text: str, name: str, block: str) -> str:
    """Replace the generated block ``name`` of ``text`` (between its markers)."""
    begin, end = BEGIN.format(name=name), END.format(name=name)
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), flags=re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"no generated block {name!r} (markers {begin!r} … {end!r})")
    return pattern.sub(lambda _: f"{begin}\n{block.rstrip()}\n{end}", text, count=1)


def generated_block(text: str, name: str) -> str:
    begin, end = BEGIN.format(name=name), END.format(name=name)
    start = text.index(begin) + len(begin)
    return text[start:text.index(end, start)].strip("\n")


def splice_page(page: Path, block: str, text: str) -> list[str]:
    """Replace the block ``block`` of ``page`` where the page has it: [its path], else []."""
    if not page.exists() or BEGIN.format(name=block) not in page.read_text():
        return []
    atomic_write_text(page, splice(page.read_text(), block, text))
    return [str(page)]
