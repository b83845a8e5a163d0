"""Which part of a timed full run the powered stages cost (the powered evaluation's budget).

    python -m bench.stage_costs RESULTS_DIR TIMINGS_TSV [ROW] [CONFIG]

Every simulate log of RESULTS_DIR (a fresh clone's, one run of `all`: a
candidates benchmark's runs would count as powered) is put in one
part: the runs some configured experiment other than Figure 5's reads (the
base: Figures 2-4, 6, 7, tuning stage 1, the N = 10 stall check), Figure 5's
own runs, the powered claims' (seeds from powered.first_seed, requested by
the checkpoints) and the powered tuning's stage 2 (tuning.stage2 seeds).
Each part's CPU is its runs' own CPU (their logs) plus, per job, the run's
average Snakemake and start-up/hand-off CPU (bench.pipeline_benchmark
--split); its wall estimate is that over the run's cores. An attribution, not a separate
timed run: the parts share one Snakemake, and the aggregation rules are left
in the base."""

import sys
from pathlib import Path

import pandas as pd
import yaml

from cqb.config.schema import validate_config
from cqb.config.experiments import build_plan
from .pipeline_benchmark import other_rules_cpu, simulation_cpu


def main(argv: list[str]) -> int:
    results, timings = Path(argv[0]), Path(argv[1])
    row = pd.read_csv(timings, sep="\t").iloc[int(argv[2]) if len(argv) > 2 else -1]
    repo = results.resolve().parent
    config = yaml.safe_load((Path(argv[3]) if len(argv) > 3 else repo / "config/config.yaml").read_text())
    schema = yaml.safe_load((repo / "workflow/schemas/config.schema.yaml").read_text())
    validate_config(config, schema)
    plan = build_plan(config)
    rates = set(plan.rate_experiments)
    base, figure5 = set(), set()
    for experiment, curves in plan.curves.items():
        target = figure5 if experiment in rates else base
        for curve in curves:
            target.update((curve.instance_id, f"T{curve.horizon}", curve.label, f"seed{seed}")
                          for seed in curve.seeds)
    stage2 = config["tuning"]["stage2"]
    stage2_seeds = range(stage2["first_seed"], stage2["first_seed"] + stage2["seeds"])
    parts = {name: [0, 0.0] for name in ("base", "Figure 5", "powered claims", "powered tuning (stage 2)")}
    for log, cpu in simulation_cpu(results).items():
        key = (*log.relative_to(results / "logs" / "simulate").parent.parts, log.stem)
        seed = int(log.stem.removeprefix("seed"))
        part = ("base" if key in base else "Figure 5" if key in figure5
                else "powered tuning (stage 2)" if seed in stage2_seeds else "powered claims")
        parts[part][0] += 1
        parts[part][1] += cpu
    runs = sum(n for n, _ in parts.values())
    simulations = sum(cpu for _, cpu in parts.values())
    _, other = other_rules_cpu(results, repo / "benchmarks")
    overhead_per_run = (float(row["cpu_seconds"]) - simulations - other) / runs  # Snakemake + hand-off
    cores = int(row["cores"])
    print(f"Run: {row['label']} ({row['date']}; wall {float(row['wall_seconds']):.0f} s, {cores} cores); "
          f"Snakemake and start-up/hand-off: {1000 * overhead_per_run:.0f} ms of CPU per run\n")
    print("| part | runs | runs' own CPU (s) | with per-job overhead (s) | wall estimate (min) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (n, cpu) in parts.items():
        total = cpu + n * overhead_per_run + (other if name == "base" else 0)
        print(f"| {name}{' (and the other rules)' if name == 'base' else ''} | {n} | {cpu:.0f} | "
              f"{total:.0f} | {total / cores / 60:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
