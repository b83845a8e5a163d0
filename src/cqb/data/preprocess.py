"""Turn the raw datasets into feature matrices and labels (docs/model.md#real-data-pools).

The readers and transforms the dataset registry (:mod:`cqb.datasets.registry`)
names, and :func:`preprocess_dataset`, which feeds a dataset's transform its options.
Each `preprocess_*` function returns a `Processed` (features X float64,
labels y int64, a JSON-ready report). The readers (`read_*`) are separate so
the transforms are testable on in-memory data. Encoding, scaling and
oversampling use scikit-learn / imbalanced-learn.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from cqb.data.fetch import file_digest, read_idx
from cqb.datasets.registry import COUPON_MISSING_MODES, MNIST_ARCHIVES, OVERSAMPLERS, dataset_spec, named_function

# --- column layouts -----------------------------------------------------------

# processed.cleveland.data: 14 columns, no header (heart-disease.names, attributes 3,4,9,10,12,16,19,32,38,40,41,44,51,58).
HEART_COLUMNS = [
    "age", "sex", "cp", "trestbps", "chol", "fbs", "restecg",
    "thalach", "exang", "oldpeak", "slope", "ca", "thal", "num",
]
HEART_TARGET = "num"
HEART_NUMERIC = ["age", "trestbps", "chol", "thalach", "oldpeak"]
# Categorical with more than two levels: one-hot encoded.
HEART_CATEGORICAL = ["cp", "restecg", "slope", "ca", "thal"]
# Already 0/1: kept as one 0/1 column each (one-hot would only add a redundant complement).
HEART_BINARY = ["sex", "fbs", "exang"]

COUPON_TARGET = "Y"
COUPON_CAR_COLUMN = "car"
# The integer-coded columns are treated as numeric (standardised); every
# text column is categorical. This split gives 113 one-hot + 7 numeric = 120 features.
COUPON_NUMERIC = [
    "temperature", "has_children", "toCoupon_GEQ5min", "toCoupon_GEQ15min",
    "toCoupon_GEQ25min", "direction_same", "direction_opp",
]
COUPON_MISSING_CATEGORY = "missing"


@dataclass
class Processed:
    """A preprocessed dataset: features, integer labels and what was done."""

    X: np.ndarray
    y: np.ndarray
    feature_names: list[str]
    report: dict = field(default_factory=dict)


def _class_counts(y) -> dict[str, int]:
    values, counts = np.unique(np.asarray(y), return_counts=True)
    return {str(int(v)): int(c) for v, c in zip(values, counts)}


def _sample_rows(n_rows: int, n_samples: int | None, replace: bool, seed: int) -> np.ndarray:
    """Row indices of the final pool: all rows (in order) when n_samples is None."""
    if n_samples is None:
        return np.arange(n_rows)
    if n_samples <= 0:
        raise ValueError(f"n_samples must be positive or null, got {n_samples}")
    if not replace and n_samples > n_rows:
        raise ValueError(
            f"cannot sample n_samples={n_samples} rows without replacement from {n_rows} rows"
        )
    rng = np.random.default_rng(seed)
    return rng.choice(n_rows, size=n_samples, replace=replace)


def input_checksums(paths) -> dict[str, str]:
    """SHA-256 of each input file, keyed by file name."""
    return {os.path.basename(str(p)): file_digest(p) for p in paths}


# --- MNIST ---------------------------------------------------------------------

def read_idx_gz(path) -> np.ndarray:
    """Parse a gzipped IDX file (the MNIST format) with numpy only."""
    return read_idx(path)


def preprocess_mnist(
    images: np.ndarray,
    labels: np.ndarray,
    block: int = 4,
    n_samples: int | None = None,
    replace: bool = False,
    seed: int = 0,
) -> Processed:
    """Pixels / 255, mean over non-overlapping block×block tiles, flattened.

    28×28 images with block = 4 give 7×7 = 49 features; labels are the digits 0..9.
    """
    images = np.asarray(images)
    if images.ndim != 3:
        raise ValueError(f"images must be n×h×w, got shape {images.shape}")
    n, height, width = images.shape
    if height % block or width % block:
        raise ValueError(f"image size {height}×{width} is not a multiple of block={block}")
    labels = np.asarray(labels).astype(np.int64)
    if labels.shape != (n,):
        raise ValueError(f"labels shape {labels.shape} does not match {n} images")
    scaled = images.astype(np.float64) / 255.0
    pooled = scaled.reshape(n, height // block, block, width // block, block).mean(axis=(2, 4))
    features = pooled.reshape(n, -1)
    rows = _sample_rows(n, n_samples, replace, seed)
    X, y = features[rows], labels[rows]
    names = [f"px_{r}_{c}" for r in range(height // block) for c in range(width // block)]
    report = {
        "dataset": "mnist",
        "rows_in": int(n),
        "rows_kept": int(n),
        "rows_out": int(len(rows)),
        "d": int(X.shape[1]),
        "K": int(len(np.unique(labels))),
        "class_counts_before": _class_counts(labels),
        "class_counts_after": _class_counts(y),
        "steps": [
            "pixels / 255",
            f"mean over non-overlapping {block}x{block} blocks -> {height // block}x{width // block}",
            "flatten",
            "all rows" if n_samples is None else f"sample {n_samples} rows (replace={replace}, seed={seed})",
        ],
    }
    return Processed(X=np.ascontiguousarray(X), y=y, feature_names=names, report=report)


# --- Heart Disease (Cleveland) -------------------------------------------------

def read_heart(path) -> pd.DataFrame:
    """processed.cleveland.data: no header, '?' marks a missing value."""
    return pd.read_csv(path, header=None, names=HEART_COLUMNS, na_values="?")


def _heart_encoder() -> ColumnTransformer:
    return ColumnTransformer(
        [
            ("numeric", StandardScaler(), HEART_NUMERIC),
            ("binary", "passthrough", HEART_BINARY),
            ("categorical", OneHotEncoder(sparse_output=False, dtype=np.float64), HEART_CATEGORICAL),
        ],
        verbose_feature_names_out=False,
    )


def preprocess_heart(
    frame: pd.DataFrame,
    n_samples: int | None = 4000,
    replace: bool = True,
    seed: int = 0,
    smote_k_neighbors: int = 5,
    oversampler: str = "smote",
) -> Processed:
    """Drop incomplete rows, encode, SMOTE-balance the 5 classes, sample.

    Encoding (fitted on the complete rows): numeric columns standardised,
    binary ones kept as 0/1, cp/restecg/slope/ca/thal one-hot.
    oversampler "smote": SMOTE on the encoded features (synthetic rows may
    hold fractional one-hot entries); "smotenc": SMOTE-NC on standardised
    numerics plus raw categorical codes (synthetic rows take a category), then one-hot.
    """
    from imblearn.over_sampling import SMOTE, SMOTENC

    if oversampler not in OVERSAMPLERS:
        raise ValueError(f"oversampler must be one of {OVERSAMPLERS}, got {oversampler!r}")
    rows_in = len(frame)
    complete = frame.dropna().reset_index(drop=True)
    y_complete = complete[HEART_TARGET].astype(np.int64).to_numpy()
    features = complete.drop(columns=[HEART_TARGET])

    encoder = _heart_encoder().fit(features)
    names = list(encoder.get_feature_names_out())
    if oversampler == "smote":
        encoded = encoder.transform(features).astype(np.float64)
        X_balanced, y_balanced = SMOTE(
            k_neighbors=smote_k_neighbors, random_state=seed
        ).fit_resample(encoded, y_complete)
    else:
        # Standardise the numerics first so SMOTE-NC's distances are not dominated by chol.
        mixed = features.copy()
        scaler = encoder.named_transformers_["numeric"]
        mixed[HEART_NUMERIC] = scaler.transform(features[HEART_NUMERIC])
        categorical_idx = [mixed.columns.get_loc(c) for c in HEART_BINARY + HEART_CATEGORICAL]
        mixed_balanced, y_balanced = SMOTENC(
            categorical_features=categorical_idx, k_neighbors=smote_k_neighbors, random_state=seed
        ).fit_resample(mixed, y_complete)
        # Numerics are already standardised: pass them through the fitted one-hot step only.
        onehot = encoder.named_transformers_["categorical"]
        X_balanced = np.hstack([
            mixed_balanced[HEART_NUMERIC].to_numpy(np.float64),
            mixed_balanced[HEART_BINARY].to_numpy(np.float64),
            onehot.transform(mixed_balanced[HEART_CATEGORICAL]),
        ])
    X_balanced = np.asarray(X_balanced, dtype=np.float64)
    y_balanced = np.asarray(y_balanced, dtype=np.int64)

    rows = _sample_rows(len(y_balanced), n_samples, replace, seed)
    X, y = X_balanced[rows], y_balanced[rows]
    report = {
        "dataset": "heart_disease",
        "rows_in": int(rows_in),
        "rows_kept": int(len(complete)),
        "rows_balanced": int(len(y_balanced)),
        "rows_out": int(len(rows)),
        "d": int(X.shape[1]),
        "K": int(len(np.unique(y_complete))),
        "class_counts_before": _class_counts(y_complete),
        "class_counts_balanced": _class_counts(y_balanced),
        "class_counts_after": _class_counts(y),
        "numeric_standardised": HEART_NUMERIC,
        "binary_kept_01": HEART_BINARY,
        "categorical_one_hot": HEART_CATEGORICAL,
        "oversampler": oversampler,
        "smote_k_neighbors": int(smote_k_neighbors),
        "steps": [
            "drop rows with '?' (missing ca/thal)",
            "standardise numeric, keep binary 0/1, one-hot categorical (fitted on complete rows)",
            f"{oversampler.upper()} to balance all classes (k_neighbors={smote_k_neighbors}, random_state={seed})",
            "all rows" if n_samples is None else f"sample {n_samples} rows (replace={replace}, seed={seed})",
        ],
    }
    return Processed(X=np.ascontiguousarray(X), y=y, feature_names=names, report=report)


# --- In-Vehicle Coupon -----------------------------------------------------------

def read_coupon(path) -> pd.DataFrame:
    """The coupon CSV, with empty cells as NaN (and no other strings read as NaN)."""
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def preprocess_coupon(
    frame: pd.DataFrame,
    missing: str = "category",
    n_samples: int | None = 4000,
    replace: bool = False,
    seed: int = 0,
) -> Processed:
    """One-hot every text column, standardise the integer ones, binary target Y.

    missing "category" (default): keep every row, an empty cell is its own
    category (gives 120 features). "drop": drop the almost-empty `car`
    column, then every incomplete row (12,079 rows left).
    """
    if missing not in COUPON_MISSING_MODES:
        raise ValueError(f"missing must be one of {COUPON_MISSING_MODES}, got {missing!r}")
    rows_in = len(frame)
    if missing == "drop":
        kept = frame.drop(columns=[COUPON_CAR_COLUMN]).dropna().reset_index(drop=True)
    else:
        kept = frame.copy()
    categorical = [c for c in kept.columns if c != COUPON_TARGET and c not in COUPON_NUMERIC]
    unexpected_numeric = [c for c in categorical if pd.api.types.is_numeric_dtype(kept[c])]
    if unexpected_numeric:
        raise ValueError(f"coupon columns read as numbers but not listed as numeric: {unexpected_numeric}")
    if missing == "category":
        kept[categorical] = kept[categorical].fillna(COUPON_MISSING_CATEGORY)
    y_all = kept[COUPON_TARGET].astype(np.int64).to_numpy()

    encoder = ColumnTransformer(
        [
            ("numeric", StandardScaler(), COUPON_NUMERIC),
            ("categorical", OneHotEncoder(sparse_output=False, dtype=np.float64), categorical),
        ],
        verbose_feature_names_out=False,
    )
    encoded = np.asarray(encoder.fit_transform(kept.drop(columns=[COUPON_TARGET])), dtype=np.float64)
    names = list(encoder.get_feature_names_out())
    constant = [COUPON_NUMERIC[i] for i, s in enumerate(encoder.named_transformers_["numeric"].var_) if s == 0]

    rows = _sample_rows(len(y_all), n_samples, replace, seed)
    X, y = encoded[rows], y_all[rows]
    report = {
        "dataset": "coupon",
        "missing": missing,
        "rows_in": int(rows_in),
        "rows_kept": int(len(kept)),
        "rows_out": int(len(rows)),
        "d": int(X.shape[1]),
        "K": 2,
        "n_numeric": len(COUPON_NUMERIC),
        "n_one_hot": int(X.shape[1] - len(COUPON_NUMERIC)),
        "numeric_standardised": COUPON_NUMERIC,
        "numeric_constant_columns": constant,
        "categorical_one_hot": categorical,
        "class_counts_before": _class_counts(y_all),
        "class_counts_after": _class_counts(y),
        "steps": [
            "empty cell = its own category 'missing'" if missing == "category"
            else "drop column car, then rows with any empty cell",
            "standardise integer columns, one-hot every text column",
            "all rows" if n_samples is None else f"sample {n_samples} rows (replace={replace}, seed={seed})",
        ],
    }
    return Processed(X=np.ascontiguousarray(X), y=y, feature_names=names, report=report)


# --- one entry point for the workflow ---------------------------------------------

def preprocess_dataset(dataset: str, raw_paths: list, params: dict, images=None, labels=None) -> Processed:
    """Read the raw files of `dataset` and preprocess them as its registry
    entry says, with the config `params` (its options, unset ones at their
    schema default, and ``preprocess_seed``).

    For a dataset of MNIST archives pass the uint8 `images` and `labels` (the workflow reads them
    with cqb.data.load_mnist_arrays); `raw_paths` are then only checksummed for the report.
    """
    spec = dataset_spec(dataset)
    options = {**spec.defaults(), **params}
    seed = int(options["preprocess_seed"])
    if spec.reader == MNIST_ARCHIVES:
        if images is None or labels is None:
            raise ValueError(f"preprocess_dataset({dataset!r}, ...) needs the images and labels arrays")
        data = (images, labels)
    else:
        data = (named_function(spec.read)(raw_paths[0]),)
    result = named_function(spec.transform)(*data, seed=seed, **spec.transform_options(options))
    result.report["preprocess_seed"] = seed
    result.report["input_sha256"] = input_checksums(raw_paths)
    return result
