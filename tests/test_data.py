"""Real-data part: fetching (checksums, mirror), preprocessing, semi-synthetic pool instances.

Nothing here touches the network: files come from the offline mirror
(CQB_DATA_MIRROR, default ../shared/datasets beside the repository) or from file:// URLs.
"""

from __future__ import annotations

import csv
import importlib.util
import inspect
import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from cqb.data import (
    ChecksumError,
    DownloadError,
    FetchError,
    build_pool_instance,
    fetch_file,
    file_digest,
    load_pool,
    preprocess_coupon,
    preprocess_dataset,
    preprocess_heart,
    preprocess_mnist,
    read_coupon,
    read_heart,
    read_idx_gz,
    save_pool,
)
from cqb.datasets.registry import DECLARED_DATASETS, MNIST_ARCHIVES, datasets_schema, named_function
from cqb.config.schema import validate_with_defaults
from cqb.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
# the offline mirror beside the repository, as CI lays it out (../shared/datasets)
MIRROR = Path(os.environ.get("CQB_DATA_MIRROR", REPO.parent / "shared" / "datasets"))
needs_mirror = pytest.mark.skipif(not MIRROR.is_dir(), reason=f"offline dataset mirror {MIRROR} not present")

HEART_FILE = MIRROR / "heart-disease" / "processed.cleveland.data"
COUPON_FILE = MIRROR / "in-vehicle-coupon" / "in-vehicle-coupon-recommendation.csv"
HEART_SHA256 = "a74b7efa387bc9d108d7d0115d831fe9b414b29ae7124f331b622b4efa0427c8"
DATASETS_CONFIG = yaml.safe_load((REPO / "config" / "datasets.yaml").read_text())["data"]
MNIST_FILES = DATASETS_CONFIG["datasets"]["mnist"]["files"]
MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


@pytest.fixture(scope="module")
def heart_frame():
    return read_heart(HEART_FILE)


@pytest.fixture(scope="module")
def coupon_frame():
    return read_coupon(COUPON_FILE)


# --- fetching ------------------------------------------------------------------

def test_checksum_mismatch_names_file_and_both_digests_and_leaves_nothing(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(b"not the real file")
    dest = tmp_path / "out" / "processed.cleveland.data"
    with pytest.raises(ChecksumError) as caught:
        fetch_file("https://example.invalid/x", dest, HEART_SHA256, mirror_path=source)
    message = str(caught.value)
    actual = file_digest(source)
    assert "processed.cleveland.data" in message
    assert HEART_SHA256 in message and actual in message
    assert isinstance(caught.value, ValueError)
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # temp file removed too


def test_checksum_mismatch_does_not_replace_an_existing_file(tmp_path):
    dest = tmp_path / "file.txt"
    dest.write_text("old")
    source = tmp_path / "new.txt"
    source.write_text("new")
    with pytest.raises(ChecksumError):
        fetch_file("https://example.invalid/x", dest, "0" * 64, mirror_path=source)
    assert dest.read_text() == "old"


def test_malformed_digest_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="not a SHA-256"):
        fetch_file("https://example.invalid/x", tmp_path / "f", "abc123")


@needs_mirror
def test_mirror_copy_is_verified_and_identical(tmp_path):
    dest = fetch_file("https://example.invalid/never-used", tmp_path / "raw" / "heart.data",
                      HEART_SHA256, mirror_path=HEART_FILE)
    assert dest.read_bytes() == HEART_FILE.read_bytes()
    assert [p.name for p in dest.parent.iterdir()] == ["heart.data"]


def test_download_path_used_when_mirror_file_absent(tmp_path):
    # file:// exercises the urllib branch without a network.
    source = tmp_path / "published.csv"
    source.write_bytes(b"a,b\n1,2\n")
    digest = file_digest(source)
    dest = fetch_file(source.as_uri(), tmp_path / "raw" / "x.csv", digest,
                      mirror_path=tmp_path / "no-such-mirror" / "x.csv")
    assert dest.read_bytes() == source.read_bytes()


def test_download_without_network_is_one_line_naming_file_url_and_mirror(tmp_path, monkeypatch):
    import socket
    import urllib.error
    import urllib.request

    def no_network(*args, **kwargs):
        raise urllib.error.URLError(socket.gaierror(-3, "Temporary failure in name resolution"))

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    url = "https://archive.ics.uci.edu/ml/machine-learning-databases/heart-disease/processed.cleveland.data"
    dest = tmp_path / "raw" / "processed.cleveland.data"
    with pytest.raises(DownloadError) as caught:
        fetch_file(url, dest, HEART_SHA256, mirror_path=tmp_path / "no-mirror" / "x")
    message = str(caught.value)
    assert isinstance(caught.value, FetchError)
    assert "\n" not in message
    assert "processed.cleveland.data" in message and url in message
    assert "Temporary failure in name resolution" in message and "data.mirror" in message
    assert list(dest.parent.iterdir()) == []


