"""The replication study (docs/verdicts.md, "The replication study"): every
verdict decided on the powered seeds (and every decided per-policy verdict)
judged once more on an independent sample, one look at its own α.

A design that stops at the first look whose interval clears its threshold
stops when the estimate happens to be high, so the estimate it stops on
overstates the effect. The replication's sample size therefore comes from a
power analysis at a *shrunken* effect: per comparison, the end of its
powered interval nearest the threshold (the design's confidence bound, whose
coverage the design controls, where the estimate carries the stopping bias).
Where that interval reaches into the tie band (``size_against_margin``: the
size within δ not excluded) the truth may lie anywhere in the band, so the
study is also powered at the threshold itself, where only a tie is correct:
it then decides (a direction or a tie) wherever in the band the effect is.

Everything here reads the published tables (docs/results/claims_powered.tsv,
claims_per_policy.tsv, claims_confirmatory.tsv); nothing is typed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .claims.kinds import MEAN, claim_kind
from .sample_size import Effect, comparison_power, mean_power, smallest_size, spread_from_interval
from .summaries import binomial_bounds
from .verdict_rules import (BEYOND_MARGIN, FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, TIE, correct_verdicts,
                            size_against_margin)

REPLICATION_COLUMNS = ("claim", "policy", "original_verdict", "original_n", "replication_verdict",
                       "replication_value", "replication_ci_low", "replication_ci_high", "replication_level",
                       "replication_n", "result")
REPLICATED, NOT_REPLICATED, CONTRADICTED = "replicated", "not replicated", "contradicted"
DIRECTIONAL = (HOLDS, FAILS)
# the verdict words of a comparison's text, longest first ("does not hold" holds "hold")
_VERDICT_WORDS = (NOT_TESTABLE, FAILS, TIE, INCONCLUSIVE, HOLDS)
_MARKER = re.compile(r" \[(?:decided at n=\d+|undecided at the cap)\]")


@dataclass(frozen=True)
class Observed:
    """One comparison as a published table reports it."""

    key: str
    verdict: str
    n: int
    confidence: float
    value: float
    ci_low: float
    ci_high: float
    moved: int | None = None  # shares: moved (or stalled) of counted
    counted: int | None = None
    sd: float = math.nan  # a mean's per-seed spread, where set (else read off the interval)


def parse_comparison(text: str, confidence: float, n_default: int = 0) -> Observed:
    """A comparison's text of a published table's ``detail``, e.g.
    ``cqb_opt 10→20: 65/141 [0.36, 0.57] tie within δ (n=160)`` or
    ``cqb_eps_opt − cqb_eps: 0.109 [0.0333, 0.222] holds (n=40)``."""
    key, _, rest = text.partition(": ")
    verdict = next(word for word in _VERDICT_WORDS if word in rest)
    found = re.search(r"n=(\d+)", rest)
    n = int(found.group(1)) if found else int(n_default)
    share = re.match(r"(\d+)/(\d+) \[([^,\]]+), ([^\]]+)\]", rest)
    if share:
        moved, counted = int(share.group(1)), int(share.group(2))
        return Observed(key, verdict, n, confidence, moved / counted if counted else math.nan,
                        float(share.group(3)), float(share.group(4)), moved, counted)
    mean = re.match(r"(\S+) \[([^,\]]+), ([^\]]+)\]", rest)
    if mean:
        return Observed(key, verdict, n, confidence, float(mean.group(1)), float(mean.group(2)),
                        float(mean.group(3)))
    return Observed(key, verdict, n, confidence, float(rest.split()[0]), math.nan, math.nan)


def powered_comparisons(row: Mapping) -> list[Observed]:
    """The comparisons of a claims_powered.tsv (or claims_confirmatory.tsv) row."""
    parts = [p.strip("; ") for p in _MARKER.split(str(row["detail"])) if p.strip("; ")]
    return [parse_comparison(p, float(row["confidence"])) for p in parts]


def kind_bound(entry: Mapping) -> tuple[float, bool]:
    """(threshold, upward) a claim's comparisons are judged against, by kind."""
    kind = claim_kind(entry["kind"])
    return kind.threshold(float(entry.get("threshold", 0.0))), kind.upward


def _is_share(kind: str) -> bool:
    """A share or rate of seeds (moved or stalled of counted), not a mean."""
    return claim_kind(kind).null != MEAN


@dataclass(frozen=True)
class Target:
    """One verdict to replicate: a claim (``policy`` empty) or one policy's."""

    claim: str
    policy: str
    kind: str
    verdict: str
    n: int
    value: float
    ci_low: float
    ci_high: float
    comparisons: tuple[Observed, ...]
    threshold: float
    upward: bool
    margin: float

    @property
    def name(self) -> str:
        return f"{self.claim}__{self.policy}__replication" if self.policy else f"{self.claim}__replication"

    @property
    def size(self) -> str:
        """The original decisive interval's size against δ (verdict_rules.size_against_margin)."""
        return str(size_against_margin(self.ci_low, self.ci_high, self.threshold, self.margin,
                                       self.upward).reshape(-1)[0])


