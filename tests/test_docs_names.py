"""Every name the docs give a reader exists: each `cqb.…` dotted name imports
(a module, or an attribute of one), each repository path is in the tree, each
`cqb <subcommand>` is a command of the parser, each `bench.…` tool is a module
of bench/, each relative link resolves.
Generated blocks (between `generated:` markers) and docs/results/ are output
of the pipeline, not prose, and are left out."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

from conftest import REPO

PAGES = [REPO / "README.md", REPO / "bench" / "README.md"] + sorted((REPO / "docs").glob("*.md"))
GENERATED = re.compile(r"<!-- generated:(?P<name>[\w-]+) begin.*?<!-- generated:(?P=name) end -->", re.S)
DOTTED = re.compile(r"(?<![\w/.-])cqb(?:\.[A-Za-z_]\w*)+")
# repository paths: what is committed (outputs under results/, figures/, data/ are not)
TOP = r"(?:src|workflow|config|scripts|tests|docs|profiles|examples|tools|bench|\.ci)"
PATH = re.compile(rf"(?<![\w./-])(?:{TOP}/[\w./<>{{}}*-]*|Snakefile|setup\.py|pyproject\.toml|requirements\.txt|"
                  r"environment\.yml)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(r"^(?:\.venv/bin/)?cqb ([a-z][\w-]*)")
BENCH_TOOL = re.compile(r"(?<![\w/.-])bench\.([a-z_]\w*)")


def prose(page: Path) -> str:
    return GENERATED.sub("", page.read_text(encoding="utf-8"))


def code_lines(text: str) -> list[str]:
    """Inline code spans, indented code-block lines and fenced lines, stripped."""
    lines = [span.strip() for span in CODE_SPAN.findall(text)]
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            lines.append(line.strip())
    return lines


def resolves(dotted: str) -> bool:
    """A module, or a module's attribute (a class's attribute too)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        try:
            for name in parts[end:]:
                target = getattr(target, name)
        except AttributeError:
            return False
        return True
    return False


def exists(path: str) -> bool:
    path = path.rstrip(".,;:")
    if any(mark in path for mark in "<{*"):  # a pattern: something in the tree must match it
        pattern = re.sub(r"<[^>]*>|\{[^}]*\}", "*", path).rstrip("/")
        return any(REPO.glob(pattern))
    return (REPO / path).exists()


def subcommands() -> set[str]:
    from cqb.cli import build_parser

    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(actions[0].choices)


def names(kind):
    found = []
    for page in PAGES:
        text = prose(page)
        if kind == "dotted":
            found += [(page, name.rstrip(".")) for name in DOTTED.findall(text)]
        elif kind == "path":
            found += [(page, path) for path in PATH.findall(text)]
        elif kind == "link":
            found += [(page, link) for link in LINK.findall(text)
                      if not re.match(r"[a-z]+:|#", link)]
        elif kind == "tool":
            found += [(page, tool) for tool in BENCH_TOOL.findall(text)]
        elif kind == "command":
            found += [(page, match.group(1)) for line in code_lines(text)
                      for match in [COMMAND.match(line)] if match]
    return sorted(set(found))


def test_the_docs_are_read_as_intended():
    # the scanners find what the pages are known to name, so an empty scan cannot pass
    assert ("cqb.config.experiments.build_plan" in {n for _, n in names("dotted")})
    assert "profiles/slurm" in {p.rstrip("/") for _, p in names("path")}
    assert {"run", "publish", "time"} <= {c for _, c in names("command")}
    assert {"sim_speed", "pipeline_benchmark"} <= {t for _, t in names("tool")}
    assert resolves("cqb.analysis.curves.Curve.with_files") and not resolves("cqb.claims")
    assert not resolves("cqb.analysis.curves.Nope") and exists("workflow/rules/*.smk")
    assert not exists("workflow/profiles/default") and exists("profiles/<site>/")


def test_every_dotted_name_exists():
    missing = [f"{page.relative_to(REPO)}: {name}" for page, name in names("dotted") if not resolves(name)]
    assert not missing, "\n".join(missing)


def test_every_repository_path_exists():
    missing = [f"{page.relative_to(REPO)}: {path}" for page, path in names("path") if not exists(path)]
    assert not missing, "\n".join(missing)


def test_every_bench_tool_exists():
    missing = [f"{page.relative_to(REPO)}: bench.{tool}" for page, tool in names("tool")
               if not (REPO / "bench" / f"{tool}.py").is_file()]
    assert not missing, "\n".join(missing)


def test_every_relative_link_resolves():
    missing = [f"{page.relative_to(REPO)}: {link}" for page, link in names("link")
               if not (page.parent / link.split("#")[0]).exists()]
    assert not missing, "\n".join(missing)


def test_every_cqb_command_exists():
    known = subcommands()
    missing = [f"{page.relative_to(REPO)}: cqb {command}" for page, command in names("command")
               if command not in known]
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("text, expected", [
    ("see `cqb.sim.rng`.", ["cqb.sim.rng"]),
    ("the `cqb` command, the cqb package", []),
    ("install-cqb.sh and my.cqb.thing", []),
])
def test_dotted_names_are_whole_names(text, expected):
    assert [n.rstrip(".") for n in DOTTED.findall(text)] == expected
