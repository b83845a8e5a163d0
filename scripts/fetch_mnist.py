"""Snakemake script: place the MNIST archives for torchvision, which checks their MD5s and extracts them.

params.root: the torchvision root (archives land in <root>/MNIST/raw/).
params.files, params.mirror: as in fetch_dataset.py.
"""

import logging
import sys
import time
from pathlib import Path

try:
    import cqb.data  # noqa: F401
except ImportError:  # env without the package installed: use the repo's src/
    sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from cqb.data import fetch_mnist, mirror_file_path

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
started = time.perf_counter()
mirror = snakemake.params.mirror or None
logging.info("mirror: %s", mirror_file_path(mirror, "") or "none (download)")
train = fetch_mnist(snakemake.params.root, mirror_dir=mirror, files=snakemake.params.files)
logging.info("torchvision parsed %d training images", len(train))
missing = [p for p in snakemake.output if not Path(p).is_file()]
if missing:
    raise RuntimeError(f"torchvision did not produce {missing}")
logging.info("done in %.2f s", time.perf_counter() - started)
