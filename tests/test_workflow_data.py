"""The data rules, included from a throwaway Snakefile the way the top-level Snakefile includes them."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cqb.data import load_pool

REPO = Path(__file__).resolve().parents[1]
MIRROR = Path(os.environ.get("CQB_DATA_MIRROR", REPO.parent / "shared" / "datasets"))  # as CI lays it out
# this interpreter's Snakemake (its environment has cqb and the project's logger), else the one on PATH
SNAKEMAKE = (str(Path(sys.executable).with_name("snakemake")) if Path(sys.executable).with_name("snakemake").exists()
             else shutil.which("snakemake"))

pytestmark = [
    pytest.mark.skipif(not MIRROR.is_dir(), reason=f"offline dataset mirror {MIRROR} not present"),
    pytest.mark.skipif(not Path(SNAKEMAKE).exists(), reason="snakemake not installed"),
]


def _snakefile(tmp_path: Path, targets: list[str], config_lines: str) -> Path:
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(
        f'configfile: "{REPO}/config/datasets.yaml"\n'
        f'config["data"]["mirror"] = "{MIRROR}"\n'
        f"{config_lines}"
        f'include: "{REPO}/workflow/rules/data.smk"\n\n'
        "rule all:\n"
        f"    input: {targets!r}\n"
    )
    return snakefile


def _run(tmp_path: Path, targets: list[str], *extra: str, config_lines: str = "") -> subprocess.CompletedProcess:
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    return subprocess.run(
        [SNAKEMAKE, "-s", str(_snakefile(tmp_path, targets, config_lines)), "--directory", str(workdir),
         "--cores", "1", *extra],
        capture_output=True, text=True,
    )


COUPON_RAW = "data/raw/coupon/in-vehicle-coupon-recommendation.csv"
COUPON_ENTRY = 'config["data"]["datasets"]["coupon"]["files"][0]'
MNIST_ARCHIVE = "data/raw/mnist/MNIST/raw/train-images-idx3-ubyte.gz"


def _one_line_failure(result, tmp_path: Path, start: str) -> str:
    """The job failed with exactly one line of its own starting with `start` and no traceback."""
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.startswith(start)]
    assert len(lines) == 1, output
    raw_dir = tmp_path / "work" / "data/raw/coupon"
    assert not raw_dir.exists() or not list(raw_dir.iterdir()), f"left behind: {list(raw_dir.iterdir())}"
    return lines[0]


def test_download_without_network_fails_in_one_line(tmp_path):
    # No mirror, and a host that never resolves (.invalid, RFC 2606): the job must fail cleanly.
    url = "https://cqb-no-such-host.invalid/in-vehicle-coupon-recommendation.csv"
    config_lines = f'config["data"]["mirror"] = ""\n{COUPON_ENTRY}["url"] = "{url}"\n'
    result = _run(tmp_path, [COUPON_RAW], config_lines=config_lines)
    line = _one_line_failure(result, tmp_path, "fetch_dataset: ")
    assert "in-vehicle-coupon-recommendation.csv" in line and url in line and "data.mirror" in line


def test_checksum_mismatch_fails_in_one_line(tmp_path):
    config_lines = f'{COUPON_ENTRY}["sha256"] = "{"0" * 64}"\n'
    result = _run(tmp_path, [COUPON_RAW], config_lines=config_lines)
    line = _one_line_failure(result, tmp_path, "fetch_dataset: ")
    assert "sha256 mismatch" in line and "0" * 64 in line


def test_dry_run_plans_every_dataset(tmp_path):
    targets = [f"data/processed/{d}/instance.npz" for d in ("mnist", "heart_disease", "coupon")]
    result = _run(tmp_path, targets, "-n")
    assert result.returncode == 0, result.stdout + result.stderr
    jobs = {}
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0].isidentifier():
            jobs[parts[0]] = int(parts[1])
    # one download job per raw file (2 Heart Disease, 1 Coupon), one preprocess job per dataset
    assert jobs == {"all": 1, "build_instance": 3, "download_dataset_file": 3, "download_mnist": 1,
                    "preprocess_dataset": 2, "preprocess_mnist": 1, "total": 11}, result.stdout


@pytest.mark.slow
def test_small_datasets_build_end_to_end(tmp_path):
    targets = [f"data/processed/{d}/{f}" for d in ("heart_disease", "coupon") for f in ("instance.npz", "report.json")]
    result = _run(tmp_path, targets)
    assert result.returncode == 0, result.stdout + result.stderr
    work = tmp_path / "work"
    heart = load_pool(work / "data/processed/heart_disease/instance.npz")
    assert heart.contexts.shape == (4000, 25) and heart.theta.shape == (5, 25)
    coupon = load_pool(work / "data/processed/coupon/instance.npz")
    assert coupon.contexts.shape == (4000, 120) and coupon.theta.shape == (2, 120)
    assert np.linalg.norm(coupon.contexts, axis=1).max() == pytest.approx(1.0)
    report = json.loads((work / "data/processed/coupon/report.json").read_text())
    assert report["preprocess"]["rows_kept"] == 12684
    assert report["instance"]["label_accuracy"] > report["instance"]["chance_majority"]


def test_where_a_file_comes_from_is_no_rerun_trigger(tmp_path):
    # fetched from the mirror; then without it, and from another URL: nothing to do
    targets = [COUPON_RAW] + ([MNIST_ARCHIVE] if importlib.util.find_spec("torchvision") else [])
    result = _run(tmp_path, targets)
    assert result.returncode == 0, result.stdout + result.stderr
    elsewhere = f'config["data"]["mirror"] = ""\n{COUPON_ENTRY}["url"] = "https://example.invalid/coupon.csv"\n'
    dry = _run(tmp_path, targets, "-n", config_lines=elsewhere)
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    # while its content still is: another checksum fetches it again
    other = f'{COUPON_ENTRY}["sha256"] = "{"0" * 64}"\n'
    assert "download_dataset_file" in _run(tmp_path, [COUPON_RAW], "-n", config_lines=other).stdout
