"""Two result trees of the same pipeline, run by run: what a change of the
simulation code changed in the numbers.

Usage: cqb compare OLD/results/runs NEW/results/runs [--old-claims OLD.tsv --new-claims NEW.tsv]
                   [--old-readings … --new-readings …] [--old-powered … --new-powered …]
                   [--old-comparisons OLD.tsv --new-comparisons NEW.tsv] [--mechanism WHY.md]
                   [--out docs/results/code_change.md]

Pairs the run files by what they ran — instance folder, horizon, policy, its
resolved parameters (all but ``kernel``, the implementation) and seed: the
same trace and the same policy on both sides, even where a changed default
moved a run to another label — and reports per (instance, horizon, run label
of the new tree): how many runs took the very same queue path, the round at
which the others first parted, and the mean and tail regret (Q − Q* over all
rounds; over the last 10 % of rounds, or of the final phase of a policy with a
cutoff: the pipeline's own summary, cqb.analysis.summaries.run_summary) on
either side, with the paired difference new − old over the seeds and its 95 %
t interval (both sides play the same trace, so the difference is sharp). With
two claims tables (and, optionally, two readings tables and two powered
tables, claims_powered.tsv) it lists every verdict on both sides; with two comparisons tables (claims_comparisons.tsv of
the figures folder: every interval a claim's verdict combines, so one can
change while the claim's stays) every comparison's verdict, value and
interval on both sides (for a tree made before the pipeline wrote that
table: python -m bench.claims_comparisons TREE). The changed paths are counted per policy and instance
family (:func:`instance_family`), and a Markdown file given as ``mechanism``
(what a tool such as bench/projection_diff.py found at the rounds where paths
part) goes in under "Why the paths changed".
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import numpy as np
import pandas as pd

from .aggregate import read_run_file
from .formatting import format_number
from .summaries import SummarySettings, final_phase_start, run_summary


IMPLEMENTATION_PARAMS = ("kernel",)  # how a run was computed, not what: left out of the pairing


def run_files(root: Path) -> dict[tuple, tuple[str, dict]]:
    """{what the run ran: (relative path, the loaded run)} for every run file below ``root``.
    Two files that ran the same thing (a leftover under a label a changed default
    retired) resolve to the newer file; the older is listed under ``superseded``."""
    files, superseded = {}, []
    for path in sorted(Path(root).rglob("*.npz"), key=lambda p: (p.stat().st_mtime, str(p))):
        run = read_run_file(path)
        meta = run["metadata"]
        params = {k: v for k, v in (meta.get("policy_params") or {}).items() if k not in IMPLEMENTATION_PARAMS}
        instance, horizon = path.relative_to(root).parts[-4:-2]
        key = (instance, horizon, meta.get("policy"), json.dumps(params, sort_keys=True), meta.get("seed"))
        if key in files:
            superseded.append(files[key][0])
        files[key] = (str(path.relative_to(root)), run)
    files[SUPERSEDED] = superseded
    return files


SUPERSEDED = ("superseded",)  # the key under which run_files lists the older duplicates


def compare_run_trees(old: Path, new: Path, settings: SummarySettings = SummarySettings()) -> tuple[pd.DataFrame, dict]:
    """Per (instance, horizon, policy) group: runs paired, identical queue paths,
    the median first round at which the others differ, mean tail regrets.
    Also returns the code hashes seen on each side and the unpaired files."""
    old_files, new_files = run_files(Path(old)), run_files(Path(new))
    superseded = {"old": old_files.pop(SUPERSEDED), "new": new_files.pop(SUPERSEDED)}
    paired = sorted(set(old_files) & set(new_files), key=str)
    if not paired:
        raise ValueError(f"no run below {old} ran the same instance, policy, parameters and seed as one below {new}")
    groups: dict[tuple, dict] = {}
    hashes = {"old": set(), "new": set()}
    stall_changes = []
    for key in paired:
        (_, before), (name, after) = old_files[key], new_files[key]
        instance, horizon, policy, _seed = Path(name).parts[-4:]
        hashes["old"].add(before["metadata"].get("code_hash"))
        hashes["new"].add(after["metadata"].get("code_hash"))
        group = groups.setdefault((instance, horizon, policy), {"runs": 0, "identical": 0, "parted_at": [],
                                                                "tail_old": [], "tail_new": [],
                                                                "mean_old": [], "mean_new": []})
        group["runs"] += 1
        differs = np.flatnonzero(before["queue"] != after["queue"])
        if differs.size == 0:
            group["identical"] += 1
        else:
            group["parted_at"].append(int(differs[0]) + 1)  # rounds count from 1
        # the pipeline's own tail window and stall flag (a policy with a cutoff
        # has its tail inside the final phase)
        summaries = [run_summary(run["queue"], run["oracle_queue"], settings, final_phase_start(run["metadata"]))
                     for run in (before, after)]
        group["tail_old"].append(summaries[0]["tail_regret"])
        group["tail_new"].append(summaries[1]["tail_regret"])
        group["mean_old"].append(summaries[0]["mean_regret"])
        group["mean_new"].append(summaries[1]["mean_regret"])
        if summaries[0]["stalled"] != summaries[1]["stalled"]:
            stall_changes.append({"run": name, "first_difference": int(differs[0]) + 1,
                                  "tail_regret_old": summaries[0]["tail_regret"],
                                  "tail_regret_new": summaries[1]["tail_regret"]})
    rows = []
    for (instance, horizon, policy), group in sorted(groups.items()):
        row = {"instance": instance, "horizon": int(horizon.lstrip("T")), "policy": policy,
               "runs": group["runs"], "identical_paths": group["identical"],
               "median_first_difference": statistics.median(group["parted_at"]) if group["parted_at"] else None}
        for what in ("mean", "tail"):
            old_values, new_values = np.array(group[f"{what}_old"]), np.array(group[f"{what}_new"])
            low, high = paired_interval(new_values - old_values)
            row.update({f"{what}_regret_old": float(old_values.mean()), f"{what}_regret_new": float(new_values.mean()),
                        f"{what}_difference": float((new_values - old_values).mean()),
                        f"{what}_difference_low": low, f"{what}_difference_high": high})
        rows.append(row)
    extra = {"hashes": {side: sorted(h for h in values if h) for side, values in hashes.items()},
             "only_old": sorted(old_files[key][0] for key in set(old_files) - set(new_files)),
             "only_new": sorted(new_files[key][0] for key in set(new_files) - set(old_files)),
             "stall_changes": stall_changes, "stall_threshold": settings.stall_threshold,
             "superseded": superseded}
    return pd.DataFrame(rows), extra


def paired_interval(differences: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The t interval of the mean of paired differences (one per seed); the
    point itself when they are all equal or there is one."""
    from scipy import stats

    differences = np.asarray(differences, dtype=np.float64)
    centre = float(differences.mean())
    if differences.size < 2 or np.all(differences == differences[0]):
        return centre, centre
    half = float(stats.t.ppf(0.5 + confidence / 2, differences.size - 1)
                 * differences.std(ddof=1) / np.sqrt(differences.size))
    return centre - half, centre + half


