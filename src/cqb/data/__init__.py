"""Real datasets (declared in cqb.datasets.registry): checksum-verified fetching,
preprocessing, semi-synthetic pool instances.

torchvision is used only by `fetch_mnist` / `load_mnist_arrays` (imported inside them), and only
where it is installed: without it they read MNIST with numpy (`mnist_reader`).
"""

from cqb.data.fetch import (
    ChecksumError,
    DownloadError,
    FetchError,
    fetch_file,
    fetch_mnist,
    file_digest,
    file_sources,
    load_mnist_arrays,
    mirror_file_path,
    mnist_reader,
    read_idx,
)
from cqb.data.preprocess import (
    Processed,
    preprocess_coupon,
    preprocess_dataset,
    preprocess_heart,
    preprocess_mnist,
    read_coupon,
    read_heart,
    read_idx_gz,
)
from cqb.data.semisynthetic import (
    PoolInstance,
    build_pool_instance,
    load_features,
    load_pool,
    save_features,
    save_pool,
)

__all__ = [
    "ChecksumError", "DownloadError", "FetchError", "fetch_file", "fetch_mnist", "file_digest",
    "load_mnist_arrays", "mirror_file_path", "mnist_reader", "read_idx",
    "Processed", "preprocess_coupon", "preprocess_dataset", "preprocess_heart",
    "preprocess_mnist", "read_coupon", "read_heart", "read_idx_gz",
    "PoolInstance", "build_pool_instance", "load_features", "load_pool", "save_features", "save_pool",
]
