"""How busy the cores were over a Snakemake run, from its log.

    python -m bench.timeline SNAKEMAKE_LOG [--cores 2]

Snakemake stamps each job's start and finish to the second; a job counts as
running in every second from its start stamp to its finish stamp. Prints the
run's span, the seconds in which fewer jobs than cores ran (and none), and
which rules were running in those seconds: where a serial stretch of the
workflow (look checkpoints, aggregations, figures) left cores idle. The
stamps are whole seconds, so a job seems to run through the whole of its
first and last second: gaps shorter than a second between sub-second jobs
are not seen, and the counts are a lower bound of the idle time.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import re
import sys
from pathlib import Path

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")
JOB_ID = re.compile(r"^\s+jobid: (\d+)$")
FINISHED = re.compile(r"^Finished jobid: (\d+)")


def job_spans(lines) -> dict[int, tuple[str, float, float | None]]:
    """jobid -> (rule, start, finish or None) from a Snakemake log's lines."""
    now, rule, spans = None, None, {}
    for line in lines:
        if match := STAMP.match(line):
            now = datetime.datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y").timestamp()
        elif match := RULE.match(line):
            rule = match.group(1)
        elif (match := JOB_ID.match(line)) and rule is not None:
            spans[int(match.group(1))] = (rule, now, None)
            rule = None
        elif (match := FINISHED.match(line)) and int(match.group(1)) in spans:
            name, start, _ = spans[int(match.group(1))]
            spans[int(match.group(1))] = (name, start, now)
    return spans


def short_seconds(spans: dict, cores: int) -> tuple[int, int, int, collections.Counter]:
    """(span in seconds, seconds with fewer than ``cores`` jobs, seconds with
    none, rules running in the short seconds)."""
    if not spans:
        return 0, 0, 0, collections.Counter()
    first = int(min(start for _, start, _ in spans.values()))
    last = int(max(finish if finish is not None else start for _, start, finish in spans.values()))
    running = collections.Counter()
    rules = collections.defaultdict(set)
    for name, start, finish in spans.values():
        for second in range(int(start), int(finish if finish is not None else last) + 1):
            running[second] += 1
            rules[second].add(name)
    short = [second for second in range(first, last + 1) if running[second] < cores]
    blame = collections.Counter(name for second in short for name in rules[second])
    return last - first + 1, len(short), sum(1 for second in short if running[second] == 0), blame


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="a Snakemake log (.snakemake/log/*.snakemake.log or its output)")
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args(argv)
    spans = job_spans(args.log.read_text().splitlines())
    span, short, empty, blame = short_seconds(spans, args.cores)
    print(f"{len(spans)} jobs over {span} s; seconds with fewer than {args.cores} jobs running: {short} "
          f"(with none: {empty})")
    if blame:
        print("rules running in those seconds: " + ", ".join(f"{name} {count}" for name, count in blame.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
