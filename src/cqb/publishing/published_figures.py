"""The published figures: the report page and the PNGs it shows, each
shrunk to at most PUBLISHED_PNG_BYTES so that the README can show them
inline (``cqb publish``, :mod:`cqb.publishing.published_results`)."""

from __future__ import annotations

import re
from pathlib import Path

from ..sim.runfile import atomic_write
from ..io.files import atomic_write_text

PUBLISHED_PNG_BYTES = 200_000  # each published figure: small enough to show inline in the README


def publish_report(source: Path, destination: Path) -> list[str]:
    """The report page and the figures it shows, each PNG shrunk to at most
    PUBLISHED_PNG_BYTES (fewer pixels, then a 256-colour palette: the
    figures are line plots) so that the README can show them inline."""
    page = (source / "report.html").read_text()
    written = [str(destination / "report.html")]
    for name in dict.fromkeys(re.findall(r'src="([\w.-]+\.png)"', page)):
        shrink_png(source / name, destination / name)
        written.append(str(destination / name))
    atomic_write_text(destination / "report.html", page)
    return written


def shrink_png(source: Path, destination: Path, limit: int = PUBLISHED_PNG_BYTES) -> None:
    import io

    from PIL import Image

    image = Image.open(source).convert("RGB")
    width = min(image.width, 1600)
    while True:
        scaled = image.resize((width, round(image.height * width / image.width)), Image.LANCZOS)
        buffer = io.BytesIO()
        scaled.quantize(colors=256).save(buffer, format="PNG", optimize=True)
        if buffer.tell() <= limit or width <= 400:
            break
        width = int(width * 0.85)
    if buffer.tell() > limit:
        raise ValueError(f"{source}: cannot shrink it below {limit} bytes")
    destination.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(destination) as temporary:
        Path(temporary).write_bytes(buffer.getvalue())
