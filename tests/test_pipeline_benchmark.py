"""The pipeline's timing tools without running a pipeline: `cqb time`'s CPU
columns (an older table upgraded in place) and the CPU split of a run."""

from __future__ import annotations

import sys

import pandas as pd

from cqb.bench.pipeline_benchmark import benchmark_config, parse_variant, run_split
from cqb.pipeline.results import TIMING_COLUMNS, time_command


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


def test_split_accounts_for_every_cpu_second(tmp_path):
    results = tmp_path / "results"
    for index, cpu in enumerate([0.25, 0.5, 1.25]):
        log = results / "logs" / "simulate" / f"run{index}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"cqb 0.1.0 code x: ...\nrandom seed {index}: Q(T) = 1, Q*(T) = 1, 0.30 s "
                       f"({cpu:.2f} s CPU in this process), wrote out.npz\n")
    bench = results / "benchmarks" / "aggregate" / "base.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\tcpu_time\n1.0\t3.0\n")
    row = {"label": "test", "date": "today", "wall_seconds": 10, "load_before": 0.1, "load_mean": 0.2,
           "cpu_seconds": 10.0, "snakemake_cpu_seconds": 4.0}
    text = run_split(results, row, data_benchmarks=tmp_path / "none")
    assert "| Snakemake's own process | 4 | 40 % |" in text
    assert "| simulations (3 runs, each run's own CPU from its log) | 2 | 20 % | 667 |" in text
    assert "| other rules (1 jobs: aggregation, figures, verdicts, data) | 3 | 30 % | 3000 |" in text
    assert "| simulate jobs' start-up and hand-off, the run server (the rest) | 1 | 10 % | 333 |" in text


def test_benchmark_config_uses_seeds_no_experiment_uses_and_variants_parse(tmp_path):
    config = benchmark_config(tmp_path, 30)
    experiment = config["experiments"]["pipeline_benchmark"]
    assert experiment["seeds"] == 30 and experiment["first_seed"] >= 100_000 and experiment["horizon"] == 500
    assert parse_variant("ilp=--scheduler ilp --quiet rules") == ("ilp", ["--scheduler", "ilp", "--quiet", "rules"])
