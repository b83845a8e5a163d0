"""docs/extending.md's lists of the files a new built-in piece touches,
checked against the tree: every listed file exists, and no other source file
names a built-in policy that plays no role of its own (so no listing, colour
table or rate table elsewhere has to grow with a new policy)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cqb.sim.policies import builtin_policies

ROOT = Path(__file__).resolve().parents[1]
# The policies some code names for a role of its own: the oracle (the regret's
# reference), CQB-ε and CQB-Opt (the paper's claims are about them), Random
# (the growing-queue claim). Every other built-in must be named only by its spec.
ROLE_POLICIES = {"oracle", "cqb_eps", "cqb_opt", "random"}
SOURCE_FOLDERS = ("src", "scripts", "workflow", "bench")


def listed_files(kind: str) -> list[str]:
    text = (ROOT / "docs" / "extending.md").read_text()
    block = re.search(rf"<!-- files: {re.escape(kind)} -->(.*?)<!-- end files -->", text, re.S)
    assert block, f"docs/extending.md has no file list for {kind!r}"
    return re.findall(r"`((?:src|config|workflow|tests)/[^`]+)`", block.group(1))


def files_naming(names, root: Path = ROOT, folders=SOURCE_FOLDERS) -> set[str]:
    """The source files (tests left out) that name one of ``names`` as a string."""
    pattern = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, names)))
    found = set()
    for folder in folders:
        for path in (root / folder).rglob("*"):
            if path.suffix in (".py", ".smk", ".yaml") and "tests" not in path.relative_to(root).parts[:2]:
                if pattern.search(path.read_text(errors="replace")):
                    found.add(path.relative_to(root).as_posix())
    return found


def test_the_listed_files_exist():
    for path in listed_files("built-in policy"):
        assert (ROOT / path).is_file(), f"docs/extending.md lists {path}, which does not exist"


def test_only_the_listed_files_name_a_builtin_policy():
    plain = sorted(set(builtin_policies()) - ROLE_POLICIES)
    assert plain, "every built-in policy has a role: the check would check nothing"
    unlisted = files_naming(plain) - set(listed_files("built-in policy"))
    assert not unlisted, f"these files name built-in policies outside their specs: {sorted(unlisted)}"


@pytest.mark.parametrize("quote", ['"', "'"])
def test_the_check_finds_a_policy_table_outside_the_specs(tmp_path, quote):
    """The check's own mutant: a colour table in a figure module, a list in a
    workflow rule; a test file naming policies is not a source file."""
    for path, text in (("src/cqb/figures/colours.py", f"COLOURS = {{{quote}cqb_ts{quote}: 1}}\n"),
                       ("workflow/rules/x.smk", f"POLICIES = [{quote}q_ths{quote}]\n"),
                       ("bench/tests/test_x.py", f"run({quote}cqb_ts{quote})\n"),
                       ("src/cqb/other.py", "cqb_ts_like = 1\n")):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert files_naming(["cqb_ts", "q_ths"], root=tmp_path) == {"src/cqb/figures/colours.py", "workflow/rules/x.smk"}
