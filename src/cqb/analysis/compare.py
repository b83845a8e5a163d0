"""Two result trees of the same pipeline, run by run: what a change of the
simulation code changed in the numbers.

Usage: cqb compare OLD/results/runs NEW/results/runs [--old-claims OLD.tsv --new-claims NEW.tsv]
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
two claims tables (and, optionally, two readings tables) it lists every
verdict on both sides.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pandas as pd

from .aggregate import read_run_file
from .formatting import format_number
from .summaries import SummarySettings, final_phase_start, run_summary


IMPLEMENTATION_PARAMS = ("kernel",)  # how a run was computed, not what: left out of the pairing


def _run_files(root: Path) -> dict[tuple, tuple[str, dict]]:
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


SUPERSEDED = ("superseded",)  # the key under which _run_files lists the older duplicates


def compare_run_trees(old: Path, new: Path, settings: SummarySettings = SummarySettings()) -> tuple[pd.DataFrame, dict]:
    """Per (instance, horizon, policy) group: runs paired, identical queue paths,
    the median first round at which the others differ, mean tail regrets.
    Also returns the code hashes seen on each side and the unpaired files."""
    old_files, new_files = _run_files(Path(old)), _run_files(Path(new))
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


def comparison_markdown(runs: pd.DataFrame, extra: dict, claims: pd.DataFrame | None = None,
                        readings: pd.DataFrame | None = None) -> str:
    total, identical = int(runs["runs"].sum()), int(runs["identical_paths"].sum())
    lines = [f"Run files compared: {total} (paired by instance, horizon, policy, parameters and seed); code "
             f"{', '.join(extra['hashes']['old']) or '?'} (old) against {', '.join(extra['hashes']['new']) or '?'} "
             f"(new). The same queue path in {identical} of {total} runs "
             f"({100 * identical / total:.1f} %).", ""]
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
    for name, table, columns in (("Claims", claims, ("claim",)), ("Registered readings", readings, ("claim", "reading"))):
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
    return "\n".join(lines) + "\n"
