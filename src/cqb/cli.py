"""The ``cqb`` command: run one (instance, policy, seed) and write its run file.

Examples::

    cqb policies                       # every policy with its parameters
    cqb run --policy cqb_opt --seed 0 --horizon 5000 --out run.npz
    cqb run --policy cqb_eps --instance pool --pool data/processed/mnist/instance.npz \\
        --arrival-rate 0.15 --set tau=400 --out mnist.npz
    cqb run --draw-trace --seed 0 --out trace.npz   # a seed's common random numbers, once
    cqb run --policy cqb_opt --seed 0 --trace trace.npz --out run.npz  # the same run as above
    cqb run --policy cqb_opt --seed 0 --trace-cache trace.npz --out run.npz  # read it, or draw and write it
    cqb tables results figures         # the Markdown tables of docs/figures.md
    cqb compare OLD/runs results/runs  # what a code change changed, run by run

The workflow's `simulate` rule runs ``cqb run --instance-spec JSON --params JSON
--code-hash H ... 2> LOG``: everything it reports goes to stderr. Bad input
stops with one line naming the value and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import __version__
from .jobs import run_command
from .jobs.client import RUN_SERVER_VARIABLE
from .jobs.run_command import ListingParser, add_run_arguments, policy_listing

# Start-up of a `cqb run` job (docs/benchmarks.md, "Job start-up"): this module
# imports only the standard library; numpy, the policies and the rest load in
# the command that needs them (`cqb run`: cqb.jobs.run_command).


def policy_defaults_markdown() -> str:
    """Every policy's parameters with their defaults, as a Markdown table."""
    from .presentation import in_listing_order
    from .sim.policies import policy_parameters, registered_policies

    lines = ["| policy | parameter | default |", "| --- | --- | --- |"]
    for name in in_listing_order(registered_policies()):
        for key, value in policy_parameters(name).items():
            lines.append(f"| `{name}` | `{key}` | {'null' if value is None else repr(value)} |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = ListingParser(
        prog="cqb",
        description="Contextual queueing bandits: simulate one policy against the oracle "
                    "on common random numbers.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=lambda: "policies (name, display name, parameters with defaults; null = derived):\n"
                       + policy_listing())
    parser.add_argument("--version", action="version", version=f"cqb {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    listing = commands.add_parser("policies", help="list the policies and their parameters")
    listing.add_argument("--markdown", action="store_true", help="a Markdown table of every default")

    add_run_arguments(commands.add_parser(
        "run", help="simulate one (instance, policy, seed) and write an .npz run file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=lambda: "policies:\n" + policy_listing()))

    tables = commands.add_parser("tables", help="Markdown tables of docs/figures.md from the pipeline's tables")
    tables.add_argument("results", nargs="?", default="results")
    tables.add_argument("figures", nargs="?", default="figures")
    publish = commands.add_parser(
        "publish", help="copy the pipeline's claims and results into docs/results/ and the README")
    publish.add_argument("--source", default="figures", help="the pipeline's figures_dir (default figures)")
    publish.add_argument("--dest", default="docs/results")
    publish.add_argument("--readme", default="README.md")
    publish.add_argument("--rebuild", action="store_true",
                         help="no copy: rebuild the marks, the claims' lines, the README block and the report "
                              "from the published tables in --dest (cqb.publishing.republish)")
    compare = commands.add_parser(
        "compare", help="pair two trees of run files by path and report what changed (cqb.analysis.compare)")
    compare.add_argument("old", help="the old runs folder (e.g. a copy of results/runs)")
    compare.add_argument("new", help="the new runs folder")
    compare.add_argument("--old-claims", help="the old claims table (claims.tsv)")
    compare.add_argument("--new-claims", help="the new claims table")
    compare.add_argument("--old-readings", help="the old registered readings table (claims_readings.tsv)")
    compare.add_argument("--new-readings", help="the new registered readings table")
    compare.add_argument("--old-powered", help="the old powered readings table (claims_powered.tsv)")
    compare.add_argument("--new-powered", help="the new powered readings table")
    compare.add_argument("--old-comparisons", help="the old comparisons table (claims_comparisons.tsv)")
    compare.add_argument("--new-comparisons", help="the new comparisons table")
    compare.add_argument("--mechanism", help="a Markdown file included under 'Why the paths changed'")
    compare.add_argument("--out", help="write the Markdown report here (atomically) as well")
    timed = commands.add_parser(
        "time", help="run a command and record its wall time and the machine's load in a timings table")
    timed.add_argument("--label", required=True, help="what was run, in words")
    timed.add_argument("--table", default="docs/results/timings.tsv")
    timed.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the command")
    return parser


def _compare(args) -> int:
    from .io.files import atomic_write_text
    from .analysis.compare import (compare_claims, compare_comparisons, compare_readings, compare_run_trees,
                                   comparison_markdown)

    try:
        for what in ("claims", "readings", "powered", "comparisons"):
            if (getattr(args, f"old_{what}") is None) != (getattr(args, f"new_{what}") is None):
                raise ValueError(f"give both --old-{what} and --new-{what}, or neither")
        mechanism = Path(args.mechanism).read_text() if args.mechanism else None
        runs, extra = compare_run_trees(Path(args.old), Path(args.new))
        claims = compare_claims(Path(args.old_claims), Path(args.new_claims)) if args.old_claims else None
        powered = compare_claims(Path(args.old_powered), Path(args.new_powered)) if args.old_powered else None
        comparisons = (compare_comparisons(Path(args.old_comparisons), Path(args.new_comparisons))
                       if args.old_comparisons else None)
    except (OSError, ValueError) as error:
        print(f"cqb: error: {error}", file=sys.stderr)
        return 2
    readings = (compare_readings(Path(args.old_readings), Path(args.new_readings))
                if args.old_readings else None)
    text = comparison_markdown(runs, extra, claims, readings, comparisons, mechanism, powered)
    if args.out:
        atomic_write_text(Path(args.out), text)
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    server = os.environ.get(RUN_SERVER_VARIABLE) if argv[:1] == ["run"] else None
    if server:  # a workflow job: the preloaded server runs it (cqb.jobs.server)
        from .jobs.client import forward

        code = forward(server, argv)
        if code is not None:
            return code
    args = build_parser().parse_args(argv)
    if args.command == "policies":
        print(policy_defaults_markdown() if args.markdown else policy_listing())
        return 0
    if args.command in ("publish", "time"):
        try:
            if args.command == "publish":
                from .figures.multiverse_plot import redraw_published
                from .publishing.published_results import publish
                from .publishing.republish import rebuild

                # the derived files (marks, lines, README block, report) rendered from the published
                # tables, as --rebuild alone renders them: the pipeline's own copies render from
                # unrounded values and may differ from them in a last digit
                written = [] if args.rebuild else publish(Path(args.source), Path(args.dest), Path(args.readme))
                written += rebuild(Path(args.dest), Path(args.readme), Path(args.readme).resolve().parent,
                                   draw_fig8=redraw_published)
                for path in written:
                    print(f"wrote {path}")
                return 0
            from .publishing.timing import time_command

            command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            row = time_command(command, args.label, Path(args.table))
            print(f"{args.label}: {row['wall_seconds']:.0f} s, load {row['load_before']} before, "
                  f"{row['load_mean']} mean, {row['load_max']} max -> {args.table}", file=sys.stderr)
            return row["returncode"]
        except (OSError, ValueError) as error:
            print(f"cqb: error: {error}", file=sys.stderr)
            return 2
    if args.command == "compare":
        return _compare(args)
    if args.command == "tables":
        from .analysis.beyond_tables import main as tables

        tables(args.results, args.figures)
        return 0
    return run_command.run(args)


if __name__ == "__main__":
    sys.exit(main())