def test_download_from_an_unresolvable_host_is_a_download_error(tmp_path):
    # .invalid never resolves (RFC 2606): no request leaves the machine.
    with pytest.raises(DownloadError, match="cqb-no-such-host.invalid"):
        fetch_file("https://cqb-no-such-host.invalid/x.csv", tmp_path / "x.csv", HEART_SHA256)
    assert list(tmp_path.iterdir()) == []


# --- config --------------------------------------------------------------------

def _manifest():
    with open(MIRROR / "MANIFEST.tsv", newline="") as handle:
        return {row["file"]: row for row in csv.DictReader(handle, delimiter="\t")}


@needs_mirror
def test_config_pins_the_manifest_checksums_and_urls():
    config = yaml.safe_load((REPO / "config" / "datasets.yaml").read_text())["data"]
    manifest = _manifest()
    entries = [e for block in config["datasets"].values() for e in block["files"]]
    assert {e["mirror"] for e in entries} == set(manifest)
    for entry in entries:
        row = manifest[entry["mirror"]]
        assert entry["sha256"] == row["sha256"], entry["name"]
        assert entry["url"] == row["canonical_url"], entry["name"]
        if "md5" in entry:
            assert entry["md5"] == row["md5"], entry["name"]
    # torchvision verifies the archives with its own MD5s: the config's must match them.
    torchvision = pytest.importorskip("torchvision.datasets")
    assert {e["name"]: e["md5"] for e in MNIST_FILES} == dict(torchvision.MNIST.resources)


def test_config_validates_against_schema_and_fills_defaults():
    schema = datasets_schema(yaml.safe_load((REPO / "workflow" / "schemas" / "datasets.schema.yaml").read_text()))
    config = yaml.safe_load((REPO / "config" / "datasets.yaml").read_text())
    validate_with_defaults(config, schema)
    del config["data"]["instance"], config["data"]["datasets"]["coupon"]["missing"]
    validate_with_defaults(config, schema)
    assert config["data"]["instance"] == {"C": 1.0, "max_iter": 1000}
    assert config["data"]["datasets"]["coupon"]["missing"] == "category"
    config["data"]["datasets"]["coupon"]["missing"] = "impute"
    with pytest.raises(ConfigError, match="impute"):
        validate_with_defaults(config, schema)


# --- the dataset registry ----------------------------------------------------------

STATIC_DATASETS_SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "datasets.schema.yaml").read_text())


def test_the_datasets_schema_follows_the_registry(monkeypatch):
    """A spec added to the registry is a required config block with its own
    options, a name variants may use and, read from plain files, re-preprocess."""
    from cqb.datasets import registry as datasets

    iris = datasets.DatasetSpec("iris", "Iris", datasets.PLAIN_FILES, "iris:preprocess",
                                {"n_samples": {"type": "integer", "minimum": 1, "default": 150}}, read="iris:read")
    monkeypatch.setattr(datasets, "DECLARED_DATASETS", datasets.DECLARED_DATASETS + (iris,))
    monkeypatch.setattr(datasets, "DATASETS", {**datasets.DATASETS, "iris": iris})
    schema = datasets_schema(STATIC_DATASETS_SCHEMA)
    config = yaml.safe_load((REPO / "config" / "datasets.yaml").read_text())
    with pytest.raises(ConfigError, match="iris"):
        validate_with_defaults(config, schema)
    config["data"]["datasets"]["iris"] = {"files": [{"name": "iris.data", "url": "https://example.invalid/iris.data",
                                                     "sha256": "0" * 64}]}
    config["data"]["variants"]["iris_all"] = {"datasets": ["iris"], "preprocess": {"iris": {"n_samples": 10}}}
    validate_with_defaults(config, schema)
    assert config["data"]["datasets"]["iris"]["n_samples"] == 150
    # an override holds only what it changes: no defaults filled in
    assert config["data"]["variants"]["coupon_drop"]["preprocess"]["coupon"] == {"missing": "drop"}


@pytest.mark.parametrize("preprocess, bad", [({"coupon": {"missng": "drop"}}, "missng"),
                                             ({"mnist": {"block": 2}}, "mnist")])
def test_a_variant_overrides_only_the_options_of_a_plain_file_dataset(preprocess, bad):
    config = yaml.safe_load((REPO / "config" / "datasets.yaml").read_text())
    config["data"]["variants"]["coupon_drop"]["preprocess"] = preprocess
    with pytest.raises(ConfigError, match=bad):
        validate_with_defaults(config, datasets_schema(STATIC_DATASETS_SCHEMA))


