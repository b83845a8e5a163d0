"""Generated results: provenance, README blocks, timings, and the committed
results' code hash against the current simulation code."""

import json
import sys
import time

import pandas as pd
import pytest

from cqb.publishing.timing import TIMING_COLUMNS, time_command, timings_markdown
from cqb.publishing.splicing import BEGIN, END, generated_block, splice
from cqb.config.schema import config_hash
from cqb.publishing.provenance import pool_checksums, provenance
from cqb.publishing.published_results import publish


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


def test_pool_checksums_name_each_file_and_change_with_its_last_byte(tmp_path):
    """The provenance's pool checksums: one per file, sorted by path, the
    SHA-256 of the bytes (a file read in blocks), different when one byte is."""
    import hashlib

    first, second = tmp_path / "b.npz", tmp_path / "a.npz"
    first.write_bytes(b"x" * (3 << 20))
    second.write_bytes(b"pool")
    checksums = pool_checksums([first, second])
    assert list(checksums) == [str(second), str(first)]
    assert checksums[str(first)] == hashlib.sha256(b"x" * (3 << 20)).hexdigest()[:16]
    first.write_bytes(b"x" * ((3 << 20) - 1) + b"y")
    assert pool_checksums([first])[str(first)] != checksums[str(first)]
    assert pool_checksums([]) == {}


def test_splice_replaces_only_its_block():
    text = f"intro\n{BEGIN.format(name='x')}\nold\n{END.format(name='x')}\n" \
           f"{BEGIN.format(name='y')}\nkeep\n{END.format(name='y')}\nend\n"
    spliced = splice(text, "x", "new\nlines")
    assert generated_block(spliced, "x") == "new\nlines"
    assert generated_block(spliced, "y") == "keep"
    assert spliced.startswith("intro\n") and spliced.endswith("end\n")
    with pytest.raises(ValueError, match="no generated block 'z'"):
        splice(text, "z", "x")


def test_publish_copies_the_files_and_splices_the_readme_and_the_docs(tmp_path):
    source = tmp_path / "figures"
    source.mkdir()
    claims = ("claim\tfigure\texperiment\tstatement\tstatistic\tvalue\tci_low\tci_high\tverdict\tn_seeds\tdetail\n"
              "random_linear\tfig2\tsynthetic_base\tRandom grows\tslope\t0.1\t0.05\t0.15\tholds\t10\t\n"
              "ours\tfig3\tsynthetic_dim\t(ours) converges\ttail\t0.9\t0\t2\tinconclusive\t10\t\n")
    (source / "claims.tsv").write_text(claims)
    (source / "claims.md").write_text("| claim |\n")
    (source / "results.md").write_text("numbers\n")
    (source / "provenance.json").write_text(json.dumps({"code_hash": "c", "config_hash": "k",
                                                        "cqb_version": "v"}))
    readme = tmp_path / "README.md"
    blocks = "".join(f"{BEGIN.format(name=name)}\n{END.format(name=name)}\n" for name in ("summary", "lastrun"))
    readme.write_text(f"# r\n{blocks}")
    docs = tmp_path / "docs"
    docs.mkdir()
    for page, blocks in (("figures.md", ("rates", "fig7")), ("benchmarks.md", ("timings",))):
        (docs / page).write_text("x\n" + "".join(f"{BEGIN.format(name=b)}\n{END.format(name=b)}\ny\n" for b in blocks))
    publish(source, docs / "results", readme)
    assert (docs / "results" / "results.md").read_text() == "numbers\n"
    summary = generated_block(readme.read_text(), "summary")
    assert "code `c`" in summary and "Random grows" in summary and "(ours)" not in summary
    assert "1 holds" in summary
    # Figures 5 and 7: their docs pages, not the README
    (source / "fig5_summary.md").write_text("slopes\n")
    columns = ("claim", "policy", "original_verdict", "original_n", "replication_verdict", "replication_value",
               "replication_ci_low", "replication_ci_high", "replication_level", "replication_n", "result")
    row = ("random_linear", "", "holds", "20", "holds", "0.13", "0.1", "0.16", "0.95", "20", "replicated")
    (source / "claims_replication.tsv").write_text("\t".join(columns) + "\n" + "\t".join(row) + "\n")
    (source / "fig7.md").write_text("grid\n\n| cell |\n| --- |\n| a |\n")
    publish(source, docs / "results", readme)
    assert generated_block((docs / "figures.md").read_text(), "rates").endswith("slopes")
    # Figure 7's page shows the prose and links the table, which stays in docs/results/fig7.md
    fig7 = generated_block((docs / "figures.md").read_text(), "fig7")
    assert fig7.endswith("grid\n\nEvery cell's numbers: [results/fig7.md](results/fig7.md).") and "| a |" not in fig7
    assert "| a |" in (docs / "results" / "fig7.md").read_text()
    assert (docs / "results" / "fig5_summary.md").exists()
    assert (docs / "results" / "claims_replication.tsv").read_text().endswith("replicated\n")  # the replication study
    # the timings: the last full run in the README, the whole table in benchmarks.md
    (docs / "results" / "timings.tsv").write_text(
        "\t".join(TIMING_COLUMNS) + "\n" + "\t".join(["2026-12-01 11:00 UTC", "the whole replication", "snakemake",
                                                    "601.0", "0.5", "2.1", "2.5", "2", "0", "1100.0", "90.0"]) + "\n"
        # a later run of another target that names the replication in its label is not it
        + "\t".join(["2026-12-01 12:00 UTC", "Figure 8, on top of the whole replication above", "snakemake multiverse",
                     "700.0", "0.5", "2.1", "2.5", "2", "0", "1300.0", "90.0"]) + "\n"
        # nor is a later baseline: the whole replication of an older tree, timed beside this one
        + "\t".join(["2026-12-01 13:00 UTC", "a baseline, not this code: the whole replication of an older commit",
                     "snakemake", "800.0", "0.5", "2.1", "2.5", "2", "0", "1500.0", "90.0"]) + "\n")
    publish(source, docs / "results", readme)
    assert "10 min 01 s" in generated_block(readme.read_text(), "lastrun")
    assert "the whole replication" in generated_block((docs / "benchmarks.md").read_text(), "timings")
    (source / "results.md").unlink()
    with pytest.raises(FileNotFoundError, match="results.md"):
        publish(source, docs / "results", readme)


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
    text = timings_markdown(table, last=2)
    assert text.count("\n") == 3 and "a nap" in text and "(exit 3)" in text
    assert "a nap" not in timings_markdown(table, last=1)  # the docs page shows the latest runs only
    assert "a nap" in timings_markdown(table, last=2)


