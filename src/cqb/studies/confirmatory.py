"""The confirmatory study's config side (docs/verdicts.md, "The confirmatory
study"): a claim left undecided at the powered reading's cap, for one policy,
judged once more on fresh seeds, in one look of a sample size set by a power
analysis (:mod:`cqb.analysis.sample_size`) at its own α, all registered before any
of its runs.

Each entry of ``confirmatory.claims`` becomes a
:class:`cqb.analysis.powered_reading.PoweredClaim` of one look named
``{claim}__{policy}``, so the powered reading's look and table machinery
runs it. ``python -m cqb.studies.confirmatory config/config.yaml`` prints the
power analysis and writes it beside the config (``confirmatory_power.json``),
the registration's record of where each sample size comes from; with
``--current``, the same study's power on today's core's published numbers
and the per-policy verdicts' combined error (``confirmatory_power_current.json``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from ..analysis.sample_size import power_analysis
from ..analysis.powered_reading import PoweredClaim, claim_units
from ..errors import config_error
from ..analysis.curves import format_value

POWER_FILE = "confirmatory_power.json"
CURRENT_FILE = "confirmatory_power_current.json"


def entry_name(entry: Mapping) -> str:
    return f"{entry['name']}__{entry['policy']}"


def registered_analysis(config: Mapping) -> dict:
    """{confirmatory claim name: power analysis} of the config's entries."""
    confirmatory = config.get("confirmatory") or {}
    analyses = {}
    for entry in confirmatory.get("claims", []):
        design = {"alpha": confirmatory.get("alpha", 0.05), "power": confirmatory.get("power", 0.9),
                  "comparisons": len(entry["observed"]), "observed": entry["observed"]}
        analyses[entry_name(entry)] = power_analysis(design, float(entry["margin"]))
    return analyses


def entry_claim(by_name: Mapping, entry: Mapping, key: str):
    """The registry's claim a study's entry names, checked: the claim exists
    and runs the entry's policy (if it names one)."""
    if entry["name"] not in by_name:
        config_error(f"{key}.name", entry["name"], f"not a claim ({', '.join(by_name)})")
    base = by_name[entry["name"]]
    if entry.get("policy") and entry["policy"] not in base.policies:
        config_error(f"{key}.policy", entry["policy"], f"not a policy of claim {base.name} ({list(base.policies)})")
    return base


def confirmatory_claims(config: Mapping, plan, specs) -> dict[str, PoweredClaim]:
    """The confirmatory claims of the config, each a one-look PoweredClaim on
    its policy and sweep values of the registry's claim; checked: the claim
    exists and is ordered, its margin is the kind's registered δ, and it has
    one comparison per observed effect."""
    confirmatory = config.get("confirmatory") or {}
    by_name = {spec.name: spec for spec in specs}
    margins = config.get("claim_margins") or {}
    claims = {}
    for index, entry in enumerate(confirmatory.get("claims", [])):
        key = f"confirmatory.claims[{index}]"
        base = entry_claim(by_name, entry, key)
        if float(entry["margin"]) != float(margins.get(base.kind, 0.0)):
            config_error(f"{key}.margin", entry["margin"],
                         f"must be the registered δ of kind {base.kind} (claim_margins: {margins.get(base.kind, 0.0)})")
        sweep_values = tuple(v if isinstance(v, str) else format_value(v)
                             for v in entry.get("sweep_values", base.sweep_values))
        spec = replace(base, name=entry_name(entry), policies=(entry["policy"],), sweep_values=sweep_values,
                       readings=(), statement=f"{base.statement}, for {entry['policy']} (confirmatory)")
        units = claim_units(spec, plan.curves[spec.experiment])
        if len(units) - 1 != len(entry["observed"]):
            config_error(f"{key}.observed", [e["comparison"] for e in entry["observed"]],
                         f"one observed effect per comparison: {spec.name} compares {len(units) - 1} adjacent "
                         f"pairs of {[value for _, value in units]}")
        seeds = int(entry["seeds"])
        claims[spec.name] = PoweredClaim(spec, (seeds,), int(confirmatory["first_seed"]),
                                         float(confirmatory.get("alpha", 0.05)), float(entry["margin"]), units,
                                         {kind: float(v) for kind, v in margins.items()})
    return claims


def confirmatory_seeds(claims: Mapping[str, PoweredClaim]) -> set[int]:
    return {seed for claim in claims.values() for seed in claim.seeds(0)}


def today_effects(entry: Mapping, powered) -> list[dict]:
    """The entry's observed comparisons as the published powered table of
    today's core reports them at the cap (``powered``: claims_powered.tsv)."""
    from ..analysis.replication_statistics import powered_comparisons

    row = powered[powered["claim"] == entry["name"]].iloc[0]
    by_key = {c.key: c for c in powered_comparisons(row)}
    return [{"comparison": e["comparison"], "moved": by_key[e["comparison"]].moved,
             "counted": by_key[e["comparison"]].counted, "seeds": by_key[e["comparison"]].n}
            for e in entry["observed"]]


def current_analysis(config: Mapping, root: Path) -> dict:
    """The registered study on today's numbers: per entry, the power at its
    registered N of the effects today's core's powered reading observed at
    the cap (its pilot's came from the core the study was registered on);
    and the per-policy verdicts' combined error: a policy's verdict from the
    confirmatory study spends the powered design's α and then the study's,
    so by the union bound it errs with probability at most their sum."""
    import pandas as pd

    from ..analysis.sample_size import Effect, claim_power, comparison_power

    confirmatory = config.get("confirmatory") or {}
    alpha = float(confirmatory.get("alpha", 0.05))
    powered = pd.read_csv(root / "docs" / "results" / "claims_powered.tsv", sep="\t", keep_default_na=False,
                          na_values=[""])
    out = {"per_policy_error_bound": float((config.get("powered") or {}).get("alpha", 0.05)) + alpha,
           "per_policy_error_bound_terms": {"powered.alpha": float((config.get("powered") or {}).get("alpha", 0.05)),
                                            "confirmatory.alpha": alpha}}
    for entry in confirmatory.get("claims", []):
        today = today_effects(entry, powered)
        effects = [Effect(e["comparison"], e["moved"], e["counted"], e["seeds"]) for e in today]
        n, m, margin = int(entry["seeds"]), len(entry["observed"]), float(entry["margin"])
        out[entry_name(entry)] = {
            "seeds": n, "pilot": [f"{e['moved']}/{e['counted']} of {e['seeds']}" for e in entry["observed"]],
            "today": [f"{e['moved']}/{e['counted']} of {e['seeds']}" for e in today],
            "comparisons_power": {e.comparison: float(comparison_power(e, [n], alpha, margin, m)[0]) for e in effects},
            "claim_power_bound": float(claim_power(effects, [n], alpha, margin, m)[0])}
    return out


def main(argv=None) -> int:
    import yaml

    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0] if argv else "config/config.yaml")
    config = yaml.safe_load(path.read_text())
    current = "--current" in argv[1:]
    analyses = current_analysis(config, path.resolve().parent.parent) if current else registered_analysis(config)
    text = json.dumps(analyses, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    (path.parent / (CURRENT_FILE if current else POWER_FILE)).write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