def spread(observed: Observed) -> float:
    """A mean comparison's per-seed spread read off its interval."""
    return spread_from_interval(observed.ci_low, observed.ci_high, observed.n, observed.confidence)


def default_cells(multiverse: pd.DataFrame | None) -> dict[str, dict[str, Observed]]:
    """{claim: {comparison: Observed}} of the multiverse's default column
    (fig8.tsv: fresh seeds of the same design)."""
    cells = {}
    if multiverse is None:
        return cells
    for _, row in multiverse[multiverse["alternative"] == "default"].iterrows():
        parts = [p for p in str(row["detail"]).split("; ") if ": " in p]
        cells[row["claim"]] = {c.key: c for c in (parse_comparison(p, float(row["confidence"]), int(row["n"]))
                                                  for p in parts)}
    return cells


def with_spread(observed: Observed, kind: str, other: Observed | None) -> Observed:
    """A mean comparison with the larger of its spread and that of the same
    comparison in ``other`` (the multiverse's default cell): a skewed
    difference's rare large values make one sample's spread unstable."""
    if _is_share(kind) or not math.isfinite(observed.ci_low):
        return observed
    spreads = [spread(observed)] + ([spread(other)] if other is not None and math.isfinite(other.ci_low) else [])
    return replace(observed, sd=max(spreads))


def replication_targets(config: Mapping, powered: pd.DataFrame, per_policy: pd.DataFrame,
                        confirmatory: pd.DataFrame | None, multiverse: pd.DataFrame | None = None) -> list[Target]:
    """Every decided verdict of the published tables that is evidence (not
    marked by construction): each primary verdict of the powered reading,
    and each per-policy verdict (its comparisons from the confirmatory study
    where it has one, the powered reading's otherwise). A mean comparison's
    spread: the larger of the powered reading's and the multiverse default
    cell's (``multiverse``: fig8.tsv), where it has one."""
    cells = default_cells(multiverse)
    entries = {e["name"]: e for e in config.get("claims", [])}
    margins = config.get("claim_margins") or {}
    decided = (HOLDS, FAILS, TIE)
    confirmed = {}
    if confirmatory is not None:
        for _, row in confirmatory.iterrows():
            confirmed.update({c.key: c for c in powered_comparisons(row)})
    targets = []
    for _, row in powered.iterrows():
        entry = entries.get(row["claim"])
        if entry is None or entry.get("by_construction"):
            continue
        threshold, upward = kind_bound(entry)
        margin = float(margins.get(entry["kind"], 0.0))
        cell = cells.get(row["claim"], {})
        comparisons = tuple(with_spread(c, entry["kind"], cell.get(c.key)) for c in powered_comparisons(row))
        if row["verdict"] in decided:
            targets.append(Target(row["claim"], "", entry["kind"], row["verdict"], int(row["n_seeds"]),
                                  float(row["value"]), float(row["ci_low"]), float(row["ci_high"]), comparisons,
                                  threshold, upward, margin))
        for _, own in per_policy[per_policy["claim"] == row["claim"]].iterrows():
            if own["verdict"] not in decided or isinstance(own["by_construction"], str) and own["by_construction"]:
                continue
            mine = tuple(confirmed.get(c.key, c) for c in comparisons if c.key.split(" ")[0] == own["policy"])
            targets.append(Target(row["claim"], own["policy"], entry["kind"], own["verdict"],
                                  int(own["n_seeds"]), float(own["value"]), float(own["ci_low"]),
                                  float(own["ci_high"]), mine, threshold, upward, margin))
    return targets


def shrunken(observed: Observed, threshold: float, upward: bool) -> float:
    """The comparison's effect shrunk to its interval's end nearest the
    threshold (a share's exact bound recomputed from its counts); a tie or
    an interval across the threshold: the threshold itself."""
    low, high = observed.ci_low, observed.ci_high
    if observed.counted:
        low, high = (float(b) for b in binomial_bounds(observed.moved, observed.counted, observed.confidence))
    if low > threshold:
        return low
    if high < threshold:
        return high
    return threshold


def _power_at(target: Target, observed: Observed, effect: float, alpha: float, m: int, cap: int):
    """The power of a correct verdict of one comparison at a true ``effect``
    at every N = 0 … ``cap`` (N = 0, 1: none)."""
    seeds = np.arange(2, cap + 1)
    if _is_share(target.kind):
        # a sweep pair's ties carry no sign: its share is of the counted pairs
        counted = observed.counted if claim_kind(target.kind).sweep_pairs else observed.n
        base = Effect(observed.key, observed.moved, max(counted, 1), observed.n)
        curve = comparison_power(base, seeds, alpha, target.margin, m, share=effect,
                                 threshold=target.threshold, upward=target.upward)
    else:
        sd = observed.sd if math.isfinite(observed.sd) else spread(observed)
        curve = mean_power(effect, sd, seeds, alpha, target.margin, m, target.threshold, target.upward)
    return np.concatenate([[0.0, 0.0], curve])


