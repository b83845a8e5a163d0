"""MNIST's two readers: torchvision (the default install) and numpy (the light
install, without PyTorch). Both start from the same SHA-256-checked archives and
give the same arrays; the pipeline's MNIST part runs with torch unimportable and
says once which reader it used."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import REPO, copy_workflow
from cqb.data import ChecksumError, fetch_mnist, load_features, load_mnist_arrays, mnist_reader, preprocess_mnist, read_idx

MIRROR = Path(os.environ.get("CQB_DATA_MIRROR", REPO.parent / "shared" / "datasets"))
MNIST_FILES = yaml.safe_load((REPO / "config" / "datasets.yaml").read_text())["data"]["datasets"]["mnist"]["files"]
needs_mirror = pytest.mark.skipif(not MIRROR.is_dir(), reason=f"offline dataset mirror {MIRROR} not present")
needs_torchvision = pytest.mark.skipif(mnist_reader() != "torchvision", reason="torchvision not installed")

# On PYTHONPATH: every Python started with it (Snakemake, its jobs) finds no torch.
NO_TORCH = textwrap.dedent("""\
    import sys


    class NoTorch:
        \"\"\"Imports of torch and torchvision fail, as where they are not installed.\"\"\"

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "torchvision"):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
            return None


    sys.meta_path.insert(0, NoTorch())
    """)


def without_torch(tmp_path: Path) -> dict:
    """An environment whose Pythons cannot import torch or torchvision."""
    folder = tmp_path / "no_torch"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(NO_TORCH)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}


def test_without_torch_the_reader_is_numpy(tmp_path):
    code = "from cqb.data import mnist_reader; print(mnist_reader())"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env=without_torch(tmp_path))
    assert result.stdout.strip() == "numpy"


@needs_mirror
@needs_torchvision
def test_both_readers_give_identical_arrays_on_the_mirrors_files(tmp_path):
    roots = {}
    for reader in ("torchvision", "numpy"):
        roots[reader] = tmp_path / reader
        assert fetch_mnist(roots[reader], MNIST_FILES, mirror_dir=MIRROR, reader=reader) == reader
    # the same extracted files, byte for byte (a switch of install reruns nothing) ...
    for entry in MNIST_FILES:
        extracted = Path("MNIST", "raw", entry["name"][: -len(".gz")])
        assert (roots["numpy"] / extracted).read_bytes() == (roots["torchvision"] / extracted).read_bytes()
    # ... and the same arrays, dtypes and shapes, both splits
    for train in (True, False):
        by_torchvision = load_mnist_arrays(roots["torchvision"], train=train, reader="torchvision")
        by_numpy = load_mnist_arrays(roots["numpy"], train=train, reader="numpy")
        for ours, theirs in zip(by_numpy, by_torchvision):
            assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
            np.testing.assert_array_equal(ours, theirs)
        assert by_numpy[0].shape == ((60000 if train else 10000), 28, 28)


@needs_mirror
def test_the_numpy_reader_keeps_the_sha256_check(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "mnist").mkdir(parents=True)
    for entry in MNIST_FILES:
        (mirror / entry["mirror"]).write_bytes((MIRROR / entry["mirror"]).read_bytes())
    damaged = mirror / MNIST_FILES[1]["mirror"]
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte changed
    damaged.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match=MNIST_FILES[1]["name"]):
        fetch_mnist(tmp_path / "root", MNIST_FILES, mirror_dir=mirror, reader="numpy")
    raw = tmp_path / "root" / "MNIST" / "raw"
    assert not (raw / MNIST_FILES[1]["name"]).exists() and not (raw / MNIST_FILES[1]["name"][:-3]).exists()


def test_read_idx_refuses_a_file_that_is_not_idx(tmp_path):
    bad = tmp_path / "labels-idx1-ubyte"
    bad.write_bytes(b"\x00\x00\x0d\x01" + (3).to_bytes(4, "big") + b"abc")  # magic: float IDX
    with pytest.raises(ValueError, match="not an unsigned-byte IDX file"):
        read_idx(bad)
    bad.write_bytes(b"\x00\x00\x08\x01" + (4).to_bytes(4, "big") + b"abc")  # one value short
    with pytest.raises(ValueError, match="header says shape"):
        read_idx(bad)


@pytest.mark.slow
@needs_mirror
def test_the_pipelines_mnist_part_runs_without_torch(tmp_path):
    copy = copy_workflow(tmp_path / "repo")
    targets = ["data/processed/mnist/instance.npz", "data/processed/mnist/report.json"]
    process = subprocess.run(
        [sys.executable, "-m", "snakemake", *targets, "--cores", "2", "--configfile", "config/smoke.yaml",
         "--config", f"data={{mirror: {MIRROR}}}"],
        cwd=copy, capture_output=True, text=True, timeout=1200, env=without_torch(tmp_path))
    output = process.stdout + process.stderr
    assert process.returncode == 0, output[-4000:]
    assert output.count("MNIST read with") == 1 and "MNIST read with numpy" in output, output[-4000:]
    # the features are the preprocessing of the mirror's archives, read by numpy
    X, y, _, _ = load_features(copy / "data/processed/mnist/features.npz")
    expected = preprocess_mnist(read_idx(MIRROR / "mnist/train-images-idx3-ubyte.gz"),
                                read_idx(MIRROR / "mnist/train-labels-idx1-ubyte.gz"))
    np.testing.assert_array_equal(X, expected.X)
    np.testing.assert_array_equal(y, expected.y)
