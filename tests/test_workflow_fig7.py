"""Figure 7 end to end on config/smoke.yaml: the session's shared smoke run
(conftest.shared_smoke_run), which builds the real-data pools and their
variants (slow; needs the dataset mirror)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import CAN_RUN_REAL_DATA, shared_smoke_run
from cqb.data import load_pool

pytestmark = pytest.mark.slow

if not CAN_RUN_REAL_DATA:
    pytest.skip("needs the dataset mirror and torchvision", allow_module_level=True)


@pytest.fixture(scope="module")
def fig7_smoke(tmp_path_factory):
    workdir, _ = shared_smoke_run(tmp_path_factory)  # its targets include fig7 and fig4_assumptions
    return workdir


def test_fig7_smoke_builds_grid_table_and_summary(fig7_smoke):
    figures = fig7_smoke / "results" / "smoke" / "figures"
    for name in ("fig7.pdf", "fig7.png", "fig7.tsv", "fig7.md", "fig4_assumptions.png"):
        assert (figures / name).stat().st_size > 0, name
    table = pd.read_csv(figures / "fig7.tsv", sep="\t")
    cells = table.drop_duplicates(["dataset", "column"])
    assert {"default", "assumptions", "sqrt_d", "C0p1", "C10", "intercept", "standardised",
            "T16000"} <= set(cells["column"])
    # the longer horizon runs at the smoke's T for that column, not the default cells' T
    longer, default = cells[cells["column"] == "T16000"], cells[cells["column"] == "default"]
    assert len(longer) == 3 and (longer["horizon"] == 600).all() and (default["horizon"] == 300).all()
    assert set(cells["verdict"]) <= {"holds", "does not hold", "inconclusive"}
    # the construction meeting the assumptions has slack ≥ 0.05 on every dataset
    assumptions = cells[cells["column"] == "assumptions"]
    assert len(assumptions) == 3 and (assumptions["slack"] >= 0.05 - 1e-12).all()
    summary = (figures / "fig7.md").read_text()
    assert f"Of {len(cells)} (dataset, construction) cells run" in summary


def test_variant_pools_leave_the_default_pools_untouched(fig7_smoke):
    processed = fig7_smoke / "data" / "processed"
    default = load_pool(processed / "mnist" / "instance.npz")
    assert default.report["instance"]["C"] == 1.0 and "variant" not in default.report["instance"]
    ridge = load_pool(processed / "variants" / "mnist-C0p01" / "instance.npz")
    assert ridge.report["instance"]["variant"] == "C0p01" and ridge.report["instance"]["C"] == 0.01
    assert np.array_equal(ridge.contexts, default.contexts)
    grouped = json.loads((processed / "variants" / "mnist-servers5" / "report.json").read_text())
    assert grouped["instance"]["K"] == 5
    drop = json.loads((processed / "variants" / "coupon-coupon_drop" / "report.json").read_text())
    assert drop["instance"]["d"] == 109
    intercept = json.loads((processed / "variants" / "heart_disease-intercept" / "report.json").read_text())
    assert intercept["instance"]["d"] == default_heart_dim(processed) + 1  # the constant feature
    standardised = json.loads((processed / "variants" / "coupon-standardised" / "report.json").read_text())
    assert standardised["instance"]["scaling"] == "standardise"


def default_heart_dim(processed):
    return json.loads((processed / "heart_disease" / "report.json").read_text())["instance"]["d"]
