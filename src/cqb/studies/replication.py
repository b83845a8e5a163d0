"""The replication study's config side (docs/verdicts.md, "The replication
study"): every decided verdict of the published powered reading (and every
decided per-policy verdict) judged again on fresh seeds, one look of a size
set by a power analysis at a shrunken effect (:mod:`cqb.analysis.replication_statistics`),
registered before any of its runs.

Each entry of ``replication.claims`` becomes a one-look
:class:`cqb.analysis.powered_reading.PoweredClaim` named ``{claim}__replication`` (a
per-policy entry ``{claim}__{policy}__replication``, that policy's runs at
every sweep value of the claim), so the powered reading's look machinery
runs it. ``python -m cqb.studies.replication config/config.yaml`` reads the
published tables the study was registered from (``replication.sources``, a
folder per registration, each adding the verdicts decided since the one
before), prints the power analysis and writes it beside the config
(``replication_power.json``): the registration's record of where each sample
size comes from.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..analysis.powered_reading import PoweredClaim, claim_units
from ..analysis.replication_statistics import (Target, kind_bound, replication_rows, replication_targets,
                                    target_analysis)
from .confirmatory import entry_claim
from ..errors import config_error

POWER_FILE = "replication_power.json"
SOURCE_TABLES = ("claims_powered.tsv", "claims_per_policy.tsv", "claims_confirmatory.tsv", "fig8.tsv")


def entry_name(entry: Mapping) -> str:
    policy = entry.get("policy") or ""
    return f"{entry['name']}__{policy}__replication" if policy else f"{entry['name']}__replication"


def read_table(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", keep_default_na=False, na_values=[""])


def registration_sources(config: Mapping) -> list[str]:
    """The folders of published tables the study was registered from, in
    registration order (``replication.sources``)."""
    return list((config.get("replication") or {}).get("sources", ["docs/results"]))


def folder_targets(config: Mapping, folder: Path):
    """Every decided verdict of the published tables in ``folder``."""
    powered, per_policy, confirmatory, multiverse = (folder / name for name in SOURCE_TABLES)
    return replication_targets(config, read_table(powered), read_table(per_policy),
                               read_table(confirmatory) if confirmatory.exists() else None,
                               read_table(multiverse) if multiverse.exists() else None)


def sourced_targets(config: Mapping, root: Path) -> list[tuple[str, Target]]:
    """(source, verdict) of every verdict to replicate: each registration
    folder's decided verdicts that no earlier folder registered, so a later
    registration adds verdicts and never re-sizes an earlier one."""
    seen, targets = set(), []
    for source in registration_sources(config):
        for target in folder_targets(config, root / source):
            if target.name not in seen:
                seen.add(target.name)
                targets.append((source, target))
    return targets


def source_targets(config: Mapping, root: Path) -> list[Target]:
    """The verdicts to replicate, in registration order (:func:`sourced_targets`)."""
    return [target for _, target in sourced_targets(config, root)]


def registered_analysis(config: Mapping, root: Path) -> dict:
    """{replication claim name: power analysis, with the folder it was
    registered from} of every verdict to replicate; the size is at least
    ``min_seeds``."""
    study = config.get("replication") or {}
    alpha, power = float(study.get("alpha", 0.05)), float(study.get("power", 0.9))
    cap, floor = int(study.get("max_seeds", 1000)), int(study.get("min_seeds", 20))
    analyses = {}
    for source, target in sourced_targets(config, root):
        analysis = target_analysis(target, alpha, power, cap)
        analysis["seeds"] = max(floor, analysis["seeds"])
        analyses[target.name] = {**analysis, "registered_from": source}
    return analyses


def replication_claims(config: Mapping, plan, specs) -> dict[str, PoweredClaim]:
    """The replication's claims, each a one-look PoweredClaim at the study's
    α on seeds from its first_seed: a claim's entry runs all of its
    comparisons, a policy's entry that policy's at the claim's sweep values."""
    study = config.get("replication") or {}
    by_name = {spec.name: spec for spec in specs}
    margins = config.get("claim_margins") or {}
    cap = int(study.get("max_seeds", 1000))
    claims = {}
    for index, entry in enumerate(study.get("claims", [])):
        key = f"replication.claims[{index}]"
        base = entry_claim(by_name, entry, key)
        policy = entry.get("policy") or ""
        seeds = int(entry["seeds"])
        if not 1 < seeds <= cap:
            config_error(f"{key}.seeds", seeds, f"must lie in 2 … replication.max_seeds ({cap})")
        suffix = f", for {policy} (replication)" if policy else " (replication)"
        spec = replace(base, name=entry_name(entry), policies=(policy,) if policy else base.policies,
                       readings=(), statement=base.statement + suffix)
        units = claim_units(spec, plan.curves[spec.experiment])
        claims[spec.name] = PoweredClaim(spec, (seeds,), int(study["first_seed"]), float(study.get("alpha", 0.05)),
                                         float(margins.get(spec.kind, 0.0)), units,
                                         {kind: float(v) for kind, v in margins.items()})
    return claims


