# Helpers of the data rules (workflow/rules/data.smk): config access and paths.

import os
from pathlib import Path

from snakemake.utils import validate

validate(config, "../schemas/datasets.schema.yaml")

DATA_CONFIG = config["data"]
DATA_RAW = DATA_CONFIG["raw_dir"]
DATA_PROCESSED = DATA_CONFIG["processed_dir"]
DATA_DATASETS = ["mnist", "heart_disease", "coupon"]
DATA_MNIST_ROOT = f"{DATA_RAW}/mnist"


def data_files(dataset):
    return DATA_CONFIG["datasets"][dataset]["files"]


def data_raw_paths(dataset):
    return [f"{DATA_RAW}/{dataset}/{entry['name']}" for entry in data_files(dataset)]


def data_mirror():
    # Decided when the workflow is parsed: a missing mirror folder means download.
    mirror = DATA_CONFIG["mirror"]
    return mirror if mirror and os.path.isdir(mirror) else ""


def data_options(dataset):
    # The dataset's config block (minus the file list) plus the shared seed, for the preprocess script.
    block = {k: v for k, v in DATA_CONFIG["datasets"][dataset].items() if k != "files"}
    return {**block, "preprocess_seed": DATA_CONFIG["preprocess_seed"]}


DATA_MNIST_ARCHIVES = [f"{DATA_MNIST_ROOT}/MNIST/raw/{e['name']}" for e in data_files("mnist")]
# torchvision extracts each archive next to it (name without .gz) and reads those.
DATA_MNIST_EXTRACTED = [path[: -len(".gz")] for path in DATA_MNIST_ARCHIVES]


