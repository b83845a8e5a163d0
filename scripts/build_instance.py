"""Snakemake script: build the semi-synthetic pool instance (instance.npz) and its report.json.

input.features: features.npz from preprocess_dataset.py.
params.arrival_rate, params.C, params.max_iter: see config/datasets.yaml.
"""

import json
import logging
import sys
import time
from pathlib import Path

try:
    import cqb.data  # noqa: F401
except ImportError:  # env without the package installed: use the repo's src/
    sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from cqb.data import build_pool_instance, load_features, save_pool
from cqb.data.semisynthetic import atomic_write_text

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
started = time.perf_counter()
X, y, feature_names, preprocess_report = load_features(snakemake.input.features)
instance = build_pool_instance(
    X, y, arrival_rate=float(snakemake.params.arrival_rate),
    C=float(snakemake.params.C), max_iter=int(snakemake.params.max_iter),
    extra_report={"preprocess": preprocess_report, "feature_names": feature_names},
)
instance.report["instance"]["seconds"] = round(time.perf_counter() - started, 3)
save_pool(snakemake.output.instance, instance.contexts, instance.theta, instance.labels, instance.report)
atomic_write_text(snakemake.output.report, json.dumps(instance.report, indent=2, sort_keys=True) + "\n")
logging.info("instance: %s", json.dumps(instance.report["instance"], sort_keys=True))
logging.info("done in %.2f s", time.perf_counter() - started)
