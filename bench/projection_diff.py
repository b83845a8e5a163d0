"""Which runs a change of Filippi's projection moves, and why: this checkout
against a baseline tree, side by side.

    python -m bench.projection_diff BASELINE [--policies cqb_opt,cqb_ts,cqb_eps_opt] [--seeds 0-9]
                                    [--horizon 5000] [--instance JSON] [--show 5]

Each (policy, seed) run is played by both trees on the same trace (drawn by
each tree from the seed, the same bits), through the plugin loop so that every
estimator update is seen: after each update that projected, the server's θ_k
is recorded. A run whose queue path Q(t) differs between the trees is
"changed". For the first few runs whose projections changed (those whose
path changed first), at the first update whose
projection differs (the states before it are the same in both trees: the
data, θ̂ and V⁻¹ do not depend on the projection, and the paths agree until
then), the problem is rebuilt here and both trees' θ_k are scored on it: the
objective f(θ) = ‖g(θ) − g(θ̂)‖²_{V⁻¹} and the KKT residual ‖∇f + 2νθ‖/‖∇f‖.
Prints a Markdown table. BASELINE is another checkout built in place
(bench.trees; ``--build`` builds it).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from cqb.jobs.run_command import BLAS_THREAD_VARIABLES
from cqb.config.experiments import BASE_INSTANCE

from . import trees
from .sim_speed import seed_range

BASE_INSTANCE = {**BASE_INSTANCE, "min_accept_rate": 0.005}

# Plays each (policy, seed) through the plugin loop, recording Q(t) and, after
# every update that projected, (round, server, θ_server); pickles the lot.
WORKER = """
import json, pickle, sys
from cqb.sim.core import core
from cqb.sim.simulate import draw, policy_env
from cqb.sim.policies import make_policy
from cqb.sim.rng import stream
spec, policies, seeds, horizon, out = json.loads(sys.stdin.read())
results = {}
for seed in seeds:
    instance, _, trace, _ = draw(spec, horizon, seed)
    for name in policies:
        policy, _ = make_policy(name, policy_env(instance, horizon), trace.contexts, stream(seed, "policy"), None,
                                true_means=trace.true_means)
        estimator = policy.scorer.estimator
        projected = []

        class Spy:
            def choose(self, t, queue, new_arrival):
                return policy.choose(t, queue, new_arrival)

            def observe(self, t, job, server, success):
                before = estimator.projections
                policy.observe(t, job, server, success)
                if estimator.projections > before:
                    projected.append((t, server, estimator.theta[server].copy()))

        queue = core().play_rounds(core().PolicyChooser(Spy()), trace.arrivals, trace.service_uniforms,
                                   trace.true_means)[0]
        results[name, seed] = (queue, projected)
with open(out, "wb") as handle:
    pickle.dump(results, handle)
