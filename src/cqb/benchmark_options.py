"""The options of `cqb benchmark` and `python -m cqb.benchmark`, in a module of
their own: the command line builds its parser from them without importing
cqb.benchmark (and numpy), and cqb.benchmark does not import the command line."""

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
