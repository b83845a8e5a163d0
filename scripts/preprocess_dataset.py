"""Snakemake script: preprocess one dataset into features.npz (X, y, feature names, report).

params.dataset: a registered dataset (cqb.datasets.registry); params.options: its config
block plus preprocess_seed; params.mnist_root: the MNIST archives' root (a dataset of
MNIST archives only).
input: the raw files (checksummed into the report).
The output holds no timing (benchmarks/data/ has it), so a rerun gives the same bytes.
"""

import json
import logging
import sys
import time

from cqb.data import load_mnist_arrays, mnist_reader, preprocess_dataset, save_features
from cqb.datasets.registry import MNIST_ARCHIVES, dataset_spec

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
started = time.perf_counter()
dataset = snakemake.params.dataset
options = dict(snakemake.params.options)
images = labels = None
if dataset_spec(dataset).reader == MNIST_ARCHIVES:
    reader = mnist_reader()
    # the one line saying which reader read MNIST (the same arrays either way: tests/test_mnist_readers.py)
    note = "torchvision" if reader == "torchvision" else "numpy (torchvision is not installed)"
    print(f"preprocess_{dataset}: {dataset_spec(dataset).display_name} read with {note}", file=sys.stderr)
    images, labels = load_mnist_arrays(snakemake.params.mnist_root, train=options.get("split", "train") == "train",
                                       reader=reader)
    logging.info("%s read %s images", reader, images.shape)
raw_files = [p for p in snakemake.input if not p.endswith(".names")]
processed = preprocess_dataset(dataset, raw_files, options, images=images, labels=labels)
save_features(snakemake.output.features, processed.X, processed.y, processed.feature_names, processed.report)
logging.info("report: %s", json.dumps(processed.report, sort_keys=True))
logging.info("done in %.2f s", time.perf_counter() - started)
