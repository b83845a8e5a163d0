"""Snakemake script: fetch the files of one dataset (mirror copy or download), SHA-256 checked.

params.files: config entries (name, url, sha256, mirror), in the order of output.
params.mirror: mirror folder ("" for none); used only when it exists.
"""

import logging
import sys
import time
from pathlib import Path

try:
    import cqb.data  # noqa: F401
except ImportError:  # env without the package installed: use the repo's src/
    sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from cqb.data import fetch_file, mirror_file_path

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
started = time.perf_counter()
mirror = snakemake.params.mirror or None
for entry, dest in zip(snakemake.params.files, snakemake.output, strict=True):
    source = mirror_file_path(mirror, entry.get("mirror", entry["name"]))
    from_mirror = source is not None and source.is_file()
    logging.info("fetch %s from %s", dest, source if from_mirror else entry["url"])
    fetch_file(entry["url"], dest, entry["sha256"], mirror_path=source if from_mirror else None)
    logging.info("ok %s sha256=%s", dest, entry["sha256"])
logging.info("done in %.2f s", time.perf_counter() - started)
