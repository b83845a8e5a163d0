"""The candidate-policy benchmark: a policy of your own against the paper's.

``snakemake --cores 2 candidates --config candidates='[my_policy]'`` runs each
named policy (a registered policy, plugins included, or a ``policy_variants``
label) on every experiment of ``candidate_benchmark.experiments`` (the paper's:
the base instance, the ϵ, K and d sweeps, the three datasets), at each sweep
value, on the experiment's own seeds. A run file is keyed by (instance,
horizon, label, seed) and a seed's trace depends on the instance and the seed
only, so the candidate plays the very arrivals, contexts and service uniforms
the paper's policies played (common random numbers), and their run files are
reused as they are: only the candidate's runs are new.

The comparison reuses the claims machinery (:mod:`cqb.analysis.claims`): per
(experiment, sweep value) and baseline, a ``best`` check restricted to the
candidate and that baseline, i.e. the mean over seeds, paired by seed, of
(baseline − candidate) of the metric with the claims' skew-corrected t
interval and the verdict vocabulary of docs/verdicts.md; each policy's mean
has the same interval (INTERVAL_METHOD). The leaderboard ranks every
non-oracle policy of each cell by its mean metric, gives its stalled runs
(counted, never dropped) and its paired difference to the candidate.

Pure functions of the config, the plan and per-run summary tables, so they are
tested without Snakemake (tests/test_candidates.py).
"""

from __future__ import annotations

import copy
import hashlib
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..analysis.formatting import format_interval
from ..errors import ConfigError, config_error
from ..analysis.curves import Curve
from ..config.experiments import Run, check_values, expand_experiment
from ..config.panels import SWEEP_SYMBOLS
from ..presentation import display_name

# Every interval the benchmark writes, and its label: the claims' interval
# (cqb.analysis.claims.statistics.mean_interval, Hall's skew-corrected t),
# which keeps its level at the figures' ten seeds where the percentile
# bootstrap under-covers (docs/verdicts.md)
CONFIDENCE = 0.95
INTERVAL_METHOD = f"skew-corrected t {CONFIDENCE:.0%} interval"

# what a claim or a table calls a metric of cqb.analysis.summaries
METRIC_WORDS = {"mean_regret": "mean regret", "tail_regret": "tail regret",
                "final_regret": "final regret", "early_regret": "early regret"}
LEADERBOARD_COLUMNS = ("candidate", "experiment", "sweep_param", "sweep_value", "policy", "display",
                       "is_candidate", "rank", "n_policies", "n_seeds", "metric", "mean", "ci_low",
                       "ci_high", "n_stalled", "stalled_seeds", "delta", "delta_ci_low", "delta_ci_high",
                       "delta_verdict", "n_paired")


@dataclass(frozen=True)
class Candidate:
    label: str  # the run label: a policy name or a policy_variants key
    policy: str
    display: str


@dataclass(frozen=True)
class Benchmark:
    """What the ``candidates`` rule runs and compares."""

    candidates: tuple[Candidate, ...]
    experiments: tuple[str, ...]
    baselines: tuple[str, ...]
    metric: str
    curves: dict  # experiment → [Curve] of the candidates' labels (new or the experiment's own)
    runs: dict  # Curve.run_key → Run: the candidates' runs the plan does not have yet
    title: str = "Candidate benchmark"

    def cell_keys(self) -> dict:
        """(experiment, sweep value) → (instance, horizon, seeds): cells with equal keys share their runs."""
        return {(e, c.sweep_text): (c.instance_id, c.horizon, c.seeds)
                for e, curves in self.curves.items() for c in curves}

    def run_files(self, experiment: str, run_file: str) -> list[str]:
        return [run_file.format(instance_id=c.instance_id, horizon=c.horizon, policy=c.label, seed=s)
                for c in self.curves[experiment] for s in c.seeds]


def _registry():
    from ..sim.policies import registered_policies

    return registered_policies()