def replication_seeds(config: Mapping) -> set[int]:
    """Every seed the study may use: first_seed … first_seed + max_seeds − 1
    (reserved whole, so a re-registration within the cap stays fresh of
    every other use)."""
    study = config.get("replication") or {}
    if not study.get("claims"):
        return set()
    first = int(study["first_seed"])
    return set(range(first, first + int(study.get("max_seeds", 1000))))


def original_verdicts(powered: pd.DataFrame, per_policy: pd.DataFrame) -> dict[str, dict]:
    """{replication claim name: this run's original verdict, n and interval}:
    the powered reading's row for a claim, the per-policy row for a policy."""
    originals = {}
    for _, row in powered.iterrows():
        originals[f"{row['claim']}__replication"] = {k: row[s] for k, s in (
            ("verdict", "verdict"), ("n", "n_seeds"), ("ci_low", "ci_low"), ("ci_high", "ci_high"))}
    for _, row in per_policy.iterrows():
        originals[f"{row['claim']}__{row['policy']}__replication"] = {k: row[s] for k, s in (
            ("verdict", "verdict"), ("n", "n_seeds"), ("ci_low", "ci_low"), ("ci_high", "ci_high"))}
    return originals


def replication_table(config: Mapping, figures: Path, states: Mapping[str, Mapping]) -> pd.DataFrame:
    """claims_replication.tsv: each registered entry's original verdict (this
    run's tables in ``figures``) against its replication (``states``: name →
    its one look's state), judged against the claim kind's threshold and
    registered margin."""
    entries = {e["name"]: e for e in config.get("claims", [])}
    margins = config.get("claim_margins") or {}
    originals = original_verdicts(read_table(figures / "claims_powered.tsv"),
                                  read_table(figures / "claims_per_policy.tsv"))
    targets = []
    for entry in (config.get("replication") or {}).get("claims", []):
        name, claim = entry_name(entry), entries[entry["name"]]
        if name not in originals:
            raise ValueError(f"replication entry {name}: {figures} has no original verdict for it")
        original = originals[name]
        threshold, upward = kind_bound(claim)
        targets.append(Target(entry["name"], entry.get("policy") or "", claim["kind"], original["verdict"],
                              int(original["n"]), math.nan, float(original["ci_low"]), float(original["ci_high"]),
                              (), threshold, upward, float(margins.get(claim["kind"], 0.0))))
    return replication_rows(targets, originals, states)


def calibration_designs(config: Mapping, record: Path) -> dict[str, dict]:
    """{claim: its registered claim-level replication (seeds, alpha, the
    shrunken effect of its decisive comparison)} from the registration's
    record ``record`` (config/replication_power.json), for the calibration;
    {} without a record."""
    if not record.exists():
        return {}
    analyses = json.loads(record.read_text())
    registered = {entry_name(e): int(e["seeds"]) for e in (config.get("replication") or {}).get("claims", [])}
    designs = {}
    for name, analysis in analyses.items():
        if analysis["policy"] or name not in registered:
            continue
        effect = next(row["effect"] for row in analysis["comparisons_power"]
                      if row["comparison"] == analysis["decisive"])
        designs[analysis["claim"]] = {"seeds": registered[name], "alpha": analysis["alpha"], "effect": effect}
    return designs


def main(argv=None) -> int:
    import yaml

    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0] if argv else "config/config.yaml")
    config = yaml.safe_load(path.read_text())
    analyses = registered_analysis(config, path.resolve().parent.parent)
    text = json.dumps(analyses, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    (path.parent / POWER_FILE).write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