def target_analysis(target: Target, alpha: float, power: float, cap: int, stay: int = 25,
                    band_points: int = 5) -> dict:
    """The registration's power analysis of one target. Its sample size is
    the smallest N ≤ ``cap`` (else the cap) meeting both: (a) at the
    comparisons' shrunken effects the claim's power bound reaches ``power``
    (1 − Σ shortfalls over its comparisons: a "holds" needs every one
    correct; a "does not hold" needs one of its failing comparisons, so the
    best-powered of those); (b) where the decisive comparison's interval
    reaches into the tie band (its size within δ not excluded), its power of
    a correct verdict reaches ``power`` at each of ``band_points`` effects
    from the threshold itself (no effect: only a tie is correct) to its
    shrunken effect, so the study decides wherever in the band it lies."""
    m = len(target.comparisons)
    judged = [c for c in target.comparisons if c.verdict != NOT_TESTABLE]
    if target.verdict == FAILS:
        judged = [c for c in judged if c.verdict == FAILS]
    limit = cap + stay
    shrunk = [(c, shrunken(c, target.threshold, target.upward)) for c in judged]
    curves = [_power_at(target, c, effect, alpha, m, limit) for c, effect in shrunk]
    if target.verdict == FAILS:
        joint = np.max(curves, axis=0)
    else:
        joint = np.clip(1 - sum(1 - curve for curve in curves), 0.0, 1.0)
    decisive, effect = min(shrunk, key=lambda pair: abs(pair[1] - target.threshold))
    size = str(size_against_margin(decisive.ci_low, decisive.ci_high, target.threshold, target.margin,
                                   target.upward).reshape(-1)[0])
    band = None
    if target.margin > 0 and size != BEYOND_MARGIN:
        band = np.min([_power_at(target, decisive, float(point), alpha, m, limit)
                       for point in np.linspace(target.threshold, effect, band_points)], axis=0)
    both = joint if band is None else np.minimum(joint, band)
    n = smallest_size(lambda seeds: both[seeds], power, cap, stay)
    reached = n is not None
    n = cap if n is None else n
    rows = [{"comparison": c.key, "original": f"{c.verdict} (n={c.n})", "effect": float(e),
             "correct": " or ".join(sorted(correct_verdicts(e, target.margin, target.threshold, target.upward))),
             "power": float(curve[n])} for (c, e), curve in zip(shrunk, curves)]
    return {"claim": target.claim, "policy": target.policy, "original_verdict": target.verdict,
            "original_n": target.n, "seeds": n, "reached": reached, "cap": cap, "alpha": alpha,
            "target": power, "margin": target.margin, "comparisons": m, "power_bound": float(joint[n]),
            "decisive": decisive.key, "decisive_size": size,
            "band_power": None if band is None else float(band[n]),
            "comparisons_power": rows}


def replication_result(original: str, replication: str, original_size: str, replication_size: str) -> str:
    """replicated: the same decided verdict; contradicted: the opposite
    direction, or a tie against a direction whose interval lay beyond δ
    (the sizes disagree: one excluded every effect within δ, the other puts
    it there); not replicated: anything else (inconclusive, not testable, or
    a tie against a direction whose size within δ was not excluded)."""
    if original == replication and original in (HOLDS, FAILS, TIE):
        return REPLICATED
    if {original, replication} == {HOLDS, FAILS}:
        return CONTRADICTED
    if original in DIRECTIONAL and replication == TIE:
        return CONTRADICTED if original_size == BEYOND_MARGIN else NOT_REPLICATED
    if original == TIE and replication in DIRECTIONAL:
        return CONTRADICTED if replication_size == BEYOND_MARGIN else NOT_REPLICATED
    return NOT_REPLICATED


def replication_rows(targets: Sequence[Target], originals: Mapping[str, Mapping],
                     states: Mapping[str, Mapping]) -> pd.DataFrame:
    """claims_replication.tsv: per target its original verdict (``originals``:
    name → {verdict, n, ci_low, ci_high} from this run's tables) and the
    replication's one look (``states``: name → the look's state)."""
    rows = []
    for target in targets:
        original = originals.get(target.name, {})
        verdict = original.get("verdict", target.verdict)
        original_size = str(size_against_margin(original.get("ci_low", target.ci_low),
                                                original.get("ci_high", target.ci_high), target.threshold,
                                                target.margin, target.upward).reshape(-1)[0])
        state = states[target.name]
        low = math.nan if state["ci_low"] is None else state["ci_low"]
        high = math.nan if state["ci_high"] is None else state["ci_high"]
        replication_size = str(size_against_margin(low, high, target.threshold, target.margin,
                                                   target.upward).reshape(-1)[0])
        rows.append({"claim": target.claim, "policy": target.policy, "original_verdict": verdict,
                     "original_n": int(original.get("n", target.n)), "replication_verdict": state["verdict"],
                     "replication_value": state["value"], "replication_ci_low": low, "replication_ci_high": high,
                     "replication_level": state["confidence"], "replication_n": state["n"],
                     "result": replication_result(verdict, state["verdict"], original_size, replication_size)})
    return pd.DataFrame(rows, columns=list(REPLICATION_COLUMNS))