@pytest.mark.parametrize("spec", DECLARED_DATASETS, ids=lambda spec: spec.name)
def test_each_transform_takes_its_datasets_options(spec):
    """An option the transform does not take (a misspelt one) would be a TypeError
    at the first preprocess job; here it fails at once."""
    transform = named_function(spec.transform)
    data = ("images", "labels") if spec.reader == MNIST_ARCHIVES else ("frame",)
    inspect.signature(transform).bind(*data, seed=0, **spec.transform_options(spec.defaults()))
    assert spec.read is None or callable(named_function(spec.read))


def test_an_unknown_dataset_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown dataset 'iris'; expected one of"):
        preprocess_dataset("iris", [], {"preprocess_seed": 0})


# --- MNIST ---------------------------------------------------------------------

def test_mnist_block_means_on_a_tiny_image():
    image = np.arange(64, dtype=np.uint8).reshape(1, 8, 8)
    out = preprocess_mnist(image, np.array([3]), block=4)
    expected = image[0].astype(float).reshape(2, 4, 2, 4).mean(axis=(1, 3)).ravel() / 255
    np.testing.assert_allclose(out.X[0], expected)
    assert out.X.dtype == np.float64 and out.y.dtype == np.int64


@needs_mirror
def test_mnist_preprocessing_on_the_real_idx_files():
    images = read_idx_gz(MIRROR / "mnist" / "train-images-idx3-ubyte.gz")
    labels = read_idx_gz(MIRROR / "mnist" / "train-labels-idx1-ubyte.gz")
    out = preprocess_mnist(images, labels)
    assert out.X.shape == (60000, 49)
    assert 0.0 <= out.X.min() and out.X.max() <= 1.0
    assert np.bincount(out.y).tolist() == MNIST_TRAIN_COUNTS
    assert out.report["d"] == 49 and out.report["K"] == 10


@needs_mirror
@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None,
                    reason="torchvision not installed (pip install torch torchvision); MNIST fetch via torchvision untested")
def test_fetch_mnist_places_archives_for_torchvision(tmp_path):
    from cqb.data import fetch_mnist, load_mnist_arrays

    assert fetch_mnist(tmp_path, MNIST_FILES, mirror_dir=MIRROR, reader="torchvision") == "torchvision"
    raw = tmp_path / "MNIST" / "raw"
    for entry in MNIST_FILES:
        assert file_digest(raw / entry["name"]) == entry["sha256"]
    images, labels = load_mnist_arrays(tmp_path, reader="torchvision")
    np.testing.assert_array_equal(images, read_idx_gz(MIRROR / "mnist" / "train-images-idx3-ubyte.gz"))
    assert np.bincount(labels).tolist() == MNIST_TRAIN_COUNTS


def test_torchvision_is_not_imported_by_the_package():
    import subprocess
    import sys

    code = "import sys, cqb.data; print('torchvision' in sys.modules or 'torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# --- Heart Disease ---------------------------------------------------------------

@needs_mirror
def test_heart_drops_incomplete_rows_then_balances(heart_frame):
    out = preprocess_heart(heart_frame, n_samples=4000, seed=7)
    report = out.report
    assert report["rows_in"] == 303 and report["rows_kept"] == 297
    assert report["class_counts_before"] == {"0": 160, "1": 54, "2": 35, "3": 35, "4": 13}
    assert report["class_counts_balanced"] == {str(k): 160 for k in range(5)}
    # 5 standardised numerics + 3 binary + one-hot cp 4, restecg 3, slope 3, ca 4, thal 3.
    assert out.X.shape == (4000, 25) and out.y.shape == (4000,)
    assert not np.isnan(out.X).any()
    assert set(np.unique(out.y)) == set(range(5))


@needs_mirror
def test_heart_is_deterministic_per_seed(heart_frame):
    a = preprocess_heart(heart_frame, n_samples=500, seed=3)
    b = preprocess_heart(heart_frame, n_samples=500, seed=3)
    c = preprocess_heart(heart_frame, n_samples=500, seed=4)
    np.testing.assert_array_equal(a.X, b.X)
    assert not np.array_equal(a.X, c.X)


@needs_mirror
def test_heart_smotenc_keeps_categories_whole(heart_frame):
    out = preprocess_heart(heart_frame, n_samples=None, seed=1, oversampler="smotenc")
    onehot = out.X[:, 8:]
    assert set(np.unique(onehot)) <= {0.0, 1.0}
    np.testing.assert_array_equal(onehot.sum(axis=1), 5.0)  # one level per categorical column
    assert out.report["class_counts_after"] == {str(k): 160 for k in range(5)}


