"""Snakemake script: place the MNIST archives for torchvision, which checks their MD5s and extracts them.

params.root: the torchvision root (archives land in <root>/MNIST/raw/).
params.dataset, params.sha256: as in fetch_dataset.py.
"""

import logging
import sys
import time
from pathlib import Path

from cqb.data import FetchError, fetch_mnist, file_sources, mirror_file_path

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
started = time.perf_counter()
files, mirror = file_sources(snakemake.config["data"], snakemake.params.dataset, snakemake.params.sha256)
logging.info("mirror: %s", mirror_file_path(mirror, "") or "none (download)")
try:
    train = fetch_mnist(snakemake.params.root, files, mirror_dir=mirror)
except FetchError as error:
    logging.error("%s", error)
    sys.exit(f"fetch_mnist: {error}")
logging.info("torchvision parsed %d training images", len(train))
missing = [p for p in snakemake.output if not Path(p).is_file()]
if missing:
    sys.exit(f"fetch_mnist: torchvision did not produce {missing}")
logging.info("done in %.2f s", time.perf_counter() - started)
