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


# The claim kinds: each is one row of cqb.analysis.claims.kinds; a file that
# names a kind string outside docs/extending.md's list would be a second place
# a new kind has to be added. A name below is not the kind there.
NOT_A_KIND = {"src/cqb/analysis/summaries.py": {"stall_rate"}}  # the curves' column of that name


def names_in_files(names, root: Path = ROOT) -> dict[str, set[str]]:
    pattern = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, names)))
    found = {}
    for folder in SOURCE_FOLDERS:
        for path in (root / folder).rglob("*"):
            if path.suffix in (".py", ".smk", ".yaml") and "tests" not in path.relative_to(root).parts[:2]:
                named = set(pattern.findall(path.read_text(errors="replace")))
                if named:
                    found[path.relative_to(root).as_posix()] = named
    return found


def files_naming_a_kind(root: Path = ROOT) -> set[str]:
    from cqb.analysis.claims.kinds import KINDS

    return {path for path, named in names_in_files(KINDS, root).items() if named - NOT_A_KIND.get(path, set())}


def test_the_claim_kind_files_exist():
    listed = listed_files("claim kind")
    assert len([p for p in listed if not p.startswith("config/")]) <= 3
    for path in listed:
        assert (ROOT / path).is_file(), f"docs/extending.md lists {path}, which does not exist"


def test_only_the_listed_files_name_a_claim_kind():
    unlisted = files_naming_a_kind() - set(listed_files("claim kind"))
    assert not unlisted, f"these files name claim kinds outside the kinds' table: {sorted(unlisted)}"


def test_the_check_finds_a_kind_chain_outside_the_table(tmp_path):
    """The check's own mutant: an if-chain on a kind in a figure module; the
    curves' stall_rate column is not a kind."""
    for path, text in (("src/cqb/figures/x.py", 'if spec.kind == "drops":\n    pass\n'),
                       ("src/cqb/analysis/summaries.py", 'COLUMNS = ("stall_rate",)\n'),
                       ("src/cqb/other.py", "drops = 1\n")):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert files_naming_a_kind(tmp_path) == {"src/cqb/figures/x.py"}


def test_the_schema_and_config_follow_the_kinds_table():
    """The schema's kind enum and margins, and the config's margins, are the
    table's kinds in its order; each margin's units and bound are its row's."""
    import yaml

    from cqb.analysis.claims.kinds import CLAIM_KINDS, KINDS

    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert schema["$defs"]["claim_kind"]["enum"] == list(KINDS)
    margins = schema["properties"]["claim_margins"]["properties"]
    assert list(margins) == list(KINDS)
    for kind in CLAIM_KINDS:
        assert margins[kind.name]["description"] == kind.margin_units, kind.name
        assert margins[kind.name].get("maximum") == kind.margin_max, kind.name
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert list(config["claim_margins"]) == list(KINDS)


# Context streams: each is one declaration in cqb.sim.streams; the schema, the
# plan's run paths, the multiverse and the CLI read the registry. A file that
# names an adversarial stream's kind outside the list would be a second place
# a new stream has to be added. (The i.i.d. kinds "synthetic" and "pool" are
# the two families, named for that role.)
def adversarial_stream_kinds() -> list[str]:
    from cqb.sim.streams import STREAM_KINDS

    return [name for name, kind in STREAM_KINDS.items() if name != kind.family]


def test_the_context_stream_files_exist_and_are_at_most_three_besides_the_config():
    listed = listed_files("context stream")
    assert len([path for path in listed if not path.startswith("config/")]) <= 3
    for path in listed:
        assert (ROOT / path).is_file(), f"docs/extending.md lists {path}, which does not exist"


def test_only_the_listed_files_name_an_adversarial_stream():
    kinds = adversarial_stream_kinds()
    assert kinds, "no adversarial stream: the check would check nothing"
    unlisted = files_naming(kinds, folders=SOURCE_FOLDERS + ("config",)) - set(listed_files("context stream"))
    assert not unlisted, f"these files name stream kinds outside their declarations: {sorted(unlisted)}"


def test_the_stream_check_finds_a_kind_chain_outside_the_registry(tmp_path):
    (tmp_path / "src/cqb/studies").mkdir(parents=True)
    (tmp_path / "src/cqb/studies/x.py").write_text('if spec["kind"] == "deceptive_switch":\n    pass\n')
    assert files_naming(adversarial_stream_kinds(), root=tmp_path) == {"src/cqb/studies/x.py"}


# The datasets: each is one DatasetSpec of cqb.datasets.registry; the schema, the
# data rules, the preprocess script and the figures look it up there.
def test_the_dataset_files_exist():
    listed = listed_files("dataset")
    assert "src/cqb/datasets/registry.py" in listed
    for path in listed:
        assert (ROOT / path).is_file(), f"docs/extending.md lists {path}, which does not exist"


def test_only_the_listed_files_name_a_dataset():
    from cqb.datasets.registry import DATASETS

    unlisted = files_naming(DATASETS) - set(listed_files("dataset"))
    assert not unlisted, f"these files name datasets outside the dataset registry: {sorted(unlisted)}"


# Where each extension point is declared: the source files that hold a
# declaration must be in the point's list (a spec table moved to another module
# without its recipe following fails here).
# (A decorator at the start of a line: a docstring's indented example is no declaration.)
DECLARATIONS = {"built-in policy": r"(?m)^@register_policy\(", "claim kind": r"\bClaimKind\(",
                "dataset": r"\bDatasetSpec\("}


def files_declaring(pattern: str, root: Path = ROOT) -> set[str]:
    return {path.relative_to(root).as_posix() for path in (root / "src").rglob("*.py")
            if re.search(pattern, path.read_text(errors="replace"))}


@pytest.mark.parametrize("kind", sorted(DECLARATIONS))
def test_each_declaration_lives_in_a_listed_file(kind):
    declaring = files_declaring(DECLARATIONS[kind])
    assert declaring, f"no source file declares a {kind}: the check would check nothing"
    unlisted = declaring - set(listed_files(kind))
    assert not unlisted, f"{kind}: declared in {sorted(unlisted)}, which docs/extending.md does not list"


def test_the_check_finds_a_declaration_outside_its_module(tmp_path):
    """The check's own mutant: a dataset spec in another module, a dataset
    name in a workflow rule; a test naming one is not a source file."""
    for path, text in (("src/cqb/data/registry.py", 'DECLARED = (DatasetSpec("iris", "Iris"),)\n'),
                       ("workflow/rules/data.smk", 'if dataset == "iris":\n    pass\n'),
                       ("tests/test_data.py", 'DatasetSpec("iris")\n')):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert files_declaring(DECLARATIONS["dataset"], root=tmp_path) == {"src/cqb/data/registry.py"}
    assert files_naming(["iris"], root=tmp_path) == {"src/cqb/data/registry.py", "workflow/rules/data.smk"}


# The claims: each is an entry of the config's `claims` (the registry); no
# source file names one, so a new claim touches the listed config only.
def test_the_claim_files_hold_the_registry():
    import yaml

    listed = listed_files("claim")
    assert listed == ["config/config.yaml"]
    config = yaml.safe_load((ROOT / listed[0]).read_text())
    assert config["claims"] and all({"name", "kind", "experiment", "statement"} <= set(e) for e in config["claims"])


def test_only_the_config_names_a_claim():
    import yaml

    names = [entry["name"] for entry in yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["claims"]]
    named = files_naming(names)
    assert not named, f"these source files name claims of the registry: {sorted(named)}"