def candidate_list(config: Mapping) -> list[Candidate]:
    """The ``candidates`` of the config, each a registered policy or a
    ``policy_variants`` label (ConfigError naming the first bad value)."""
    variants = config["policy_variants"]
    registry = None
    candidates = []
    for label in config["candidates"]:
        if label in variants:
            policy = variants[label]["policy"]
            display = variants[label].get("display", label)
        else:
            registry = registry if registry is not None else _registry()
            if label not in registry:
                config_error("candidates", label, "not a registered policy or a policy_variants label "
                             f"(registered: {', '.join(registry)}; variants: {', '.join(variants) or 'none'})")
            policy, display = label, display_name(label)
        if policy == "oracle":
            config_error("candidates", label, "the oracle is every run's reference (Q*), not a candidate")
        candidates.append(Candidate(label, policy, display))
    labels = [c.label for c in candidates]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        config_error("candidates", repeated, "named twice")
    return candidates


def _candidate_curves(config: Mapping, plan, experiment: str, candidate: Candidate) -> list[Curve]:
    """The candidate's curves in an experiment: its own when the experiment
    already runs the label, else the experiment expanded with the candidate
    as its only label (same instance, horizon, sweep and seeds)."""
    own = [c for c in plan.curves[experiment] if c.base_label == candidate.label]
    if own:
        return own
    derived = copy.deepcopy(dict(config))
    entry = derived["experiments"][experiment]
    is_variant = candidate.label in config["policy_variants"]
    entry["policies"] = [] if is_variant else [candidate.label]
    entry["variants"] = [candidate.label] if is_variant else []
    entry["policy_params"] = {k: v for k, v in entry["policy_params"].items() if k == candidate.label}
    return expand_experiment(derived, experiment)


def benchmark_setup(config: Mapping, plan) -> Benchmark | None:
    """The benchmark of the config's ``candidates`` (None when there are none):
    names, experiments and baselines checked, the candidates' curves and the
    runs the plan lacks. ConfigError names the first bad value."""
    candidates = candidate_list(config)
    if not candidates:
        return None
    settings = config["candidate_benchmark"]
    experiments = tuple(settings["experiments"])
    baselines = tuple(settings["baselines"])
    if not experiments:
        config_error("candidate_benchmark.experiments", [], "no experiment to run the candidates on")
    for name in experiments:
        if name not in plan.curves:
            config_error("candidate_benchmark.experiments", name, f"not an experiment ({', '.join(plan.curves)})")
        labels = {curve.base_label for curve in plan.curves[name]}
        for baseline in baselines:
            if baseline not in labels:
                config_error("candidate_benchmark.baselines", baseline,
                             f"not run in experiment {name} ({', '.join(sorted(labels))})")
    for candidate in candidates:
        if candidate.label in baselines:
            config_error("candidates", candidate.label,
                         "is a baseline of the benchmark (candidate_benchmark.baselines)")
    curves = {name: [curve for candidate in candidates
                     for curve in _candidate_curves(config, plan, name, candidate)] for name in experiments}
    runs = new_runs(plan.runs, curves)
    return Benchmark(tuple(candidates), experiments, baselines, settings["metric"],
                     curves, runs, settings["title"])


def new_runs(existing: Mapping, curves: Mapping[str, Sequence[Curve]]) -> dict:
    """The runs of ``curves`` that ``existing`` (the plan's) does not hold,
    seeds merged per run; a label that the plan runs on the same instance and
    horizon with other parameters is refused (it would share its run files)."""
    runs: dict = {}
    for experiment, experiment_curves in curves.items():
        for curve in experiment_curves:
            key = curve.run_key
            known = existing.get(key) or runs.get(key)
            if known is not None and (known.policy, known.params, known.instance) != (
                    curve.policy, curve.params, curve.instance):
                raise ConfigError(
                    f"invalid config value candidates = {curve.label!r}: experiment {experiment} would run "
                    f"it on {curve.instance_id} (T = {curve.horizon}) with parameters {curve.params}, but "
                    f"{known.experiments[0]} runs that label there with {known.params}; "
                    "give the candidate its own policy_variants label")
            if key in existing and set(curve.seeds) <= set(existing[key].seeds):
                continue
            seeds = set(curve.seeds) | set(runs[key].seeds if key in runs else ())
            previous = runs[key].experiments if key in runs else ()
            runs[key] = Run(curve.instance_id, curve.horizon, curve.label, curve.policy, curve.params,
                            curve.instance, tuple(sorted(seeds)),
                            tuple(dict.fromkeys(previous + (f"candidates:{experiment}",))))
    for run in runs.values():
        check_values(run.policy, run.params, run.instance, run.horizon,
                     f"candidates: parameters of {run.label} in {run.experiments[0]} (T = {run.horizon})")
    return runs


