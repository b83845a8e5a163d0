"""Snakemake script: place the MNIST archives (SHA-256 checked) and extract them
with the MNIST reader this environment has (torchvision, which also checks their
MD5s, or numpy without PyTorch: cqb.data.mnist_reader).

params.root: the archives' root (they land in <root>/MNIST/raw/).
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
    reader = fetch_mnist(snakemake.params.root, files, mirror_dir=mirror)
except (FetchError, ValueError) as error:
    logging.error("%s", error)
    sys.exit(f"fetch_mnist: {error}")
logging.info("extracted by the %s reader", reader)
missing = [p for p in snakemake.output if not Path(p).is_file()]
if missing:
    sys.exit(f"fetch_mnist: the {reader} reader did not produce {missing}")
logging.info("done in %.2f s", time.perf_counter() - started)
