"""Snakemake script: the pool instance of one construction variant (cqb.data.variants).

input.features: features.npz (the dataset's, or the variant's own preprocessing).
params.variant: {name, …settings} of config/datasets.yaml data.variants; params.dataset;
params.max_iter. Outputs as build_instance.py: instance.npz and report.json.
"""

import json
import logging
import sys
import time

from cqb.data import load_features, save_pool
from cqb.io.files import atomic_write_text
from cqb.data.variants import build_variant_instance, variant_for_dataset

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
started = time.perf_counter()
entry = dict(snakemake.params.variant)
try:
    variant = variant_for_dataset(entry.pop("name"), entry, snakemake.params.dataset)
except ValueError as error:
    logging.error("%s", error)
    sys.exit(f"error: {error}")
X, y, feature_names, preprocess_report = load_features(snakemake.input.features)
instance = build_variant_instance(
    X, y, variant, max_iter=int(snakemake.params.max_iter),
    extra_report={"preprocess": preprocess_report, "feature_names": feature_names},
)
save_pool(snakemake.output.instance, instance.contexts, instance.theta, instance.labels, instance.report)
atomic_write_text(snakemake.output.report, json.dumps(instance.report, indent=2, sort_keys=True) + "\n")
logging.info("instance: %s", json.dumps(instance.report["instance"], sort_keys=True))
logging.info("done in %.2f s", time.perf_counter() - started)