def add_runs(plan_runs: dict, runs: Mapping) -> None:
    """Put the benchmark's runs into the plan's run table (in place), seeds
    merged with a run the plan already has."""
    for key, run in runs.items():
        if key in plan_runs:
            old = plan_runs[key]
            run = Run(old.instance_id, old.horizon, old.label, old.policy, old.params, old.instance,
                      tuple(sorted(set(old.seeds) | set(run.seeds))), old.experiments + run.experiments)
        plan_runs[key] = run


def policy_source(policy: str) -> str:
    """Where a policy's code lives and a hash of it (a plugin's code is not
    part of the simulation code hash, so its run files do not follow it)."""
    from ..sim.policies import get_spec

    factory = get_spec(policy).factory
    module = sys.modules.get(factory.__module__)
    path = getattr(module, "__file__", None)
    if not path or not Path(path).exists():
        return f"{policy}: module {factory.__module__}"
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    return f"{policy}: module {factory.__module__}, source sha256 {digest}"


# ---------------------------------------------------------------- the comparison


def sweep_text(sweep_param: str, sweep_value: str) -> str:
    if sweep_value == "":
        return ""
    return f"{SWEEP_SYMBOLS.get(sweep_param, sweep_param)} = {sweep_value}"


def _cells(runs):
    """(sweep_param, sweep_value, rows) per sweep value, in table order."""
    for value, rows in runs.groupby("sweep_value", sort=False):
        yield rows["sweep_param"].iloc[0], value, rows


def paired_comparison(rows, candidate: str, other: str, metric: str, name: str, experiment: str, value: str):
    """Paired by seed, mean of (other − candidate) of ``metric`` with its
    interval (INTERVAL_METHOD) and verdict (holds: the candidate is lower):
    the ``best`` check (cqb.analysis.claims.kinds) on the two policies alone."""
    from ..analysis.claims.kinds import BEST, check_claim
    from ..analysis.claims.registry import ClaimSpec

    pair = rows[rows["policy"].isin([candidate, other])]
    spec = ClaimSpec(name=name, statement="", kind=BEST, experiment=experiment, policies=(candidate,),
                     metric=metric, sweep_values=(value,) if value != "" else ())
    return check_claim(pair, spec, CONFIDENCE)


def _check_seeds(rows, candidate: str, experiment: str, value: str) -> None:
    seeds = {policy: set(group["seed"]) for policy, group in rows.groupby("policy")}
    mine = seeds[candidate]
    for policy, theirs in seeds.items():
        if theirs != mine:
            raise ValueError(f"experiment {experiment} {value or ''}: {candidate} ran on seeds {sorted(mine)}, "
                             f"{policy} on {sorted(theirs)}; the comparison is paired by seed")