"""


def play_tree(src: Path, spec: dict, policies: list[str], seeds: list[int], horizon: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "runs.pickle")
        environment = dict(os.environ, PYTHONPATH=str(src), **dict.fromkeys(BLAS_THREAD_VARIABLES, "1"))
        done = subprocess.run([sys.executable, "-c", WORKER], input=json.dumps([spec, policies, seeds, horizon, out]),
                              env=environment, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"projection_diff: the runs on {src} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        with open(out, "rb") as handle:
            return pickle.load(handle)


def problem_at(spec: dict, policy_name: str, seed: int, horizon: int, round_number: int):
    """(X, θ̂, V⁻¹, λ₀, S) of the server updated in ``round_number``, just after
    that update, replayed by this checkout."""
    from cqb.sim.core import core
    from cqb.sim.policies import make_policy
    from cqb.sim.rng import stream
    from cqb.sim.simulate import draw, policy_env

    instance, _, trace, _ = draw(spec, horizon, seed)
    policy, _ = make_policy(policy_name, policy_env(instance, horizon), trace.contexts, stream(seed, "policy"),
                            None, true_means=trace.true_means)
    estimator = policy.scorer.estimator
    found = {}

    class Stop(Exception):
        pass

    class Spy:
        def choose(self, t, queue, new_arrival):
            return policy.choose(t, queue, new_arrival)

        def observe(self, t, job, server, success):
            policy.observe(t, job, server, success)
            if t == round_number:
                n = int(estimator.counts[server])
                found["problem"] = (estimator.features[server, :n].copy(), estimator.mle[server].copy(),
                                    estimator.design_inv[server].copy(), float(estimator.params.reg),
                                    float(estimator.norm_bounds[server]))
                raise Stop

    try:
        core().play_rounds(core().PolicyChooser(Spy()), trace.arrivals, trace.service_uniforms, trace.true_means)
    except Stop:
        pass
    return found["problem"]


def objective_and_kkt(X, mle, design_inv, reg, bound, theta) -> tuple[float, float]:
    """f(θ) and ‖∇f + 2νθ‖/‖∇f‖ (ν = max(0, −∇fᵀθ/(2‖θ‖²)) on the sphere), in numpy."""
    mu = lambda z: 0.5 * (1 + np.tanh(0.5 * z))  # noqa: E731
    prob = mu(X @ theta)
    residual = X.T @ (prob - mu(X @ mle)) + reg * (theta - mle)
    weighted = design_inv @ residual
    jacobian = (X.T * (prob * (1 - prob))) @ X + reg * np.eye(len(theta))
    gradient = 2 * jacobian @ weighted
    on_sphere = np.linalg.norm(theta) >= bound * (1 - 1e-10)
    nu = max(0.0, -(gradient @ theta) / (2 * theta @ theta)) if on_sphere else 0.0
    return float(residual @ weighted), float(np.linalg.norm(gradient + 2 * nu * theta) / np.linalg.norm(gradient))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", type=Path, help="the other checkout (its root or its src/ folder)")
    parser.add_argument("--build", action="store_true", help="first build the baseline in place")
    parser.add_argument("--policies", default="cqb_opt,cqb_ts,cqb_eps_opt")
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-9"))
    parser.add_argument("--horizon", type=int, default=5000)
    parser.add_argument("--instance", type=json.loads, default=BASE_INSTANCE)
    parser.add_argument("--show", type=int, default=5, help="changed runs to explain")
    args = parser.parse_args(argv)
    policies = args.policies.split(",")
    old = play_tree(trees.baseline(args.baseline, args.build), args.instance, policies, args.seeds, args.horizon)
    new = play_tree(trees.SOURCE, args.instance, policies, args.seeds, args.horizon)
    print(f"Runs of {', '.join(policies)}, seeds {args.seeds[0]}–{args.seeds[-1]}, T = {args.horizon}, instance "
          f"{json.dumps(args.instance)}: this checkout against {args.baseline}.\n")
    print("| policy | runs | queue path changed | a projection changed |")
    print("| --- | ---: | ---: | ---: |")
    changed = []
    for name in policies:
        keys = [(name, seed) for seed in args.seeds]
        moved = [key for key in keys if not np.array_equal(old[key][0], new[key][0])]
        projections_moved = [key for key in keys if _first_difference(old[key][1], new[key][1]) is not None]
        changed += moved + [key for key in projections_moved if key not in moved]  # the moved paths first
        print(f"| {name} | {len(keys)} | {len(moved)} | {len(projections_moved)} |")
    print("\nAt the first update whose projection differs (both trees' θ_k scored on the same problem):\n")
    print("| policy | seed | round | server | n | S/‖θ̂‖ | f old | (f new − f old)/f old | KKT old | KKT new |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key in changed[:args.show]:
        first = _first_difference(old[key][1], new[key][1])
        if first is None:
            continue
        (t, server, theta_old), (_, _, theta_new) = old[key][1][first], new[key][1][first]
        X, mle, design_inv, reg, bound = problem_at(args.instance, key[0], key[1], args.horizon, t)
        f_old, kkt_old = objective_and_kkt(X, mle, design_inv, reg, bound, theta_old)
        f_new, kkt_new = objective_and_kkt(X, mle, design_inv, reg, bound, theta_new)
        print(f"| {key[0]} | {key[1]} | {t} | {server} | {X.shape[0]} | {bound / np.linalg.norm(mle):.6f} | "
              f"{f_old:.6g} | {(f_new - f_old) / f_old:.2g} | {kkt_old:.2g} | {kkt_new:.2g} |")
    return 0


def _first_difference(old: list, new: list) -> int | None:
    """Index of the first projected update whose round, server or θ differs."""
    for index, ((t_old, k_old, theta_old), (t_new, k_new, theta_new)) in enumerate(zip(old, new)):
        if t_old != t_new or k_old != k_new or theta_old.tobytes() != theta_new.tobytes():
            return index
    return None if len(old) == len(new) else min(len(old), len(new))


if __name__ == "__main__":
    sys.exit(main())
