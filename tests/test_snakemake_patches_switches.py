"""The execution switches that patch Snakemake (cqb.snakemake_patches.switches):
each patch stands down with one line on a Snakemake whose internals differ,
a switch turned off leaves its patch untried, and every switch of the
config's execution block is described in the schema and named in the docs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from cqb.snakemake_patches import switches
from cqb.snakemake_patches.switches import PATCHES, apply_patches, stand_down_notice

REPO = Path(__file__).resolve().parents[1]
# The execution switches that patch nothing of Snakemake's
NOT_PATCHES = {"run_server", "run_client", "worker_runs", "tune_collector", "simulate_in_sh"}


class OtherInternals:
    """A Snakemake class with none of the methods and properties the patches replace."""


def on_other_internals(switch, patch, monkeypatch):
    """``patch`` as it runs on a Snakemake whose internals are not those it was written for."""
    if switch == "memoize_signatures":  # patches a function of snakemake.common, not a class
        common = pytest.importorskip("snakemake.common")
        monkeypatch.setattr(common, "get_function_params", lambda func: [])
        return patch
    return lambda: patch(OtherInternals)


@pytest.mark.parametrize("switch, patch, patched, what", PATCHES, ids=[row[0] for row in PATCHES])
def test_each_patch_stands_down_with_one_line_on_other_internals(switch, patch, patched, what, monkeypatch):
    stream = io.StringIO()
    row = (switch, on_other_internals(switch, patch, monkeypatch), patched, what)
    assert apply_patches({switch: True}, [row], stream) == [switch]
    assert stream.getvalue() == stand_down_notice(patched, what) + "\n"
    assert patched in stream.getvalue() and "left as it is" in stream.getvalue()


def test_a_switch_turned_off_leaves_its_patch_untried():
    tried = []
    stream = io.StringIO()
    assert apply_patches({"x": False}, [("x", lambda: tried.append(1) or False, "Job", "x")], stream) == []
    assert tried == [] and stream.getvalue() == ""


def test_an_installed_patch_prints_nothing():
    stream = io.StringIO()
    assert apply_patches({"x": True}, [("x", lambda: True, "Job", "x")], stream) == []
    assert stream.getvalue() == ""


def test_every_execution_switch_is_described_and_named_in_the_docs():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    execution = schema["properties"]["execution"]["properties"]
    assert set(execution) == {row[0] for row in switches.PATCHES} | NOT_PATCHES
    pipeline_doc = (REPO / "docs" / "pipeline.md").read_text()
    for switch, entry in execution.items():
        assert entry.get("description"), switch
        assert switch in pipeline_doc, f"docs/pipeline.md does not name execution.{switch}"
