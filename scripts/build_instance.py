"""Snakemake script: build the semi-synthetic pool instance (instance.npz) and its report.json.

input.features: features.npz from preprocess_dataset.py.
params.C, params.max_iter: see config/datasets.yaml. No arrival rate: the pool serves
any λ (config/config.yaml sets it per experiment). No timing in the outputs either.
"""

import json
import logging
import time

from cqb.data import build_pool_instance, load_features, save_pool
from cqb.io.files import atomic_write_text

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
started = time.perf_counter()
X, y, feature_names, preprocess_report = load_features(snakemake.input.features)
instance = build_pool_instance(
    X, y, C=float(snakemake.params.C), max_iter=int(snakemake.params.max_iter),
    extra_report={"preprocess": preprocess_report, "feature_names": feature_names},
)
save_pool(snakemake.output.instance, instance.contexts, instance.theta, instance.labels, instance.report)
atomic_write_text(snakemake.output.report, json.dumps(instance.report, indent=2, sort_keys=True) + "\n")
logging.info("instance: %s", json.dumps(instance.report["instance"], sort_keys=True))
logging.info("done in %.2f s", time.perf_counter() - started)