def test_time_records_the_cpu_of_the_command_and_its_children(tmp_path):
    table = tmp_path / "timings.tsv"
    burn = "import subprocess, sys; sum(range(3_000_000)); subprocess.run([sys.executable, '-c', 'sum(range(3_000_000))'])"
    row = time_command([sys.executable, "-c", burn], "burn", table)
    assert row["returncode"] == 0 and row["cpu_seconds"] > 0.05
    assert row["snakemake_cpu_seconds"] == ""  # not a snakemake command
    assert list(pd.read_csv(table, sep="\t").columns) == list(TIMING_COLUMNS)


def test_time_upgrades_a_table_with_the_older_columns(tmp_path):
    table = tmp_path / "timings.tsv"
    old = TIMING_COLUMNS[:9]
    table.write_text("\t".join(old) + "\n" + "\t".join(["2026-11-30 04:16 UTC", "old run", "snakemake", "10.0",
                                                        "1.0", "1.0", "1.0", "2", "0"]) + "\n")
    time_command([sys.executable, "-c", "pass"], "new run", table)
    rows = pd.read_csv(table, sep="\t")
    assert list(rows.columns) == list(TIMING_COLUMNS)
    assert rows["label"].tolist() == ["old run", "new run"]
    assert pd.isna(rows["cpu_seconds"][0]) and rows["cpu_seconds"][1] >= 0


def test_timings_markdown_shows_only_the_latest_runs(tmp_path):
    table = tmp_path / "timings.tsv"
    for label in ("first", "second", "third"):
        time_command(["python3", "-c", "pass"], label, table)
    text = timings_markdown(table, last=2)
    assert "first" not in text and "second" in text and "third" in text
    assert text.index("second") < text.index("third")
    assert "latest 2 of 3 runs" in text and "docs/results/timings.tsv" in text
    assert "latest" not in timings_markdown(table, last=3)


def test_figure_8_keeps_the_provenance_of_its_own_run_when_a_later_run_is_published(tmp_path):
    """Figure 8 is its own target: a publish with its files records their run's
    provenance beside them and shows it in their block; a later publish of
    the replication without them keeps them, their record, their block and
    the README's multiverse column."""
    def run_folder(name, code, with_fig8):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "claims.tsv").write_text(
            "claim\tfigure\texperiment\tstatement\tstatistic\tvalue\tci_low\tci_high\tverdict\tn_seeds\tdetail\n"
            "random_linear\tfig2\tsynthetic_base\tRandom grows\tslope\t0.1\t0.05\t0.15\tholds\t10\t\n")
        for file in ("claims.md", "results.md"):
            (folder / file).write_text("x\n")
        (folder / "provenance.json").write_text(json.dumps({"code_hash": code, "config_hash": "k",
                                                            "cqb_version": "v"}))
        if with_fig8:
            (folder / "fig8.md").write_text("robust or not\n")
            (folder / "fig8_marks.tsv").write_text(
                "claim\tstatement\tdefault_verdict\tmark\topposite\tdiffers\tcells\tby_construction\n"
                "random_linear\tRandom grows\tholds\trobust across the reconstruction\t\t\t18\tFalse\n")
        return folder

    readme = tmp_path / "README.md"
    readme.write_text(f"# r\n{BEGIN.format(name='summary')}\n{END.format(name='summary')}\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "figures.md").write_text(f"{BEGIN.format(name='fig8')}\n{END.format(name='fig8')}\n")
    results = docs / "results"
    publish(run_folder("first", "old", True), results, readme)
    assert json.loads((results / "fig8_provenance.json").read_text())["code_hash"] == "old"
    assert "choices (Figure 8): robust" in generated_block(readme.read_text(), "summary")
    publish(run_folder("second", "new", False), results, readme)
    assert json.loads((results / "provenance.json").read_text())["code_hash"] == "new"
    assert json.loads((results / "fig8_provenance.json").read_text())["code_hash"] == "old"
    assert (results / "fig8.md").read_text() == "robust or not\n"
    block = generated_block((docs / "figures.md").read_text(), "fig8")
    assert block.startswith("Generated by the pipeline from simulation code `old`") and "robust or not" in block
    summary = generated_block(readme.read_text(), "summary")
    assert "code `new`" in summary and "choices (Figure 8): robust" in summary
