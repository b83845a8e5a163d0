"""A reader tells modules apart by name: no three modules (or subpackages) of
one package share a name prefix — the first underscore-separated word of one
(leading underscores aside) equal to, or the start of, the others'. Three or
more that do belong in a subpackage named by the prefix (cqb.analysis.claims)."""

from __future__ import annotations

from pathlib import Path

import cqb

SRC = Path(cqb.__file__).parent


def first_word(name: str) -> str:
    return name.lstrip("_").split("_")[0]


def share_prefix(one: str, other: str) -> bool:
    a, b = first_word(one), first_word(other)
    return a.startswith(b) or b.startswith(a)


def crowded_prefixes(names: list[str]) -> list[list[str]]:
    """Each name with the siblings sharing its prefix, where they are three or more."""
    crowds = []
    for name in sorted(names):
        crowd = sorted(other for other in names if share_prefix(name, other))
        if len(crowd) >= 3 and crowd not in crowds:
            crowds.append(crowd)
    return crowds


def packages(root: Path = SRC) -> dict[str, list[str]]:
    """package folder → the names of its modules and subpackages."""
    found = {}
    for folder in [root, *(path.parent for path in root.rglob("__init__.py"))]:
        names = [path.stem for path in folder.glob("*.py") if path.name != "__init__.py"]
        names += [path.name for path in folder.iterdir() if (path / "__init__.py").exists()]
        found[str(folder.relative_to(root.parent))] = names
    return found


def test_no_three_sibling_modules_share_a_name_prefix():
    crowded = {folder: crowds for folder, names in packages().items() if (crowds := crowded_prefixes(names))}
    assert crowded == {}, f"give each crowd a subpackage named by its prefix, or names of their own: {crowded}"


def test_the_check_sees_a_shared_first_word_and_a_name_that_starts_another():
    assert crowded_prefixes(["claim_kinds", "claim_lines", "claims", "rates"]) == [["claim_kinds", "claim_lines",
                                                                                    "claims"]]
    assert crowded_prefixes(["power", "powered", "rates_power"]) == []  # two share "power"; rates_power's is "rates"
    assert crowded_prefixes(["power", "powered", "power_tables"]) == [["power", "power_tables", "powered"]]
    assert crowded_prefixes(["_rounds", "rounds_table", "round"]) == [["_rounds", "round", "rounds_table"]]
    assert "cqb/analysis" in packages() and "claims" in packages()["cqb/analysis"]
