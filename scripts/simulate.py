"""Command of rule `simulate`: one run file for one (instance, policy, seed).

Called through `shell:` rather than `script:` so a job does not import
Snakemake; it imports only numpy and cqb, keeping the per-job start-up short
(hundreds of sub-second jobs). Usage:

    python scripts/simulate.py --instance '{"kind": "synthetic", ...}' --policy cqb_opt \
        --params '{"bonus_scale": 0.1}' --horizon 5000 --seed 0 --out run.npz --log run.log
"""

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

try:
    import cqb
except ImportError:  # a conda env without the package: use the repository's source
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import cqb
from cqb.io import save_run
from cqb.simulate import simulate


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", required=True, help="instance spec (JSON)")
    parser.add_argument("--policy", required=True)
    parser.add_argument("--params", default="{}", help="policy parameters (JSON)")
    parser.add_argument("--horizon", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--code-hash", default="", help="recorded in the log only")
    parser.add_argument("--out", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args(argv)
    instance, params = json.loads(args.instance), json.loads(args.params)
    out = Path(args.out)
    # temporary files of an earlier attempt that was killed mid-write (see cqb.io.atomic_write)
    for stale in out.parent.glob(f".{out.name}.*"):
        stale.unlink()
    with open(args.log, "w") as log:
        print(f"cqb {cqb.__version__} code {args.code_hash}: {args.policy} "
              f"{json.dumps(params, sort_keys=True)} on {json.dumps(instance, sort_keys=True)}, "
              f"T = {args.horizon}, seed {args.seed}", file=log, flush=True)
        start = time.perf_counter()
        try:
            result = simulate(instance, args.policy, params, args.horizon, args.seed)
            save_run(args.out, result)  # atomic: a killed job leaves no partial output
        except Exception:
            traceback.print_exc(file=log)
            raise
        print(f"Q(T) = {result.queue[-1]}, Q*(T) = {result.oracle_queue[-1]}, "
              f"{time.perf_counter() - start:.2f} s", file=log)


if __name__ == "__main__":
    main()