def leaderboard(runs: Mapping[str, "pd.DataFrame"], candidates: Sequence[str], metric: str = "mean_regret",
                display_names: Mapping[str, str] | None = None):
    """One row per (candidate, experiment, sweep value, non-oracle policy):
    rank by the mean metric (1 = lowest), its interval (INTERVAL_METHOD), stalled runs,
    and the paired difference (policy − candidate) with its interval and verdict
    (holds: the candidate is lower). ``runs``: experiment → per-run summaries
    (cqb.analysis.summaries.RUN_COLUMNS) holding the paper's policies and the candidates."""
    import numpy as np
    import pandas as pd

    from ..analysis.claims.statistics import mean_interval

    display_names = display_names or {}
    rows = []
    for candidate in candidates:
        for experiment, table in runs.items():
            for sweep_param, value, cell in _cells(table[table["policy"] != "oracle"]):
                if candidate not in set(cell["policy"]):
                    raise ValueError(f"experiment {experiment}: no runs of candidate {candidate!r}"
                                     + (f" at {sweep_param} = {value}" if value != "" else ""))
                _check_seeds(cell, candidate, experiment, value)
                policies = list(dict.fromkeys(cell["policy"]))
                means = {p: float(cell.loc[cell["policy"] == p, metric].mean()) for p in policies}
                order = sorted(policies, key=lambda p: (means[p], p))
                for policy in order:
                    group = cell[cell["policy"] == policy]
                    low, high = mean_interval(group[metric].to_numpy(dtype=np.float64), CONFIDENCE)
                    stalled = group["stalled"].astype(bool)
                    if policy == candidate:
                        delta = (math.nan, math.nan, math.nan, "", len(group))
                    else:
                        result = paired_comparison(cell, candidate, policy, metric, "leaderboard", experiment, value)
                        delta = (result.value, result.ci_low, result.ci_high, result.verdict, result.n_seeds)
                    rows.append({
                        "candidate": candidate, "experiment": experiment, "sweep_param": sweep_param,
                        "sweep_value": value, "policy": policy, "display": display_names.get(policy, policy),
                        "is_candidate": policy == candidate,
                        "rank": 1 + sum(means[p] < means[policy] for p in policies),
                        "n_policies": len(policies), "n_seeds": len(group), "metric": metric,
                        "mean": means[policy], "ci_low": low, "ci_high": high,
                        "n_stalled": int(stalled.sum()),
                        "stalled_seeds": " ".join(str(s) for s in sorted(group.loc[stalled, "seed"])) or "-",
                        "delta": delta[0], "delta_ci_low": delta[1], "delta_ci_high": delta[2],
                        "delta_verdict": delta[3], "n_paired": delta[4]})
    return pd.DataFrame(rows, columns=list(LEADERBOARD_COLUMNS))


def candidate_claims(runs: Mapping[str, "pd.DataFrame"], candidates: Sequence[str], baselines: Sequence[str],
                     metric: str = "mean_regret", display_names: Mapping[str, str] | None = None,
                     cell_keys: Mapping | None = None):
    """Claims "<candidate> has lower <metric> than <baseline> on <experiment>
    (at <sweep value>)", one per candidate, baseline, experiment and sweep
    value, in the claims table's columns (cqb.analysis.claims.registry.CLAIM_COLUMNS) and the
    candidate's and the baseline's labels. ``cell_keys``: (experiment, sweep
    value) → what identifies its runs (instance, horizon, seeds); a cell with
    the runs of an earlier one (the base instance inside each sweep) is the
    same comparison and is claimed once, under the first experiment."""
    import pandas as pd

    from ..analysis.claims.registry import CLAIM_COLUMNS

    display_names = display_names or {}
    cell_keys = cell_keys or {}
    words = METRIC_WORDS.get(metric, metric)
    rows = []
    for candidate in candidates:
        for baseline in baselines:
            seen = set()
            for experiment, table in runs.items():
                for sweep_param, value, cell in _cells(table):
                    key = cell_keys.get((experiment, value), (experiment, value))
                    if key in seen:
                        continue
                    seen.add(key)
                    _check_seeds(cell[cell["policy"].isin([candidate, baseline])], candidate, experiment, value)
                    at = sweep_text(sweep_param, value)
                    name = f"{candidate}_below_{baseline}_{experiment}" + (f"_{sweep_param}{value}" if at else "")
                    result = paired_comparison(cell, candidate, baseline, metric, name, experiment, value)
                    statement = (f"{display_names.get(candidate, candidate)} has lower {words} than "
                                 f"{display_names.get(baseline, baseline)} on {experiment}"
                                 + (f" ({at})" if at else ""))
                    statistic = (f"paired by seed, mean of ({metric} of {baseline} − {metric} of {candidate}), "
                                 f"{INTERVAL_METHOD}; holds above 0")
                    rows.append({"claim": name, "figure": "candidates", "experiment": experiment,
                                 "statement": statement, "statistic": statistic, "value": result.value,
                                 "ci_low": result.ci_low, "ci_high": result.ci_high, "verdict": result.verdict,
                                 "n_seeds": result.n_seeds, "detail": result.detail,
                                 "candidate": candidate, "baseline": baseline})
    return pd.DataFrame(rows, columns=list(CLAIM_COLUMNS) + ["candidate", "baseline"])


