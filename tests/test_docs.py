"""Docs that state package values are generated from the package, or checked against it."""

from conftest import REPO
from cqb.cli import policy_defaults_markdown
from cqb.policies import DISPLAY_NAMES, policy_parameters
from cqb.publishing.splicing import generated_block


def test_architecture_lists_the_dataclass_defaults(builtin_policies_only):
    text = (REPO / "docs" / "architecture.md").read_text()
    assert generated_block(text, "policy-defaults") == policy_defaults_markdown(), (
        "regenerate: the block between the policy-defaults markers = `cqb policies --markdown` "
        "(in an environment with no policy plugin installed)")


def test_defaults_table_has_a_row_per_parameter_with_its_value():
    # read the table back (its cells, each value a Python literal or null) rather than rebuild its text
    import ast

    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in policy_defaults_markdown().splitlines()[2:]]
    read = [(name.strip("`"), key.strip("`"), None if value == "null" else ast.literal_eval(value))
            for name, key, value in rows]
    expected = [(name, key, value) for name in DISPLAY_NAMES  # listing order
                for key, value in policy_parameters(name).items()]
    assert read == expected


def test_verdicts_page_states_the_summary_settings_the_package_uses():
    from cqb.analysis.summaries import SummarySettings

    text = (REPO / "docs" / "verdicts.md").read_text()
    settings = SummarySettings()
    assert f"last {settings.tail_fraction * 100:g} % of rounds" in text
    assert f"`tail_regret` > {settings.stall_threshold:g} jobs" in text
    assert f"t ≤ {settings.early_rounds}" in text


def test_the_docs_pages_stay_under_130_kb_in_all():
    """docs/*.md is read whole by a newcomer: its pages together stay under
    130 KB (a long table belongs in docs/results/, linked; docs/results/ is
    not counted)."""
    sizes = {path.name: path.stat().st_size for path in (REPO / "docs").glob("*.md")}
    assert sizes, "no docs/*.md pages found"
    total = sum(sizes.values())
    assert total < 130_000, f"docs/*.md holds {total} bytes in all (largest pages: " \
        f"{sorted(sizes.items(), key=lambda item: -item[1])[:3]})"
