"""Snakemake script: fetch dataset files (mirror copy or download), SHA-256 checked.

params.files: config entries (name, url, sha256, mirror), in the order of output.
params.mirror: mirror folder ("" for none); used only when it exists.
A failed fetch ends in one line naming the file (no traceback) and leaves nothing behind.
"""

import logging
import sys
import time

from cqb.data import FetchError, fetch_file, mirror_file_path

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
started = time.perf_counter()
mirror = snakemake.params.mirror or None
for entry, dest in zip(snakemake.params.files, snakemake.output, strict=True):
    source = mirror_file_path(mirror, entry.get("mirror", entry["name"]))
    from_mirror = source is not None and source.is_file()
    logging.info("fetch %s from %s", dest, source if from_mirror else entry["url"])
    try:
        fetch_file(entry["url"], dest, entry["sha256"], mirror_path=source)
    except FetchError as error:
        logging.error("%s", error)
        sys.exit(f"fetch_dataset: {error}")
    logging.info("ok %s sha256=%s", dest, entry["sha256"])
logging.info("done in %.2f s", time.perf_counter() - started)