def summary_markdown(board, claims, header: str = "", title: str = "Candidate benchmark",
                     sources: Sequence[str] = ()) -> str:
    """The benchmark as Markdown: per candidate and baseline a count of
    verdicts, the claims, then the leaderboard of every cell."""
    from ..analysis.verdict_rules import FAILS, HOLDS, INCONCLUSIVE

    lines = [header, ""] if header else []
    lines += [f"**{title}.** Per (experiment, sweep value): every policy on the same seeds and traces "
              "(common random numbers); Δ = paired by seed, mean over seeds of (policy − candidate), "
              f"{INTERVAL_METHOD} (each policy's mean too): above 0, the candidate has the lower value "
              "(docs/extending.md, 'The candidate-policy benchmark'; the interval: docs/verdicts.md).", ""]
    if sources:
        lines += ["Policy code: " + "; ".join(sources) + ".", ""]
    for (candidate, baseline), group in claims.groupby(["candidate", "baseline"], sort=False):
        counts = {v: int((group["verdict"] == v).sum()) for v in (HOLDS, FAILS, INCONCLUSIVE)}
        lines.append(f"- {candidate} against {baseline}: lower in **{counts[HOLDS]}** of {len(group)} cells, "
                     f"higher in **{counts[FAILS]}**, inconclusive in **{counts[INCONCLUSIVE]}**.")
    lines += ["", "(A cell with the same runs as an earlier one, such as the base instance inside each sweep, "
              "is claimed once, under the first experiment; the leaderboard lists it in every experiment.)"]
    label = f"[{INTERVAL_METHOD}]"
    lines += ["", f"| claim | Δ {label} | verdict | n seeds |", "| --- | --- | --- | ---: |"]
    for row in claims.itertuples():
        lines.append(f"| {row.statement} | {format_interval(row.value, row.ci_low, row.ci_high)} | "
                     f"**{row.verdict}** | {row.n_seeds} |")
    lines += ["", "Leaderboard (rank 1 = lowest mean; stalled: runs whose tail regret exceeds the stall "
              "threshold, docs/verdicts.md):", "",
              f"| candidate | experiment | sweep | rank | policy | mean {label} | stalled | "
              f"Δ vs candidate {label} | verdict |",
              "| --- | --- | --- | ---: | --- | --- | ---: | --- | --- |"]
    for row in board.itertuples():
        name = f"**{row.display}**" if row.is_candidate else row.display
        lines.append(f"| {row.candidate} | {row.experiment} | {sweep_text(row.sweep_param, row.sweep_value) or '–'} "
                     f"| {row.rank}/{row.n_policies} | {name} | {format_interval(row.mean, row.ci_low, row.ci_high)} | "
                     f"{row.n_stalled}/{row.n_seeds} | "
                     f"{'–' if row.is_candidate else format_interval(row.delta, row.delta_ci_low, row.delta_ci_high)} | "
                     f"{row.delta_verdict or '–'} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- publishing

PUBLISHED = ("candidates.md", "candidates.tsv", "candidates_claims.tsv")
