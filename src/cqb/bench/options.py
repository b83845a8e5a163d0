"""The options of `cqb benchmark` and `python -m cqb.bench.benchmark`, in a module
of their own: the command line builds its parser from them without importing
cqb.bench.benchmark (and numpy), and that module does not import the command line."""

from __future__ import annotations

import argparse


def add_benchmark_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="write the Markdown tables here as well")
    parser.add_argument("--startup", action="store_true",
                        help="time a `cqb run` job's start-up instead (docs/benchmarks.md)")
    parser.add_argument("--startup-runs", type=int, default=20, help="runs per source (default 20)")
    parser.add_argument("--startup-baseline", metavar="SRC",
                        help="another checkout's src/ directory, timed beside this one")
    parser.add_argument("--pipeline", action="store_true",
                        help="time trivial jobs through the real workflow instead (cqb.bench.pipeline_benchmark)")
    parser.add_argument("--jobs", type=int, default=100, help="simulate jobs at scale 1 (default 100)")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10],
                        help="multiples of --jobs to run (default 1 10)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME='ARGS'",
                        help="extra Snakemake arguments timed beside the profile's (repeatable)")
    parser.add_argument("--cores", type=int, default=2, help="snakemake --cores (default 2)")
    parser.add_argument("--bench-policies", default="random",
                        help="with --pipeline: the policies run on each seed, comma-separated (default random)")
    parser.add_argument("--bench-horizon", type=int, default=500, help="with --pipeline: T (default 500)")
    parser.add_argument("--baseline-checkout", metavar="DIR",
                        help="with --pipeline: another checkout (its Snakefile, its .venv) timed beside")
    parser.add_argument("--split", action="store_true",
                        help="where the CPU of a timed pipeline run went (cqb.bench.pipeline_benchmark.run_split)")
    parser.add_argument("--results", default="results", help="with --split: the run's results_dir")
    parser.add_argument("--timings", default="docs/results/timings.tsv", help="with --split: the cqb time table")
    parser.add_argument("--row", type=int, default=-1, help="with --split: which row (default the last)")
