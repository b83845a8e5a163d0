"""Snakemake script: fetch dataset files (mirror copy or download), SHA-256 checked.

params.dataset, params.sha256 (name: SHA-256, in the order of output): what
to fetch; where from (the entry's url, data.mirror, used when the folder
exists) is read from the config, so that it is no rerun trigger.
A failed fetch ends in one line naming the file (no traceback) and leaves nothing behind.
"""

import logging
import sys
import time

from cqb.data import FetchError, fetch_file, file_sources, mirror_file_path

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
started = time.perf_counter()
files, mirror = file_sources(snakemake.config["data"], snakemake.params.dataset, snakemake.params.sha256)
for entry, dest in zip(files, snakemake.output, strict=True):
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
