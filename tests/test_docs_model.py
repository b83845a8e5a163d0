"""docs/model.md is the repository's own account of the model, and the one
place a citation of the model points to: each `docs/model.md#<anchor>` (or a
page's relative `model.md#<anchor>` link, or model.md's own `#<anchor>` link)
anywhere in the tracked files names a heading of docs/model.md, and no
tracked file under the checked folders cites the team's private summary, a
file the repository does not have, by its name as a word (the name is built
from parts here, so this file passes its own scan)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import REPO

MODEL = REPO / "docs" / "model.md"
PRIVATE_NAME = "SP" + "EC"
PRIVATE_CITATION = re.compile(PRIVATE_NAME)  # anywhere, as `grep -rn` finds it: no identifier carries it either
CHECKED = ("src", "config", "tests", "workflow", "docs", "scripts", "bench", "examples", "README.md")
MODEL_CITATION = re.compile(r"(?<![\w/.-])(?:docs/)?model\.md#([\w-]+)")
OWN_LINK = re.compile(r"\]\(#([\w-]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


def tracked_texts(*paths: str) -> dict[Path, str]:
    """The tracked files under ``paths`` (all when none) that are text, by path."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", *paths], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    texts = {}
    for name in filter(None, listed):
        path = REPO / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            texts[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped (letters
    of any script, digits, underscores, hyphens and spaces stay), spaces to
    hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def heading_anchors(markdown: str) -> set[str]:
    """The anchors of a page's headings outside code fences; a repeated
    heading's later anchors get GitHub's -1, -2, … suffixes."""
    anchors, seen, fenced = set(), {}, False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            anchor = github_anchor(match.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            anchors.add(anchor if count == 0 else f"{anchor}-{count}")
    return anchors


def cited_anchors(path: Path, text: str) -> list[str]:
    found = MODEL_CITATION.findall(text)
    if path == MODEL:
        found += OWN_LINK.findall(text)
    return found


def private_citations(text: str) -> list[int]:
    """The line numbers citing the private summary by name."""
    return [number for number, line in enumerate(text.splitlines(), 1) if PRIVATE_CITATION.search(line)]


def test_the_scans_find_what_they_look_for():
    assert private_citations(f"ok\nthe formula ({PRIVATE_NAME} §2)\n") == [2]
    assert private_citations(f"an instance spec\nCLAIM_{PRIVATE_NAME}S\n") == [2]  # an identifier counts too
    assert private_citations("spec, Spec, DatasetSpec") == []
    page = "docs/" + "model.md#the-bonus-scale, [x](model.md#cqb_eps). not_model.md#x"
    assert cited_anchors(REPO / "README.md", page) == ["the-bonus-scale", "cqb_eps"]
    assert github_anchor("Queue-length regret and the coupling") == "queue-length-regret-and-the-coupling"
    assert github_anchor("The optimal policy π* and `Q*(t)`") == "the-optimal-policy-π-and-qt"
    assert heading_anchors("# A\n```\n# not a heading\n```\n## A\n### q_ucb and q_ths") == {
        "a", "a-1", "q_ucb-and-q_ths"}


def test_no_tracked_file_cites_the_private_summary():
    texts = tracked_texts(*CHECKED)
    assert REPO / "docs" / "reconstruction.md" in texts and REPO / "src" / "cqb" / "sim" / "_rounds.py" in texts
    hits = [f"{path.relative_to(REPO)}:{line}" for path, text in texts.items() for line in private_citations(text)]
    assert not hits, ("cite the paper (section, equation, theorem) or docs/model.md#<anchor> instead of "
                      f"{PRIVATE_NAME}: " + ", ".join(hits))


def test_every_cited_model_anchor_is_a_heading_of_docs_model_md():
    anchors = heading_anchors(MODEL.read_text(encoding="utf-8"))
    assert {"the-queue-and-its-rounds", "the-per-server-logistic-estimator", "the-policies"} <= anchors
    citations = [(path, anchor) for path, text in tracked_texts().items() for anchor in cited_anchors(path, text)]
    assert len({path for path, _ in citations}) >= 10, "the scan found too few citing files to be reading them"
    stale = sorted({f"{path.relative_to(REPO)}: #{anchor}" for path, anchor in citations if anchor not in anchors})
    assert not stale, "anchors of docs/model.md that no heading has:\n" + "\n".join(stale)


def test_docs_model_md_stays_a_readable_size():
    assert MODEL.stat().st_size < 130_000
