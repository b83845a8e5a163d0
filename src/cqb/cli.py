"""The ``cqb`` command: run one (instance, policy, seed) and write its run file.

Examples::

    cqb policies                       # every policy with its parameters
    cqb run --policy cqb_opt --seed 0 --horizon 5000 --out run.npz
    cqb run --policy cqb_eps --instance pool --pool data/processed/mnist/instance.npz \\
        --arrival-rate 0.15 --set tau=400 --out mnist.npz
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import __version__


def _parse_value(text: str):
    """A --set value: JSON where it parses (numbers, null, true), else a string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _parse_settings(items: list[str]) -> dict:
    settings = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"cqb: --set takes NAME=VALUE, got {item!r}")
        settings[name] = _parse_value(value)
    return settings


def _policy_listing() -> str:
    from .policies import POLICIES, policy_parameters

    lines = []
    for name, spec in POLICIES.items():
        params = policy_parameters(name)
        shown = ", ".join(f"{key}={value!r}" for key, value in params.items()) or "no parameters"
        lines.append(f"  {name:<12} {spec.display_name:<10} {shown}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cqb",
        description="Contextual queueing bandits: simulate one policy against the oracle "
                    "on common random numbers.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="policies (name, display name, parameters with defaults; null = derived):\n"
               + _policy_listing())
    parser.add_argument("--version", action="version", version=f"cqb {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("policies", help="list the policies and their parameters")

    run = commands.add_parser(
        "run", help="simulate one (instance, policy, seed) and write an .npz run file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="policies:\n" + _policy_listing())
    run.add_argument("--policy", required=True, help="policy name (see `cqb policies`)")
    run.add_argument("--seed", type=int, required=True, help="root of the seed tree")
    run.add_argument("--horizon", type=int, default=5000, help="number of rounds T (default 5000)")
    run.add_argument("--instance", choices=("synthetic", "pool"), default="synthetic")
    run.add_argument("--n-servers", type=int, default=5, help="K (synthetic; default 5)")
    run.add_argument("--dim", type=int, default=5, help="d (synthetic; default 5)")
    run.add_argument("--arrival-rate", type=float, default=0.7, help="λ (default 0.7)")
    run.add_argument("--slack", type=float, default=0.1, help="ϵ (synthetic; default 0.1)")
    run.add_argument("--pool", help="pool instance file (.npz with contexts, theta)")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="a policy parameter, e.g. --set bonus_scale=0.1 (repeatable)")
    run.add_argument("--out", required=True, help="output .npz (written atomically)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "policies":
        print(_policy_listing())
        return 0

    from .io import save_run
    from .simulate import simulate

    if args.instance == "pool":
        if not args.pool:
            raise SystemExit("cqb: --instance pool needs --pool FILE")
        spec = {"kind": "pool", "pool": args.pool, "arrival_rate": args.arrival_rate}
    else:
        spec = {"kind": "synthetic", "n_servers": args.n_servers, "dim": args.dim,
                "arrival_rate": args.arrival_rate, "slack": args.slack}
    started = time.perf_counter()
    try:
        result = simulate(spec, args.policy, _parse_settings(args.set), args.horizon, args.seed)
    except ValueError as error:
        print(f"cqb: error: {error}", file=sys.stderr)
        return 2
    result.metadata["wall_seconds"] = round(time.perf_counter() - started, 4)
    save_run(args.out, result)
    print(f"{args.policy} seed {args.seed}: Q(T) = {int(result.queue[-1])}, "
          f"Q*(T) = {int(result.oracle_queue[-1])}, wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
