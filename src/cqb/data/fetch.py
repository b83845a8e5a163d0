"""Fetch dataset files: copy from an offline mirror or download, always checksum-verified.

Every file lands at its destination only after its SHA-256 matched: the bytes go
to a temporary file in the destination folder first and are renamed into place
(atomic on POSIX), so an interrupted or corrupt fetch never leaves a file that
looks finished.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import urllib.request
from pathlib import Path

from ..io import atomic_write

# torchvision looks for the archives under <root>/MNIST/raw/.
MNIST_RAW_SUBDIR = Path("MNIST") / "raw"

_CHUNK_BYTES = 1 << 20
_DOWNLOAD_TIMEOUT_SECONDS = 60


class ChecksumError(ValueError):
    """A fetched file's digest differs from the one pinned in the config."""

    def __init__(self, file: str | os.PathLike, expected: str, actual: str, algorithm: str = "sha256"):
        self.file = str(file)
        self.expected = expected
        self.actual = actual
        self.algorithm = algorithm
        super().__init__(
            f"{algorithm} mismatch for {self.file}: expected {expected}, got {actual}"
        )


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in chunks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _copy_source_to(handle, url: str, mirror_path: Path | None) -> None:
    if mirror_path is not None:
        with open(mirror_path, "rb") as source:
            shutil.copyfileobj(source, handle, _CHUNK_BYTES)
        return
    request = urllib.request.Request(url, headers={"User-Agent": "cqb-data-fetch"})
    with urllib.request.urlopen(request, timeout=_DOWNLOAD_TIMEOUT_SECONDS) as response:
        shutil.copyfileobj(response, handle, _CHUNK_BYTES)


def fetch_file(
    url: str,
    dest: str | os.PathLike,
    sha256: str,
    mirror_path: str | os.PathLike | None = None,
) -> Path:
    """Place the file at `dest`, verified against `sha256`, and return `dest`.

    Copies from `mirror_path` when it is given and exists; otherwise downloads
    `url`. Raises ChecksumError (nothing left at `dest`) when the digest differs.
    """
    dest = Path(dest)
    expected = sha256.strip().lower()
    if len(expected) != 64 or any(c not in "0123456789abcdef" for c in expected):
        raise ValueError(f"not a SHA-256 hex digest for {dest.name}: {sha256!r}")
    mirror = Path(mirror_path) if mirror_path is not None else None
    if mirror is not None and not mirror.is_file():
        mirror = None  # mirror configured but this file is absent: fall back to the URL
    source = str(mirror) if mirror is not None else url

    with atomic_write(dest, suffix=".part") as temporary:
        with open(temporary, "wb") as handle:
            _copy_source_to(handle, url, mirror)
        actual = file_digest(temporary)
        if actual != expected:
            raise ChecksumError(f"{dest.name} (from {source})", expected, actual)
    return dest


def mirror_file_path(mirror_dir: str | os.PathLike | None, relative: str) -> Path | None:
    """The mirror copy of a file, or None when no mirror folder is configured or present."""
    if mirror_dir is None or str(mirror_dir) == "":
        return None
    mirror_dir = Path(mirror_dir)
    if not mirror_dir.is_dir():
        return None
    return mirror_dir / relative


# The canonical MNIST archives (torchvision's mirror); config/datasets.yaml pins the same values.
MNIST_URL_BASE = "https://ossci-datasets.s3.amazonaws.com/mnist/"
MNIST_FILES = [
    {"name": "train-images-idx3-ubyte.gz", "mirror": "mnist/train-images-idx3-ubyte.gz",
     "sha256": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
     "md5": "f68b3c2dcbeaaa9fbdd348bbdeb94873"},
    {"name": "train-labels-idx1-ubyte.gz", "mirror": "mnist/train-labels-idx1-ubyte.gz",
     "sha256": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
     "md5": "d53e105ee54ea40749a09fcbcd1e9432"},
    {"name": "t10k-images-idx3-ubyte.gz", "mirror": "mnist/t10k-images-idx3-ubyte.gz",
     "sha256": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
     "md5": "9fb629c4189551a2d022fa330f9573f3"},
    {"name": "t10k-labels-idx1-ubyte.gz", "mirror": "mnist/t10k-labels-idx1-ubyte.gz",
     "sha256": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
     "md5": "ec29112dd5afa0611ce80d1b7f02629c"},
]
for _entry in MNIST_FILES:
    _entry["url"] = MNIST_URL_BASE + _entry["name"]


def fetch_mnist(
    root: str | os.PathLike,
    mirror_dir: str | os.PathLike | None = None,
    files: list[dict] | None = None,
):
    """Place the four MNIST archives where torchvision expects them and let it verify and parse them.

    `files` are entries with keys `name`, `url`, `sha256` and `mirror` (the
    path inside the mirror folder); default MNIST_FILES. Each archive is
    fetched (mirror copy or download, SHA-256 checked) into `root/MNIST/raw/`
    and checked against the MD5 torchvision pins. Then
    torchvision.datasets.MNIST(root, download=True) finds every archive
    present and intact, so it does not touch the network: it only extracts
    and parses them. Returns the training-set torchvision dataset.
    """
    # torchvision is an optional, heavy dependency: import only here.
    from torchvision.datasets import MNIST
    from torchvision.datasets.utils import check_integrity

    files = MNIST_FILES if files is None else files
    pinned_md5 = dict(MNIST.resources)
    raw_dir = Path(root) / MNIST_RAW_SUBDIR
    for entry in files:
        dest = fetch_file(
            entry["url"],
            raw_dir / entry["name"],
            entry["sha256"],
            mirror_path=mirror_file_path(mirror_dir, entry.get("mirror", entry["name"])),
        )
        md5 = pinned_md5.get(entry["name"])
        if md5 is None:
            raise ValueError(f"{entry['name']} is not one of torchvision's MNIST archives {sorted(pinned_md5)}")
        # Without this check torchvision would try to re-download a file whose MD5 differs.
        if not check_integrity(str(dest), md5):
            actual = file_digest(dest, "md5")
            os.unlink(dest)
            raise ChecksumError(dest.name, md5, actual, algorithm="md5")
        # Drop a stale extraction so torchvision re-extracts from the archive just verified.
        extracted = dest.with_suffix("")
        if extracted.exists():
            extracted.unlink()
    MNIST(str(root), train=False, download=True)
    return MNIST(str(root), train=True, download=True)


def load_mnist_arrays(root: str | os.PathLike, train: bool = True):
    """Images (n×28×28 uint8) and labels (n int64) of an already-fetched MNIST via torchvision."""
    from torchvision.datasets import MNIST

    dataset = MNIST(str(root), train=train, download=False)
    images = dataset.data.numpy().astype("uint8", copy=False)
    labels = dataset.targets.numpy().astype("int64", copy=False)
    return images, labels
