"""The replication study's cost: CPU per run × runs, from a few measured runs.

    python -m bench.replication_cost [CONFIG] [--runs 2] [--overhead-ms 22]

For every run set (instance, horizon, policy label) the registered
replication reads, the distinct run files it needs (a run shared by two
entries, or with another entry's experiment, counts once) times the CPU of
``--runs`` simulations of that run set measured here (the figures' seeds
0, 1, …: seen seeds, timed only; each run draws its own trace and Q*, which
a workflow job reads from the trace shared by the seed's policies, so this
overstates the simulations' CPU a little), plus ``--overhead-ms`` of
Snakemake and start-up/hand-off CPU per job (the last timed run's, from
bench.stage_costs). Run from the repository root with the pools built.
A measurement, not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import collections
import time
from pathlib import Path

import yaml

from cqb.analysis.powered_reading import look_counts, run_files
from cqb.config.schema import validate_config
from cqb.config.experiments import build_plan
from cqb.studies.replication import replication_claims
from cqb.studies.claim_specs import claim_specs
from cqb.sim.simulate import simulate


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="config/config.yaml")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--overhead-ms", type=float, default=22.0)
    args = parser.parse_args(argv)
    config = yaml.safe_load(Path(args.config).read_text())
    config.update(yaml.safe_load(Path("config/datasets.yaml").read_text()))
    validate_config(config, yaml.safe_load(Path("workflow/schemas/config.schema.yaml").read_text()))
    plan = build_plan(config)
    claims = replication_claims(config, plan, claim_specs(config, plan))
    needed, curves = collections.defaultdict(set), {}
    for claim in claims.values():
        by_unit = {(c.label, c.sweep_text): c for c in plan.curves[claim.spec.experiment]}
        files = run_files(claim, plan.curves[claim.spec.experiment], "{seed}", look_counts(claim, 0, None))
        for unit in claim.units:
            curve = by_unit[unit]
            key = (curve.instance_id, curve.horizon, curve.label)
            curves[key] = curve
            needed[key].update(files[f"{unit[0]}@{unit[1]}"])
    print("| experiment | run set | runs | CPU per run (ms) | CPU (s) |")
    print("| --- | --- | ---: | ---: | ---: |")
    total_runs = total_cpu = 0.0
    for key, seeds in needed.items():
        curve = curves[key]
        started = time.process_time()
        for seed in range(args.runs):
            simulate(curve.instance, curve.policy, curve.params, curve.horizon, seed)
        per_run = (time.process_time() - started) / args.runs
        cpu = len(seeds) * per_run
        total_runs += len(seeds)
        total_cpu += cpu
        print(f"| {curve.experiment} | {curve.label} {curve.sweep_text} | {len(seeds)} | {1000 * per_run:.0f} | "
              f"{cpu:.0f} |", flush=True)
    overhead = total_runs * args.overhead_ms / 1000
    print(f"\n{total_runs:.0f} runs: {total_cpu:.0f} s of simulation CPU + {overhead:.0f} s of per-job overhead = "
          f"{total_cpu + overhead:.0f} s; {(total_cpu + overhead) / 2 / 60:.1f} min on 2 cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
