"""The suite's own scheduling: the long files start first (tests/conftest.py)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import conftest

TESTS = Path(__file__).resolve().parent
# a file with a whole-file or per-test slow marker
SLOW_MARK = re.compile(r"pytest\.mark\.slow\b")


def test_every_slow_file_is_ranked_and_every_ranked_file_exists():
    slow = {path.name for path in TESTS.glob("test_*.py") if SLOW_MARK.search(path.read_text())}
    ranked = set(conftest.LONGEST_FILES_FIRST)
    assert slow - ranked == set(), "slow test files missing from conftest.LONGEST_FILES_FIRST"
    assert all((TESTS / name).is_file() for name in ranked), ranked
    assert len(ranked) == len(conftest.LONGEST_FILES_FIRST)


def item(name: str, test: str) -> SimpleNamespace:
    return SimpleNamespace(path=TESTS / name, nodeid=f"tests/{name}::{test}")


def test_the_ranked_files_come_first_in_rank_order_and_the_rest_keep_theirs():
    first, second = conftest.LONGEST_FILES_FIRST[:2]
    elsewhere = SimpleNamespace(path=TESTS.parent / "bench" / "tests" / first, nodeid=f"bench/tests/{first}::w")
    items = [item("test_a.py", "one"), item(second, "x"), elsewhere, item("test_b.py", "two"),
             item(first, "y"), item("test_a.py", "three"), item(second, "z")]
    conftest.pytest_collection_modifyitems(None, None, items)
    assert [i.nodeid for i in items] == [
        f"tests/{first}::y", f"tests/{second}::x", f"tests/{second}::z",
        "tests/test_a.py::one", f"bench/tests/{first}::w", "tests/test_b.py::two", "tests/test_a.py::three"]


def test_xdist_keeps_the_collection_order(pytestconfig):
    # without this, xdist sorts the files by number of tests and the long,
    # few-test files start last
    assert "--no-loadscope-reorder" in pytestconfig.getini("addopts")
