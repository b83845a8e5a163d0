# Helpers of the data rules (workflow/rules/data.smk): config access and paths.

import os
import re
from pathlib import Path

from cqb.datasets.registry import MNIST_ARCHIVES, PLAIN_FILES, dataset_spec

# config["data"] is validated, defaults filled in, with the rest of the config (load_config in common.smk)
DATA_CONFIG = config["data"]
DATA_RAW = DATA_CONFIG["raw_dir"]
DATA_PROCESSED = DATA_CONFIG["processed_dir"]
DATA_DATASETS = list(DATA_CONFIG["datasets"])
# How each dataset is read is its registry entry's (cqb.datasets.registry). Datasets of
# plain files are fetched one by one and preprocessed from the files; MNIST's archives
# go through the MNIST reader (torchvision, or numpy) and have rules of their own.
DATA_TABULAR = [dataset for dataset in DATA_DATASETS if dataset_spec(dataset).reader == PLAIN_FILES]
DATA_MNIST_READ = [dataset for dataset in DATA_DATASETS if dataset_spec(dataset).reader == MNIST_ARCHIVES]


def data_files(dataset):
    return DATA_CONFIG["datasets"][dataset]["files"]


def data_raw_paths(dataset):
    return [f"{DATA_RAW}/{dataset}/{entry['name']}" for entry in data_files(dataset)]


def data_checksums(dataset, names=None):
    # What identifies the raw files (name: SHA-256), the download rules' params. Where a
    # file comes from (data.mirror, its url) is no param: the scripts read it from the
    # config, so giving or withdrawing the mirror reruns nothing.
    return {e["name"]: e["sha256"] for e in data_files(dataset) if names is None or e["name"] in names}


def data_options(dataset):
    # The dataset's config block (minus the file list) plus the shared seed, for the preprocess script.
    block = {k: v for k, v in DATA_CONFIG["datasets"][dataset].items() if k != "files"}
    return {**block, "preprocess_seed": DATA_CONFIG["preprocess_seed"]}


def data_alternatives(values):
    # A wildcard constraint matching exactly these values.
    return "|".join(re.escape(value) for value in values)


DATA_TABULAR_FILES = [entry["name"] for dataset in DATA_TABULAR for entry in data_files(dataset)]


def data_mnist_archives(dataset):
    # The MNIST reader finds the archives under <root>/MNIST/raw/, root = data/raw/<dataset>.
    return [f"{DATA_RAW}/{dataset}/MNIST/raw/{e['name']}" for e in data_files(dataset)]


def data_mnist_extracted(dataset):
    # Either reader extracts each archive next to it (name without .gz) and reads those.
    return [path[: -len(".gz")] for path in data_mnist_archives(dataset)]


# Construction variants (sensitivity study, docs/figures.md): each
# builds its own pool under DATA_VARIANTS/{dataset}-{variant}/, never touching
# the default pool.
DATA_VARIANT_CONFIG = DATA_CONFIG.get("variants", {})
DATA_VARIANTS = f"{DATA_PROCESSED}/variants"


def data_variant_options(dataset, variant):
    # The dataset's preprocess options with the variant's overrides on top.
    overrides = DATA_VARIANT_CONFIG[variant].get("preprocess", {}).get(dataset, {})
    return {**data_options(dataset), **overrides}


def data_variant_features(wildcards):
    # A variant that changes the preprocessing has its own features file.
    entry = DATA_VARIANT_CONFIG[wildcards.variant]
    if entry.get("preprocess", {}).get(wildcards.dataset):
        return f"{DATA_VARIANTS}/{wildcards.dataset}-{wildcards.variant}/features.npz"
    return f"{DATA_PROCESSED}/{wildcards.dataset}/features.npz"