def compare_readings(old_tsv: Path, new_tsv: Path) -> pd.DataFrame:
    """Every registered reading's verdict on both sides (claim, reading), with its value."""
    key = ["claim", "reading"]
    old = pd.read_csv(old_tsv, sep="\t").set_index(key)
    new = pd.read_csv(new_tsv, sep="\t").set_index(key)
    rows = []
    for claim, reading in sorted(set(old.index) | set(new.index)):
        row = {"claim": claim, "reading": reading}
        for side, table in (("old", old), ("new", new)):
            found = (claim, reading) in table.index
            row[f"verdict_{side}"] = table.loc[(claim, reading), "verdict"] if found else "absent"
            row[f"value_{side}"] = table.loc[(claim, reading), "value"] if found else None
        rows.append(row)
    return pd.DataFrame(rows)


def compare_claims(old_tsv: Path, new_tsv: Path) -> pd.DataFrame:
    """Claims whose verdict differs between two claims tables (or that only one has)."""
    old = pd.read_csv(old_tsv, sep="\t").set_index("claim")
    new = pd.read_csv(new_tsv, sep="\t").set_index("claim")
    rows = []
    for claim in sorted(set(old.index) | set(new.index)):
        before = old["verdict"].get(claim, "absent")
        after = new["verdict"].get(claim, "absent")
        rows.append({"claim": claim, "verdict_old": before, "verdict_new": after,
                     "value_old": old["value"].get(claim), "value_new": new["value"].get(claim)})
    return pd.DataFrame(rows)


COMPARISON_KEY = ["claim", "source", "comparison"]


