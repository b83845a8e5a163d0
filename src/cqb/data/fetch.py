"""Fetch dataset files: copy from an offline mirror or download, always checksum-verified.

Every file lands at its destination only after its SHA-256 matched: the bytes go
to a temporary file in the destination folder first and are renamed into place
(atomic on POSIX), so an interrupted or corrupt fetch never leaves a file that
looks finished.
"""

from __future__ import annotations

import gzip
import http.client
import os
import shutil
import urllib.request
from pathlib import Path

import numpy as np

from ..io.files import CHUNK_BYTES, file_digest  # noqa: F401 (file_digest: part of this module's API)
from ..sim.runfile import atomic_write

# torchvision looks for the archives under <root>/MNIST/raw/ (the numpy reader too).
MNIST_RAW_SUBDIR = Path("MNIST") / "raw"
# Who extracts and reads MNIST's IDX files, after the same SHA-256 check: torchvision
# (the default install) or numpy (the light install, requirements-light.txt).
MNIST_READERS = ("torchvision", "numpy")

_DOWNLOAD_TIMEOUT_SECONDS = 60


class FetchError(Exception):
    """A dataset file could not be placed; the message is one line naming the file."""


class DownloadError(FetchError, OSError):
    """The download failed (no network, unknown host, refused, cut off, HTTP error)."""

    def __init__(self, file: str, url: str, reason: object, mirror_path: Path | None = None):
        self.file = file
        self.url = url
        self.reason = reason
        absent = f"; no mirror copy at {mirror_path}" if mirror_path is not None else ""
        super().__init__(
            f"cannot download {file} from {url} ({reason}){absent}. Without network, point "
            f"data.mirror at a folder holding the dataset files (layout in docs/data.md), e.g. "
            f"snakemake --config data='{{mirror: /path/to/datasets}}'"
        )


class ChecksumError(FetchError, ValueError):
    """A fetched file's digest differs from the one pinned in the config."""

    def __init__(self, file: str | os.PathLike, expected: str, actual: str, algorithm: str = "sha256"):
        self.file = str(file)
        self.expected = expected
        self.actual = actual
        self.algorithm = algorithm
        super().__init__(
            f"{algorithm} mismatch for {self.file}: expected {expected}, got {actual}"
        )


def _copy_source_to(handle, url: str, mirror_path: Path | None) -> None:
    if mirror_path is not None:
        with open(mirror_path, "rb") as source:
            shutil.copyfileobj(source, handle, CHUNK_BYTES)
        return
    request = urllib.request.Request(url, headers={"User-Agent": "cqb-data-fetch"})
    with urllib.request.urlopen(request, timeout=_DOWNLOAD_TIMEOUT_SECONDS) as response:
        shutil.copyfileobj(response, handle, CHUNK_BYTES)


def _network_reason(error: Exception) -> str:
    # URLError wraps the socket error (e.g. gaierror "Name or service not known") in .reason.
    reason = getattr(error, "reason", None) or error
    return " ".join(str(reason).split()) or type(reason).__name__


def fetch_file(
    url: str,
    dest: str | os.PathLike,
    sha256: str,
    mirror_path: str | os.PathLike | None = None,
) -> Path:
    """Place the file at `dest`, verified against `sha256`, and return `dest`.

    Copies from `mirror_path` when it is given and exists; otherwise downloads
    `url`. Raises DownloadError when the download fails and ChecksumError when
    the digest differs; both are FetchErrors, and both leave nothing at `dest`.
    """
    dest = Path(dest)
    expected = sha256.strip().lower()
    if len(expected) != 64 or any(c not in "0123456789abcdef" for c in expected):
        raise ValueError(f"not a SHA-256 hex digest for {dest.name}: {sha256!r}")
    mirror = Path(mirror_path) if mirror_path is not None else None
    absent_mirror = None
    if mirror is not None and not mirror.is_file():
        absent_mirror, mirror = mirror, None  # mirror configured but this file is absent: use the URL
    source = str(mirror) if mirror is not None else url

    with atomic_write(dest, suffix=".part") as temporary:
        with open(temporary, "wb") as handle:
            try:
                _copy_source_to(handle, url, mirror)
            except (OSError, http.client.HTTPException) as error:
                if mirror is not None:
                    raise
                raise DownloadError(dest.name, url, _network_reason(error), absent_mirror) from error
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


def file_sources(data_config: dict, dataset: str, checksums: dict[str, str]) -> tuple[list[dict], str | None]:
    """The config entries (url, mirror path, sha256) of the files named in
    `checksums` (name: SHA-256, in the order of the rule's outputs), and the
    mirror folder (None for none), from the validated `data` config. The
    download rules pass only the checksums as params, so where a file comes
    from is no rerun trigger; a checksum that differs from the config's is a
    stale job (ValueError naming the file)."""
    entries = {entry["name"]: entry for entry in data_config["datasets"][dataset]["files"]}
    chosen = []
    for name, sha256 in checksums.items():
        if name not in entries or entries[name]["sha256"] != sha256:
            raise ValueError(f"{dataset}/{name}: no config entry with sha256 {sha256}")
        chosen.append(entries[name])
    return chosen, data_config.get("mirror") or None


