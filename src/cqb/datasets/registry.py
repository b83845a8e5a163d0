"""The real datasets, one :class:`DatasetSpec` each: everything the pipeline knows of a dataset.

A spec holds the dataset's name (its key under ``data.datasets`` in
config/datasets.yaml, its folder under data/raw and data/processed, the
Figure 4 experiment of that name), its display name (figure and table
titles), how its raw files are read (:data:`PLAIN_FILES` or
:data:`MNIST_ARCHIVES`), its preprocessing (its reader and transform, named
``module:function``, fed with the dataset's config options by
:func:`cqb.data.preprocess.preprocess_dataset`) and the schema of those
options. Everything else looks a dataset up here: the datasets schema's
dataset parts are generated from the specs (:func:`datasets_schema`), the data
rules choose their rules by the reader (workflow/rules/data_common.smk),
Figure 7 takes the display names, and docs/extending.md lists the files a new
dataset touches (checked by tests/test_extending.py).

The transforms are named, not imported: this module imports nothing of the
data stack (pandas, scikit-learn, SciPy), so the workflow, the claims and the
figures read the registry without it in their environments.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass


# How a dataset's raw files are fetched and read.
PLAIN_FILES = "plain_files"  # fetched one by one (a job per file), read from their paths
# The four MNIST IDX archives, placed under <root>/MNIST/raw/ and read by the MNIST reader
# (torchvision, which checks their MD5s too, or numpy: cqb.data.fetch.mnist_reader).
MNIST_ARCHIVES = "mnist_archives"
READERS = (PLAIN_FILES, MNIST_ARCHIVES)
# The datasets schema's file-list definition ($defs) each reader needs.
FILES_SCHEMA = {PLAIN_FILES: "files", MNIST_ARCHIVES: "md5_files"}

# Options of the transforms (the schema's enums and the transforms' checks).
OVERSAMPLERS = ("smote", "smotenc")
COUPON_MISSING_MODES = ("category", "drop")


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    display_name: str
    reader: str  # PLAIN_FILES or MNIST_ARCHIVES
    # "module:function" → Processed: called with the data (the frame that `read` gives of the
    # first raw file; the MNIST reader's images and labels), the seed and the options, by keyword
    transform: str
    options: Mapping[str, dict]  # option → its JSON schema (with its default), the `files` list aside
    read: str | None = None  # "module:function" reading a plain-file dataset's first raw file
    read_options: tuple[str, ...] = ()  # the options its reader takes, not its transform

    def __post_init__(self):
        if self.reader not in READERS:
            raise ValueError(f"dataset {self.name!r}: reader must be one of {READERS}, got {self.reader!r}")
        if (self.read is None) != (self.reader == MNIST_ARCHIVES):
            raise ValueError(f"dataset {self.name!r}: a plain-file dataset names its `read` function, "
                             "an MNIST-archive dataset none")

    @property
    def preprocess_overridable(self) -> bool:
        """A construction variant may change its preprocessing (the data rules
        preprocess a variant from plain files only)."""
        return self.reader == PLAIN_FILES

    def defaults(self) -> dict:
        return {key: schema["default"] for key, schema in self.options.items() if "default" in schema}

    def transform_options(self, options: Mapping) -> dict:
        """The options its transform takes, of the dataset's ``options``."""
        return {key: options[key] for key in self.options if key not in self.read_options}


def _n_samples(default):
    return {"type": ["integer", "null"], "minimum": 1, "default": default}


def _replace(default):
    return {"type": "boolean", "default": default}


_PREPROCESS = "cqb.data.preprocess"
DECLARED_DATASETS = (
    DatasetSpec(
        "mnist", "MNIST", MNIST_ARCHIVES, f"{_PREPROCESS}:preprocess_mnist",
        {"split": {"type": "string", "enum": ["train", "test"], "default": "train"},
         "block": {"type": "integer", "minimum": 1, "default": 4},
         "n_samples": _n_samples(None), "replace": _replace(False)},
        read_options=("split",),
    ),
    DatasetSpec(
        "heart_disease", "Heart Disease", PLAIN_FILES, f"{_PREPROCESS}:preprocess_heart",
        {"n_samples": _n_samples(4000), "replace": _replace(True),
         "oversampler": {"type": "string", "enum": list(OVERSAMPLERS), "default": "smote"},
         "smote_k_neighbors": {"type": "integer", "minimum": 1, "maximum": 12, "default": 5}},
        read=f"{_PREPROCESS}:read_heart",
    ),
    DatasetSpec(
        "coupon", "Coupon", PLAIN_FILES, f"{_PREPROCESS}:preprocess_coupon",
        {"n_samples": _n_samples(4000), "replace": _replace(False),
         "missing": {"type": "string", "enum": list(COUPON_MISSING_MODES), "default": "category"}},
        read=f"{_PREPROCESS}:read_coupon",
    ),
)
DATASETS = {spec.name: spec for spec in DECLARED_DATASETS}


def dataset_spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; expected one of {tuple(DATASETS)}")
    return DATASETS[name]


def dataset_display_name(name: str) -> str:
    """The dataset's name in figures and tables; a name that is no dataset as it is."""
    return DATASETS[name].display_name if name in DATASETS else name


def datasets_schema(static_schema: Mapping) -> dict:
    """The static datasets schema (workflow/schemas/datasets.schema.yaml) with
    its dataset parts filled in from the specs: each dataset's block under
    ``data.datasets`` (its options and its file list), and what a construction
    variant may name (``datasets``, and ``preprocess``: the options of the
    datasets whose preprocessing it may change, without defaults, so an
    override holds only what it changes)."""
    schema = copy.deepcopy(dict(static_schema))
    data = schema["properties"]["data"]["properties"]
    data["datasets"].update({
        "type": "object", "required": list(DATASETS), "additionalProperties": False,
        "properties": {spec.name: {
            "type": "object", "required": ["files"], "additionalProperties": False,
            "properties": {**copy.deepcopy(dict(spec.options)),
                           "files": {"$ref": f"#/$defs/{FILES_SCHEMA[spec.reader]}"}},
        } for spec in DECLARED_DATASETS},
    })
    variant = data["variants"]["additionalProperties"]["properties"]
    variant["datasets"]["items"]["enum"] = list(DATASETS)
    variant["preprocess"].update({
        "type": "object", "additionalProperties": False,
        "properties": {spec.name: {
            "type": "object", "additionalProperties": False,
            "properties": {key: {k: v for k, v in option.items() if k != "default"}
                           for key, option in spec.options.items()},
        } for spec in DECLARED_DATASETS if spec.preprocess_overridable},
    })
    return schema


def named_function(reference: str) -> Callable:
    """The function a spec names as ``module:function``."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)