def compare_comparisons(old_tsv: Path, new_tsv: Path) -> pd.DataFrame:
    """Every comparison of two comparisons tables (claims_comparisons.tsv),
    keyed by claim, source and comparison, in the tables' order: verdict,
    value, interval and n on both sides (verdict ``absent`` where one lacks it)."""
    tables = {}
    for side, path in (("old", old_tsv), ("new", new_tsv)):
        table = pd.read_csv(path, sep="\t")
        missing = sorted({*COMPARISON_KEY, "verdict", "value", "ci_low", "ci_high", "n"} - set(table.columns))
        if missing:
            raise ValueError(f"{path} is not a comparisons table (claims_comparisons.tsv): it lacks {missing}")
        tables[side] = table.set_index(COMPARISON_KEY)
    rows = []
    for key in dict.fromkeys([*tables["old"].index, *tables["new"].index]):
        row = dict(zip(COMPARISON_KEY, key))
        for side, table in tables.items():
            found = table.loc[key] if key in table.index else None
            row[f"verdict_{side}"] = "absent" if found is None else found["verdict"]
            for column in ("value", "ci_low", "ci_high", "n"):
                row[f"{column}_{side}"] = None if found is None else found[column]
        rows.append(row)
    return pd.DataFrame(rows)


def instance_family(instance: str) -> str:
    """An instance folder without its arrival rate, slack and the like, and
    without a pool's variant: synth_K5_d10_lam0.7_eps0.1_acc0.005 → synth_K5_d10,
    pool_mnist-C10_lam0.15 → pool_mnist."""
    return re.sub(r"_lam.*$", "", instance).split("-")[0]


def changed_paths_table(runs: pd.DataFrame) -> list[str]:
    """Markdown: changed queue paths / runs per policy (a run label without
    its parameter suffix) and instance family, with totals."""
    table = runs.assign(policy=runs["policy"].str.split(".", n=1).str[0], family=runs["instance"].map(instance_family),
                        changed=runs["runs"] - runs["identical_paths"])
    sums = table.groupby(["policy", "family"])[["changed", "runs"]].sum()
    families = sorted(table["family"].unique())
    policies = sorted(table["policy"].unique())

    def cell(rows):
        return f"{int(rows['changed'].sum())}/{int(rows['runs'].sum())}" if len(rows) else ""

    lines = ["| policy | " + " | ".join(families) + " | all |", "| --- |" + " ---: |" * (len(families) + 1)]
    for policy in policies + ["all"]:
        mine = table if policy == "all" else table[table["policy"] == policy]
        cells = [cell(mine[mine["family"] == family]) if policy == "all" or (policy, family) in sums.index else ""
                 for family in families]
        lines.append(f"| {policy} | " + " | ".join(cells) + f" | {cell(mine)} |")
    return lines


def _interval_text(value, low, high, n) -> str:
    if value is None or pd.isna(value):
        return ""
    interval = "" if low is None or pd.isna(low) else \
        f" [{format_number(low, 3, missing='')}, {format_number(high, 3, missing='')}]"
    count = "" if n is None or pd.isna(n) else f" n={int(n)}"
    return f"{format_number(value, 4, missing='')}{interval}{count}"


def comparisons_markdown(table: pd.DataFrame) -> list[str]:
    changed = table[table["verdict_old"] != table["verdict_new"]]
    names = "; ".join(f"`{r.claim}` ({r.source}) {r.comparison}: {r.verdict_old} → {r.verdict_new}"
                      for r in changed.itertuples())
    lines = ["", f"Comparisons (every interval a claim's verdict combines, at the figures' seeds, in the powered "
             f"reading's last look and in the confirmatory study): {len(table)} in either table; {len(changed)} "
             f"changed verdict{': ' + names if names else ''}.", "",
             "| claim | source | comparison | verdict old | verdict new | old: value [interval] n | "
             "new: value [interval] n | changed |", "| --- | --- | --- | --- | --- | ---: | ---: | --- |"]
    for row in table.itertuples():
        mark = "**yes**" if row.verdict_old != row.verdict_new else ""
        lines.append(f"| {row.claim} | {row.source} | {row.comparison} | {row.verdict_old} | {row.verdict_new} | "
                     f"{_interval_text(row.value_old, row.ci_low_old, row.ci_high_old, row.n_old)} | "
                     f"{_interval_text(row.value_new, row.ci_low_new, row.ci_high_new, row.n_new)} | {mark} |")
    return lines


def _changed_count(table: pd.DataFrame | None, name: str) -> str | None:
    if table is None:
        return None
    return f"{int((table['verdict_old'] != table['verdict_new']).sum())} of {len(table)} {name}"