def test_heart_rejects_unknown_oversampler():
    import pandas as pd

    with pytest.raises(ValueError, match="'adasyn'"):
        preprocess_heart(pd.DataFrame(), oversampler="adasyn")


# --- Coupon ----------------------------------------------------------------------

@needs_mirror
def test_coupon_default_reading_gives_120_features(coupon_frame):
    out = preprocess_coupon(coupon_frame, missing="category", n_samples=None)
    assert out.X.shape == (12684, 120)
    assert out.report["n_numeric"] == 7 and out.report["n_one_hot"] == 113
    assert out.report["class_counts_before"] == {"0": 5474, "1": 7210}
    sampled = preprocess_coupon(coupon_frame, n_samples=4000, seed=5)
    assert sampled.X.shape == (4000, 120) and set(np.unique(sampled.y)) == {0, 1}


@needs_mirror
def test_coupon_drop_reading_keeps_12079_rows(coupon_frame):
    out = preprocess_coupon(coupon_frame, missing="drop", n_samples=None)
    assert out.report["rows_kept"] == 12079
    assert out.X.shape == (12079, 109)
    assert not any(name.startswith("car_") for name in out.feature_names)


def test_coupon_rejects_unknown_missing_mode():
    import pandas as pd

    with pytest.raises(ValueError, match="'impute'"):
        preprocess_coupon(pd.DataFrame(), missing="impute")


@needs_mirror
def test_preprocess_dataset_records_input_checksums():
    out = preprocess_dataset("heart_disease", [HEART_FILE], {"preprocess_seed": 1, "n_samples": 100})
    assert out.report["input_sha256"] == {"processed.cleveland.data": HEART_SHA256}
    assert out.report["preprocess_seed"] == 1


# --- semi-synthetic instance ---------------------------------------------------------

def test_pool_instance_recovers_a_planted_model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4))
    planted = np.array([[3.0, 0, 0, 0], [0, 3.0, 0, 0], [0, 0, 3.0, 0]])
    y = np.argmax(X @ planted.T + rng.gumbel(size=(3000, 3)), axis=1)
    pool = build_pool_instance(X, y)
    assert pool.contexts.shape == (3000, 4) and pool.theta.shape == (3, 4)
    assert np.isclose(np.linalg.norm(pool.contexts, axis=1).max(), 1.0)
    info = pool.report["instance"]
    assert info["label_accuracy"] > 0.6 > info["chance_majority"]
    assert info["kappa_measured"] >= 4.0 and info["K"] == 3


@needs_mirror
@pytest.mark.parametrize("dataset", ["heart_disease", "coupon"])
def test_theta_reproduces_labels_better_than_chance(dataset):
    path = HEART_FILE if dataset == "heart_disease" else COUPON_FILE
    processed = preprocess_dataset(dataset, [path], {"preprocess_seed": 2, "n_samples": 4000})
    pool = build_pool_instance(processed.X, processed.y)
    info = pool.report["instance"]
    assert info["label_accuracy"] > info["chance_majority"] + 0.05
    assert np.linalg.norm(pool.contexts, axis=1).max() == pytest.approx(1.0)
    assert 0.0 < info["best_rate_min"] <= info["mean_best_rate"] < 1.0
    assert "arrival_rate" not in info  # λ is the experiment's, not the pool's


def test_pool_file_round_trip_is_atomic(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3))
    y = (X[:, 0] > 0).astype(int)
    pool = build_pool_instance(X, y)
    path = tmp_path / "pool" / "instance.npz"
    save_pool(path, pool.contexts, pool.theta, pool.labels, pool.report)
    assert [p.name for p in path.parent.iterdir()] == ["instance.npz"]
    loaded = load_pool(path)
    np.testing.assert_array_equal(loaded.contexts, pool.contexts)
    np.testing.assert_array_equal(loaded.theta, pool.theta)
    np.testing.assert_array_equal(loaded.labels, pool.labels)
    assert loaded.labels.dtype == np.int64 and loaded.contexts.dtype == np.float64
    assert loaded.report == json.loads(json.dumps(pool.report))


def test_save_pool_refuses_contexts_outside_the_unit_ball(tmp_path):
    with pytest.raises(ValueError, match="row norm"):
        save_pool(tmp_path / "bad.npz", np.ones((2, 2)), np.zeros((1, 2)), np.zeros(2), {})
    assert not (tmp_path / "bad.npz").exists()


def test_labels_must_be_consecutive_integers():
    with pytest.raises(ValueError, match=r"0..K-1"):
        build_pool_instance(np.eye(3), np.array([0, 2, 2]))
