"""Generated results: provenance, README blocks, timings, and the committed
results' code hash against the current simulation code."""

import json
import time

import pytest

from cqb.pipeline.results import (BEGIN, END, config_hash, generated_block, provenance, publish,
                         splice, time_command, timings_markdown)


def test_provenance_refuses_runs_of_other_code():
    config = {"a": 1}
    record = provenance(config, "abc", {"abc"}, "0.1")
    assert record == {"code_hash": "abc", "config_hash": config_hash(config), "cqb_version": "0.1"}
    with pytest.raises(ValueError, match="different simulation code"):
        provenance(config, "abc", {"abc", "def"}, "0.1")
    with pytest.raises(ValueError, match="made by simulation code def"):
        provenance(config, "abc", {"def"}, "0.1")
    assert config_hash({"a": 1, "b": [2]}) == config_hash({"b": [2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_splice_replaces_only_its_block():
    text = f"intro\n{BEGIN.format(name='x')}\nold\n{END.format(name='x')}\n" \
           f"{BEGIN.format(name='y')}\nkeep\n{END.format(name='y')}\nend\n"
    spliced = splice(text, "x", "new\nlines")
    assert generated_block(spliced, "x") == "new\nlines"
    assert generated_block(spliced, "y") == "keep"
    assert spliced.startswith("intro\n") and spliced.endswith("end\n")
    with pytest.raises(ValueError, match="no generated block 'z'"):
        splice(text, "z", "x")


def test_publish_copies_the_files_and_splices_the_readme(tmp_path):
    source = tmp_path / "figures"
    source.mkdir()
    (source / "claims.md").write_text("| claim |\n")
    (source / "claims.tsv").write_text("claim\n")
    (source / "results.md").write_text("numbers\n")
    (source / "provenance.json").write_text(json.dumps({"code_hash": "c", "config_hash": "k",
                                                        "cqb_version": "v"}))
    readme = tmp_path / "README.md"
    readme.write_text(f"# r\n{BEGIN.format(name='claims')}\n{END.format(name='claims')}\n")
    publish(source, tmp_path / "docs", readme)
    assert (tmp_path / "docs" / "results.md").read_text() == "numbers\n"
    block = generated_block(readme.read_text(), "claims")
    assert "code `c`" in block and block.endswith("| claim |")
    # Figure 5's generated summary goes into its own block when the README has one
    (source / "fig5_summary.md").write_text("slopes\n")
    readme.write_text(readme.read_text() + f"{BEGIN.format(name='rates')}\n{END.format(name='rates')}\n")
    publish(source, tmp_path / "docs", readme)
    assert generated_block(readme.read_text(), "rates").endswith("slopes")
    assert (tmp_path / "docs" / "fig5_summary.md").exists()
    # Figure 7's summary: the README block and docs/real_data_sensitivity.md
    (source / "fig7.md").write_text("grid\n")
    readme.write_text(readme.read_text() + f"{BEGIN.format(name='fig7')}\n{END.format(name='fig7')}\n")
    sensitivity = tmp_path / "docs" / "real_data_sensitivity.md"
    sensitivity.write_text(f"x\n{BEGIN.format(name='fig7')}\n{END.format(name='fig7')}\n")
    publish(source, tmp_path / "docs", readme)
    assert generated_block(readme.read_text(), "fig7").endswith("grid")
    assert generated_block(sensitivity.read_text(), "fig7") == "grid"
    (source / "results.md").unlink()
    with pytest.raises(FileNotFoundError, match="results.md"):
        publish(source, tmp_path / "docs", readme)


def test_time_command_records_wall_time_load_and_exit_code(tmp_path):
    table = tmp_path / "timings.tsv"
    started = time.perf_counter()
    row = time_command(["python3", "-c", "import time; time.sleep(0.2)"], "a nap", table)
    elapsed = time.perf_counter() - started
    assert row["load_max"] >= 0 and row["load_mean"] <= row["load_max"]
    # bounded by the call's own duration, not a guess at the machine's speed (0.05: rounding to 0.1 s)
    assert row["returncode"] == 0 and 0.2 <= row["wall_seconds"] <= elapsed + 0.05
    failed = time_command(["python3", "-c", "raise SystemExit(3)"], "a failure", table)
    assert failed["returncode"] == 3
    text = timings_markdown(table)
    assert text.count("\n") == 3 and "a nap" in text and "(exit 3)" in text
