"""config/README.md is generated from the config schema (cqb.config.readme):
the committed file is what the schema gives, every top-level block and every
`execution` switch listed with its default and description."""

from __future__ import annotations

import copy

import pytest
import yaml

from conftest import REPO
from cqb.config.readme import README, SCHEMA, config_readme, main

STATIC = yaml.safe_load((REPO / SCHEMA).read_text())


def test_the_committed_config_readme_is_what_the_schema_gives():
    assert (REPO / README).read_text() == config_readme(STATIC), (
        "config/README.md differs from the schema: run `python -m cqb.config.readme`")


def test_every_block_and_every_execution_switch_is_listed_with_its_default_and_description():
    text = config_readme(STATIC)
    for key in STATIC["properties"]:
        assert f"\n| `{key}` | " in text, key
    for key, prop in STATIC["properties"]["execution"]["properties"].items():
        first_words = " ".join(prop["description"].split()[:6])
        assert f"| `{key}` | `{str(prop['default']).lower()}` | {first_words}" in text, key
    # the summaries' keys come from the dataclass the schema is completed from
    from dataclasses import fields

    from cqb.analysis.summaries import SummarySettings

    summaries = next(line for line in text.splitlines() if line.startswith("| `summaries` |"))
    assert all(f"`{field.name}`" in summaries for field in fields(SummarySettings))


def test_a_switch_without_a_description_is_refused_by_name(tmp_path):
    schema = copy.deepcopy(STATIC)
    del schema["properties"]["execution"]["properties"]["run_client"]["description"]
    with pytest.raises(ValueError, match="execution.run_client has no description"):
        config_readme(schema)
    (tmp_path / SCHEMA).parent.mkdir(parents=True)
    (tmp_path / SCHEMA).write_text(yaml.safe_dump(schema, allow_unicode=True))
    assert main(["--root", str(tmp_path), "--check"]) == 2


def test_the_command_writes_the_file_and_check_tells_a_stale_one(tmp_path):
    (tmp_path / SCHEMA).parent.mkdir(parents=True)
    (tmp_path / SCHEMA).write_text((REPO / SCHEMA).read_text())
    (tmp_path / README).parent.mkdir(parents=True)
    (tmp_path / README).write_text("# stale\n")
    assert main(["--root", str(tmp_path), "--check"]) == 1
    assert main(["--root", str(tmp_path)]) == 0
    assert main(["--root", str(tmp_path), "--check"]) == 0
    assert (tmp_path / README).read_text() == (REPO / README).read_text()
