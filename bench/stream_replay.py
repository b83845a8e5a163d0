"""Replay a sample of the full config's i.i.d. runs (synthetic and pool) with
this checkout's simulation code and with a baseline tree's, and say whether
each gives back the same trace (its content hash), the same queue Q(t) and
the same optimal queue Q*(t): the evidence that declaring the context streams
as a registry left the paper's streams bit-identical.

    python -m bench.stream_replay BASELINE [--per-instance 2] [--out FILE]

BASELINE: a cqb checkout built in place (bench/trees.py). The sample: per
instance of the plan whose stream is i.i.d., the first ``--per-instance``
(policy label, horizon, seed) of its runs at T ≤ 5000, in plan order. Each
run is simulated in a child process of each tree (PYTHONPATH), from the run's
own instance spec, policy, parameters, horizon and seed; the pool files are
this checkout's data/processed (the pipeline's data rules build them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from bench.trees import CHECKOUT, SOURCE, baseline

# A child's job: simulate each run and print (queue, Q*, trace hash) digests as JSON lines.
CHILD = """
import hashlib, json, sys
from cqb.sim.simulate import simulate
for line in sys.stdin:
    run = json.loads(line)
    result = simulate(run["instance"], run["policy"], run["params"], run["horizon"], run["seed"])
    digest = lambda array: hashlib.sha256(array.tobytes()).hexdigest()[:16]
    print(json.dumps({"queue": digest(result.queue), "oracle": digest(result.oracle_queue),
                      "trace": result.metadata.get("trace_hash")}), flush=True)
"""


def sample(per_instance: int, max_horizon: int = 5000) -> list[dict]:
    """The sampled runs of config/config.yaml whose stream is one of the i.i.d. families."""
    import yaml

    from cqb.config.schema import validate_config
    from cqb.config.experiments import build_plan
    from cqb.sim.streams import stream_kind

    config = yaml.safe_load((CHECKOUT / "config" / "config.yaml").read_text())
    validate_config(config, yaml.safe_load((CHECKOUT / "workflow" / "schemas" / "config.schema.yaml").read_text()))
    taken: dict[str, int] = {}
    runs = []
    for (instance_id, horizon, _), run in build_plan(config).runs.items():
        kind = stream_kind(run.instance["kind"])
        if kind.name != kind.family or int(horizon) > max_horizon or taken.get(instance_id, 0) >= per_instance:
            continue
        if "pool" in run.instance and not (CHECKOUT / run.instance["pool"]).is_file():
            continue
        taken[instance_id] = taken.get(instance_id, 0) + 1
        runs.append({"instance_id": instance_id, "instance": run.instance, "policy": run.policy,
                     "params": run.params, "horizon": int(horizon), "seed": int(run.seeds[0])})
    return runs


def replay(source: Path, runs: list[dict]) -> list[dict]:
    environment = dict(os.environ, PYTHONPATH=str(source))
    done = subprocess.run([sys.executable, "-c", CHILD], input="".join(json.dumps(run) + "\n" for run in runs),
                          capture_output=True, text=True, cwd=CHECKOUT, env=environment)
    if done.returncode != 0:
        raise SystemExit(f"the replay in {source} failed:\n{done.stderr}")
    return [json.loads(line) for line in done.stdout.splitlines()]


def report(runs, old, new, baseline_name: str) -> str:
    from cqb.sim.code_hash import simulation_code_hash

    same = sum(a == b for a, b in zip(old, new))
    lines = [f"Replayed {len(runs)} runs of the full config's i.i.d. streams with the simulation code "
             f"`{simulation_code_hash()}` and with the baseline {baseline_name} (`python -m bench.stream_replay`): "
             f"{same} of {len(runs)} give back the same trace, queue Q(t) and optimal queue Q*(t), bit for bit.",
             "", "| instance | policy | T | seed | trace | Q(t) | Q*(t) |", "| --- | --- | ---: | ---: | --- | --- | --- |"]
    for run, a, b in zip(runs, old, new):
        marks = ["same" if a[key] == b[key] else f"differs ({a[key]} → {b[key]})" for key in ("trace", "queue", "oracle")]
        lines.append(f"| {run['instance_id']} | {run['policy']} | {run['horizon']} | {run['seed']} | " + " | ".join(marks) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("--per-instance", type=int, default=2)
    parser.add_argument("--name", help="how the report names the baseline (default: its path)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    runs = sample(args.per_instance)
    old, new = replay(baseline(args.baseline), runs), replay(SOURCE, runs)
    text = report(runs, old, new, args.name or str(args.baseline))
    if args.out:
        from cqb.io.files import atomic_write_text

        atomic_write_text(args.out, text)
    print(text, end="")
    return 0 if old == new else 1


if __name__ == "__main__":
    sys.exit(main())
