"""Replay every run whose queue path differs between two result trees with the
simulation code this interpreter imports, and say which tree's run file each
replay reproduces: with a change undone in a scratch copy of the new code, a
replay that gives back every old path shows that change moved them, alone.

    PYTHONPATH=SCRATCH/src python -m bench.path_replay OLD_RUNS NEW_RUNS [--workdir DIR]

OLD_RUNS, NEW_RUNS: two `results/runs` folders (run files paired as `cqb
compare` pairs them); each run is replayed from its metadata (instance spec, policy, its
resolved parameters, horizon, seed) by simulate(), in DIR (where the pool
files the specs name are; default: here). SCRATCH: a checkout built in place
(`bench/trees.py`) for this interpreter.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path

import numpy as np


def changed_runs(old_root: Path, new_root: Path) -> list[tuple[str, dict, dict]]:
    """(relative path, old run, new run) of the runs both trees hold whose
    queue paths differ, paired as `cqb compare` pairs them (by instance,
    horizon, policy, parameters and seed)."""
    from cqb.analysis.compare import SUPERSEDED, run_files

    old_files, new_files = run_files(old_root), run_files(new_root)
    paired = sorted((set(old_files) & set(new_files)) - {SUPERSEDED}, key=str)
    return [(new_files[key][0], old_files[key][1], new_files[key][1]) for key in paired
            if not np.array_equal(old_files[key][1]["queue"], new_files[key][1]["queue"])]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("old_runs", type=Path)
    parser.add_argument("new_runs", type=Path)
    parser.add_argument("--workdir", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    old_root, new_root = args.old_runs.resolve(), args.new_runs.resolve()
    from cqb.sim.code_hash import simulation_code_hash
    from cqb.sim.simulate import simulate

    changed = changed_runs(old_root, new_root)
    print(f"code {simulation_code_hash()}: {len(changed)} runs whose queue path changed, replayed")
    here, tally = os.getcwd(), Counter()
    os.chdir(args.workdir)
    try:
        for _, old, new in changed:
            meta = new["metadata"]
            queue = np.asarray(simulate(meta["instance_spec"], meta["policy"], meta["policy_params"],
                                        meta["horizon"], meta["seed"]).queue)
            tally[np.array_equal(queue, old["queue"]), np.array_equal(queue, new["queue"])] += 1
    finally:
        os.chdir(here)
    print("| the replay reproduces | runs |\n| --- | ---: |")
    names = {(True, False): "the old run file", (False, True): "the new run file", (False, False): "neither",
             (True, True): "both"}
    for key, count in sorted(tally.items(), key=lambda item: -item[1]):
        print(f"| {names[key]} | {count} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
