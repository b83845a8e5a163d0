"""The data rules, included from a throwaway Snakefile the way the top-level Snakefile includes them."""

from __future__ import annotations

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
MIRROR = Path(os.environ.get("CQB_DATA_MIRROR", "/work/shared/datasets"))
SNAKEMAKE = shutil.which("snakemake") or str(Path(sys.executable).with_name("snakemake"))

pytestmark = [
    pytest.mark.skipif(not MIRROR.is_dir(), reason=f"offline dataset mirror {MIRROR} not present"),
    pytest.mark.skipif(not Path(SNAKEMAKE).exists(), reason="snakemake not installed"),
]


def _snakefile(tmp_path: Path, targets: list[str]) -> Path:
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(
        f'configfile: "{REPO}/config/datasets.yaml"\n'
        f'config["data"]["mirror"] = "{MIRROR}"\n'
        f'include: "{REPO}/workflow/rules/data.smk"\n\n'
        "rule all:\n"
        f"    input: {targets!r}\n"
    )
    return snakefile


def _run(tmp_path: Path, targets: list[str], *extra: str) -> subprocess.CompletedProcess:
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    return subprocess.run(
        [SNAKEMAKE, "-s", str(_snakefile(tmp_path, targets)), "--directory", str(workdir),
         "--cores", "1", *extra],
        capture_output=True, text=True,
    )


def test_dry_run_plans_every_dataset(tmp_path):
    targets = [f"data/processed/{d}/instance.npz" for d in ("mnist", "heart_disease", "coupon")]
    result = _run(tmp_path, targets, "-n")
    assert result.returncode == 0, result.stdout + result.stderr
    for rule in ("download_mnist", "download_heart_disease", "download_coupon",
                 "preprocess_mnist", "preprocess_heart_disease", "preprocess_coupon", "build_instance"):
        assert rule in result.stdout


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