def comparison_markdown(runs: pd.DataFrame, extra: dict, claims: pd.DataFrame | None = None,
                        readings: pd.DataFrame | None = None, comparisons: pd.DataFrame | None = None,
                        mechanism: str | None = None, powered: pd.DataFrame | None = None) -> str:
    total, identical = int(runs["runs"].sum()), int(runs["identical_paths"].sum())
    lines = [f"Run files compared: {total} (paired by instance, horizon, policy, parameters and seed); code "
             f"{', '.join(extra['hashes']['old']) or '?'} (old) against {', '.join(extra['hashes']['new']) or '?'} "
             f"(new). The same queue path in {identical} of {total} runs "
             f"({100 * identical / total:.1f} %).", ""]
    counts = [c for c in (_changed_count(claims, "claims"), _changed_count(comparisons, "comparisons"),
                          _changed_count(readings, "registered readings"),
                          _changed_count(powered, "powered readings")) if c]
    if counts:
        lines += [f"Changed verdicts: {', '.join(counts)}.", ""]
    superseded = extra.get("superseded", {})
    if any(superseded.values()):
        lines += [f"Superseded (an older file that ran the same as a newer one, left out): "
                  f"{len(superseded.get('old', []))} in the old tree, {len(superseded.get('new', []))} in the new.", ""]
    if extra["only_old"] or extra["only_new"]:
        lines += [f"Unpaired: {len(extra['only_old'])} run files only in the old tree, "
                  f"{len(extra['only_new'])} only in the new.", ""]
    by_policy = runs.groupby("policy")[["runs", "identical_paths"]].sum()
    lines += ["| policy | runs | same queue path |", "| --- | ---: | ---: |"]
    lines += [f"| {policy} | {int(row.runs)} | {int(row.identical_paths)} ({100 * row.identical_paths / row.runs:.0f} %) |"
              for policy, row in by_policy.iterrows()]
    lines += ["", "Changed queue paths / runs per policy (run labels of one policy together) and instance family "
              "(the instance without its arrival rate, slack and pool variant):", ""] + changed_paths_table(runs)
    lines += ["", "Per instance, horizon and run label: the mean regret (Q − Q* over all rounds) and the tail "
              "regret (over the last 10 % of rounds, within the final phase for a policy with a cutoff), "
              "each the mean over the paired seeds, old and new, and the paired difference new − old with "
              "its 95 % t interval; the first differing round is the median over the runs whose path changed.",
              "", "| instance | T | policy | runs | same path | first differing round | mean regret old → new | "
              "difference [95 % CI] | tail regret old → new | difference [95 % CI] |",
              "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in runs.itertuples():
        first = "" if row.median_first_difference is None or pd.isna(row.median_first_difference) \
            else f"{row.median_first_difference:.0f}"
        cells = [f"{getattr(row, f'{what}_regret_old'):.4g} → {getattr(row, f'{what}_regret_new'):.4g} | "
                 f"{getattr(row, f'{what}_difference'):+.3g} [{getattr(row, f'{what}_difference_low'):+.3g}, "
                 f"{getattr(row, f'{what}_difference_high'):+.3g}]" for what in ("mean", "tail")]
        lines.append(f"| {row.instance} | {row.horizon} | {row.policy} | {row.runs} | {row.identical_paths} | "
                     f"{first} | {cells[0]} | {cells[1]} |")
    changes = extra.get("stall_changes", [])
    lines += ["", f"Runs stalled on one side only (tail regret above {extra.get('stall_threshold')} jobs): "
              f"{len(changes)}.", ""]
    if changes:
        lines += ["| run (new tree) | first differing round | tail regret old | tail regret new |",
                  "| --- | ---: | ---: | ---: |"]
        lines += [f"| {c['run']} | {c['first_difference']} | {c['tail_regret_old']:.4g} | {c['tail_regret_new']:.4g} |"
                  for c in changes]
    for name, table, columns in (("Claims", claims, ("claim",)), ("Registered readings", readings, ("claim", "reading")),
                                 ("Powered readings (fresh seeds, sequential looks)", powered, ("claim",))):
        if table is None:
            continue
        changed = table[table["verdict_old"] != table["verdict_new"]]
        lines += ["", f"{name}: {len(table)} in either table; {len(changed)} changed verdict.", "",
                  "| " + " | ".join(columns) + " | verdict old | verdict new | value old | value new | changed |",
                  "| " + " | ".join("---" for _ in columns) + " | --- | --- | ---: | ---: | --- |"]
        for row in table.itertuples():
            names = " | ".join(str(getattr(row, column)) for column in columns)
            mark = "**yes**" if row.verdict_old != row.verdict_new else ""
            lines.append(f"| {names} | {row.verdict_old} | {row.verdict_new} | "
                         f"{format_number(row.value_old, 4, missing='')} | {format_number(row.value_new, 4, missing='')} | "
                         f"{mark} |")
        if name == "Claims" and comparisons is not None:
            lines += comparisons_markdown(comparisons)
    if claims is None and comparisons is not None:
        lines += comparisons_markdown(comparisons)
    if mechanism:  # last: a heading would otherwise take in the tables after it
        lines += ["", "## Why the paths changed", "", mechanism.strip()]
    return "\n".join(lines) + "\n"
