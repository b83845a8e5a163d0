"""Snakemake script: preprocess one dataset into features.npz (X, y, feature names, report).

params.dataset: mnist | heart_disease | coupon; params.options: its config block
plus preprocess_seed; params.mnist_root: torchvision root (MNIST only).
input: the raw files (checksummed into the report).
The output holds no timing (benchmarks/data/ has it), so a rerun gives the same bytes.
"""

import json
import logging
import time

from cqb.data import load_mnist_arrays, preprocess_dataset, save_features

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
started = time.perf_counter()
dataset = snakemake.params.dataset
options = dict(snakemake.params.options)
images = labels = None
if dataset == "mnist":
    images, labels = load_mnist_arrays(snakemake.params.mnist_root, train=options.get("split", "train") == "train")
    logging.info("torchvision loaded %s images", images.shape)
raw_files = [p for p in snakemake.input if not p.endswith(".names")]
processed = preprocess_dataset(dataset, raw_files, options, images=images, labels=labels)
save_features(snakemake.output.features, processed.X, processed.y, processed.feature_names, processed.report)
logging.info("report: %s", json.dumps(processed.report, sort_keys=True))
logging.info("done in %.2f s", time.perf_counter() - started)