def mnist_reader() -> str:
    """The MNIST reader this environment has: torchvision where PyTorch is
    installed (the default install), else numpy (the light install, without it)."""
    try:
        import torchvision.datasets  # noqa: F401  (heavy: imported only here and by the readers below)
    except ImportError:
        return "numpy"
    return "torchvision"


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """An IDX file (the MNIST format; gzipped or not) of unsigned bytes, read with numpy only."""
    with open(path, "rb") as handle:
        raw = handle.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file (magic {raw[:4].hex()})")
    n_dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(n_dims))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * n_dims)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says shape {shape}, file holds {data.size} values")
    return data.reshape(shape).copy()  # writable, as torchvision's arrays are


def _extract(archive: Path) -> Path:
    """Gunzip `archive` beside it (the name without .gz, as torchvision extracts it), atomically."""
    extracted = archive.with_suffix("")
    with atomic_write(extracted, suffix=".part") as temporary:
        with gzip.open(archive, "rb") as source, open(temporary, "wb") as target:
            shutil.copyfileobj(source, target, CHUNK_BYTES)
        read_idx(temporary)  # a well-formed IDX file, or ValueError naming it
    return extracted


def fetch_mnist(
    root: str | os.PathLike,
    files: list[dict],
    mirror_dir: str | os.PathLike | None = None,
    reader: str | None = None,
) -> str:
    """Place the four MNIST archives under `root/MNIST/raw/` and extract them; returns the reader used.

    `files` are the config entries (config/datasets.yaml, data.datasets.mnist.files)
    with keys `name`, `url`, `sha256` and `mirror` (the path inside the mirror
    folder). Each archive is fetched (mirror copy or download, SHA-256 checked).
    `reader` (default: `mnist_reader()`) extracts them: "torchvision" checks
    each against the MD5 torchvision pins, then torchvision.datasets.MNIST(root,
    download=True) finds every archive present and intact, so it does not touch
    the network: it only extracts and parses them. "numpy" gunzips them beside
    the archives (the same bytes) and checks each IDX header.
    """
    reader = reader or mnist_reader()
    if reader not in MNIST_READERS:
        raise ValueError(f"unknown MNIST reader {reader!r}; expected one of {MNIST_READERS}")
    raw_dir = Path(root) / MNIST_RAW_SUBDIR
    archives = []
    for entry in files:
        dest = fetch_file(
            entry["url"],
            raw_dir / entry["name"],
            entry["sha256"],
            mirror_path=mirror_file_path(mirror_dir, entry.get("mirror", entry["name"])),
        )
        # Drop a stale extraction so the reader re-extracts from the archive just verified.
        if dest.with_suffix("").exists():
            dest.with_suffix("").unlink()
        archives.append(dest)
    if reader == "numpy":
        for archive in archives:
            _extract(archive)
        return reader
    # torchvision is an optional, heavy dependency: import only here.
    from torchvision.datasets import MNIST
    from torchvision.datasets.utils import check_integrity

    pinned_md5 = dict(MNIST.resources)
    for dest in archives:
        md5 = pinned_md5.get(dest.name)
        if md5 is None:
            raise ValueError(f"{dest.name} is not one of torchvision's MNIST archives {sorted(pinned_md5)}")
        # Without this check torchvision would try to re-download a file whose MD5 differs.
        if not check_integrity(str(dest), md5):
            actual = file_digest(dest, "md5")
            os.unlink(dest)
            raise ChecksumError(dest.name, md5, actual, algorithm="md5")
    MNIST(str(root), train=False, download=True)
    MNIST(str(root), train=True, download=True)
    return reader


def load_mnist_arrays(root: str | os.PathLike, train: bool = True, reader: str | None = None):
    """Images (n×28×28 uint8) and labels (n int64) of an already-fetched MNIST,
    read by `reader` (default: `mnist_reader()`) from the extracted IDX files."""
    reader = reader or mnist_reader()
    if reader == "numpy":
        raw_dir = Path(root) / MNIST_RAW_SUBDIR
        split = "train" if train else "t10k"
        images = read_idx(raw_dir / f"{split}-images-idx3-ubyte")
        labels = read_idx(raw_dir / f"{split}-labels-idx1-ubyte").astype("int64")
        return images, labels
    if reader != "torchvision":
        raise ValueError(f"unknown MNIST reader {reader!r}; expected one of {MNIST_READERS}")
    from torchvision.datasets import MNIST

    dataset = MNIST(str(root), train=train, download=False)
    images = dataset.data.numpy().astype("uint8", copy=False)
    labels = dataset.targets.numpy().astype("int64", copy=False)
    return images, labels
