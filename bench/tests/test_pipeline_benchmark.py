"""The pipeline benchmark's logic without running a pipeline: its config, its
variants, the CPU split of a timed run and which profile it runs."""

from __future__ import annotations

import pytest

from bench.pipeline_benchmark import benchmark_config, default_profile, parse_variant, run_split
from bench.trees import CHECKOUT


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


def test_the_benchmark_runs_the_checkouts_own_default_profile(tmp_path):
    """This checkout's profile beside its Snakefile; an older tree's under workflow/."""
    assert default_profile(CHECKOUT / "Snakefile") == CHECKOUT / "profiles" / "default"
    (tmp_path / "workflow" / "profiles" / "default").mkdir(parents=True)
    assert default_profile(tmp_path / "Snakefile") == tmp_path / "workflow" / "profiles" / "default"
    (tmp_path / "profiles" / "default").mkdir(parents=True)
    assert default_profile(tmp_path / "Snakefile") == tmp_path / "profiles" / "default"
    with pytest.raises(SystemExit, match="no default profile"):
        default_profile(tmp_path / "elsewhere" / "Snakefile")
