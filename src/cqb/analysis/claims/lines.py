"""Each claim's line, built from its tables only: the verdict with the
interval it used and that interval's level, the size against δ
(:func:`cqb.analysis.verdict_rules.size_against_margin`), the replication
result, the per-policy verdicts in words, and the sentence that joins them.

* :func:`claims_design`: per claim what the size needs (kind, threshold,
  margin, side) and the symbol of its sweep, from the registry;
* :func:`verdict_interval`: the interval a verdict used ("does not hold" is
  decided on the Bonferroni level's interval, recomputed exactly from a
  share's counts where the table records only the claim level's);
* :func:`comparison_words`: what each comparison of a sweep showed
  ("slower from d = 5 to 10 (127/187 seeds); not slower from 10 to 20");
* :func:`replication_text`: the replication study's result
  (``claims_replication.tsv``), "not registered" without one;
* :func:`headline`: holds / does not hold / tie / policy-dependent / inconclusive;
* :func:`claim_sentence`: the claim's line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import pandas as pd

from .kinds import claim_kind
from ..formatting import format_interval, format_number
from ..summaries import binomial_interval
from ..verdict_rules import (BEYOND_MARGIN, FAILS, HOLDS, INCONCLUSIVE, NO_MARGIN, NO_SIZE, TIE, fail_level,
                            policy_dependent, size_label)

POLICY_DEPENDENT = "policy-dependent"
HEADLINES = (HOLDS, FAILS, TIE, POLICY_DEPENDENT, INCONCLUSIVE)  # the order the headline counts them in
NOT_REGISTERED = "not registered"
REPLICATION_RESULTS = ("replicated", "not replicated", "contradicted")
REPLICATION_COLUMNS = ("claim", "policy", "original_verdict", "original_n", "replication_verdict",
                       "replication_value", "replication_ci_low", "replication_ci_high", "replication_level",
                       "replication_n", "result")
DESIGN_COLUMNS = ("claim", "kind", "threshold", "margin", "upward", "sweep_symbol", "word")
SYMBOLS = {"dim": "d", "n_servers": "K", "slack": "ϵ", "arrival_rate": "λ", "horizon": "T"}
# what a comparison of an ordered claim says, by its metric and direction
WORDS = {("time_to_optimal", "increasing"): "slower", ("time_to_optimal", "decreasing"): "faster"}
# one comparison as the claims' detail text writes it: "cqb_opt 5→10: 127/187 [0.61, 0.75] holds"
SHARE = re.compile(r"(?P<policy>[^\s;:]+) (?P<smaller>[^\s;:→]+)→(?P<larger>[^\s;:]+): (?P<k>\d+)/(?P<n>\d+) "
                   r"\[[^\]]*\] (?P<verdict>holds|does not hold|tie within δ|inconclusive|not testable at this T)")


def _upward(kind: str) -> bool:
    return claim_kind(kind).upward


def _threshold(spec) -> float:
    return claim_kind(spec.kind).threshold(spec.threshold)


def claims_design(specs: Sequence, margins: Mapping[str, float], sweep_params: Mapping[str, str]) -> pd.DataFrame:
    """Per claim the registry's kind, the threshold its verdict is judged
    against, δ, its side (``upward``: holds above the threshold), the symbol of
    its sweep (``sweep_params``: experiment → swept key) and the word for an
    ordered claim's direction."""
    rows = [{"claim": s.name, "kind": s.kind, "threshold": _threshold(s),
             "margin": float((margins or {}).get(s.kind, 0.0)), "upward": _upward(s.kind),
             "sweep_symbol": SYMBOLS.get(sweep_params.get(s.experiment, ""), sweep_params.get(s.experiment, "")),
             "word": WORDS.get((s.metric, s.direction), f"{s.metric} {s.direction}")} for s in specs]
    return pd.DataFrame(rows, columns=list(DESIGN_COLUMNS))


def read_design(path) -> dict:
    """claim → its design row (:func:`claims_design`) from its TSV."""
    return design_of(pd.read_csv(path, sep="\t", keep_default_na=False))


def design_of(table: pd.DataFrame) -> dict:
    """claim → its design row of a :func:`claims_design` table."""
    return {row["claim"]: {**row, "upward": str(row["upward"]).lower() in ("true", "1"),
                           "threshold": float(row["threshold"]), "margin": float(row["margin"])}
            for row in table.to_dict("records")}


def level_text(level) -> str:
    """98.75 % from 0.9875 ("level not recorded" without one)."""
    try:
        level = float(level)
    except (TypeError, ValueError):
        level = math.nan
    return f"{100 * level:.4g} %" if math.isfinite(level) else "level not recorded"


def parse_shares(detail) -> list[dict]:
    """Every share comparison of a claims table's detail text, in order."""
    if not isinstance(detail, str):
        return []
    return [{**m.groupdict(), "k": int(m["k"]), "n": int(m["n"])} for m in SHARE.finditer(detail)]


def comparisons_in(detail) -> int:
    """How many comparisons a powered or confirmatory detail text holds (each ends in its look)."""
    return len(re.findall(r"\[(?:decided at|undecided)", detail)) if isinstance(detail, str) else 0


def verdict_interval(verdict: str, value, low, high, confidence: float, detail="", comparisons: int = 1):
    """(low, high, level, exact) of the interval ``verdict`` used: the claim
    level's for holds, a tie and inconclusive; for "does not hold" the
    Bonferroni level's over the claim's ``comparisons``, recomputed exactly
    from the failing share's counts in ``detail`` (``exact`` False when the
    table records only the claim level's interval of a failing mean)."""
    if verdict != FAILS:
        return low, high, confidence, True
    level = fail_level(confidence, comparisons)
    for share in parse_shares(detail):
        if share["verdict"] == FAILS and share["n"] and math.isclose(share["k"] / share["n"], float(value),
                                                                      abs_tol=5e-6):
            wide_low, wide_high = binomial_interval(share["k"], share["n"], level)
            return wide_low, wide_high, level, True
    return low, high, confidence, False


def interval_text(value, low, high, level, exact: bool = True) -> str:
    """'0.672 [0.509, 0.81] (98.75 %)'; a failing mean's claim-level interval says so."""
    text = format_interval(value, low, high)
    if not (isinstance(low, (int, float)) and math.isfinite(low)):
        return text
    note = "" if exact else "; does not hold decided on a wider, Bonferroni, interval not in this table"
    return f"{text} ({level_text(level)}{note})"


def size_text(verdict: str, low, high, design: Mapping | None) -> str:
    """The size of a decided verdict's interval against δ: "beyond δ = 0.15",
    "size within δ = 0.15 not excluded", "δ = 0: not sized"; "–" for a tie
    (a verdict of its own), an undecided verdict or a claim without a design."""
    if not design or verdict not in (HOLDS, FAILS):
        return "–"
    margin = float(design["margin"])
    label = size_label(low, high, float(design["threshold"]), margin, bool(design["upward"]))
    if label == NO_SIZE:
        return "–"
    if label == NO_MARGIN:
        return "δ = 0: not sized"
    return f"beyond δ = {margin:g}" if label == BEYOND_MARGIN else f"size within δ = {margin:g} not excluded"


def comparison_words(detail, symbol: str, word: str, policy: str | None = None) -> str:
    """What each share comparison of ``policy`` showed, along the sweep:
    "slower from d = 5 to 10 (127/187 seeds); not slower from 10 to 20 (68/174 seeds)"."""
    shares = [s for s in parse_shares(detail) if policy is None or s["policy"] == policy]

    def order(share):
        try:
            return float(share["smaller"])
        except ValueError:
            return math.inf

    said = {HOLDS: word, FAILS: f"not {word}", TIE: f"no consistent direction within δ",
            INCONCLUSIVE: f"{word} or not undecided"}
    parts = []
    for index, share in enumerate(sorted(shares, key=order)):
        where = f"{symbol} = " if index == 0 and symbol else ""
        parts.append(f"{said.get(share['verdict'], share['verdict'])} from {where}{share['smaller']} to "
                     f"{share['larger']} ({share['k']}/{share['n']} seeds)")
    return "; ".join(parts)


def read_replication(path) -> pd.DataFrame | None:
    """The replication study's table (``claims_replication.tsv``), or None without one."""
    from pathlib import Path

    if path is None or not Path(path).exists():
        return None
    table = pd.read_csv(path, sep="\t", keep_default_na=False, dtype={"claim": str, "policy": str})
    missing = set(REPLICATION_COLUMNS) - set(table.columns)
    if missing:
        raise ValueError(f"{path}: lacks columns {sorted(missing)}")
    bad = sorted(set(table["result"]) - set(REPLICATION_RESULTS))
    if bad:
        raise ValueError(f"{path}: result {bad[0]!r} is not one of {', '.join(REPLICATION_RESULTS)}")
    return table


def replication_text(table: pd.DataFrame | None, claim: str, policy: str = "") -> str:
    """The replication's result for a claim (``policy`` "": the claim level):
    "replicated: holds 0.66 [0.55, 0.76] (95 %, n = 120)"; "not registered"
    without a table or a row."""
    if table is None:
        return NOT_REGISTERED
    rows = table[(table["claim"] == claim) & (table["policy"].fillna("") == (policy or ""))]
    if rows.empty:
        return NOT_REGISTERED
    row = rows.iloc[0]
    value = pd.to_numeric(pd.Series([row["replication_value"], row["replication_ci_low"],
                                     row["replication_ci_high"], row["replication_level"]]), errors="coerce")
    interval = format_interval(value[0], value[1], value[2])
    level = f"{level_text(value[3])}, " if math.isfinite(value[3]) else ""
    return f"{row['result']}: {row['replication_verdict']} {interval} ({level}n = {row['replication_n']})"


def headline(verdict: str, per_policy: Mapping[str, str] | None = None) -> str:
    """The claim's count in the headline: policy-dependent when its
    per-policy verdicts are decided and disagree, else its own verdict."""
    return POLICY_DEPENDENT if per_policy and policy_dependent(per_policy) else verdict


def policy_split_text(per_policy: Mapping[str, str], names: Mapping[str, str] | None = None,
                      notes: Mapping[str, str] | None = None) -> str:
    """"holds for CQB-ε (by construction), does not hold for CQB-Opt"."""
    names, notes = names or {}, notes or {}
    return ", ".join(f"{verdict} for {names.get(policy, policy)}{notes.get(policy, '')}"
                     for policy, verdict in per_policy.items())


def headline_counts(headlines: Sequence[str]) -> str:
    """"8 holds, 0 does not hold, 0 tie within δ, 1 policy-dependent, 1 inconclusive"
    (any other verdict, e.g. not testable, after them)."""
    extra = [h for h in dict.fromkeys(headlines) if h not in HEADLINES]
    return ", ".join(f"{sum(1 for h in headlines if h == name)} {name}" for name in (*HEADLINES, *extra))


def claim_sentence(statement: str, verdict_text: str, size: str, replication: str, readings: str,
                   multiverse: str | None) -> str:
    """The claim's line: "*Statement*: holds, 0.134 [0.103, 0.169] (98.75 %); size: beyond δ = 0.001;
    replication: not registered; readings: robust (…); reconstruction: robust (…)."."""
    parts = [f"*{statement}*: {verdict_text}"]
    if size and size != "–":
        parts.append(size if size.startswith("size") else f"size: {size}")
    parts.append(f"replication: {replication}")
    parts.append(f"readings: {readings}")
    if multiverse is not None:
        parts.append(f"reconstruction: {multiverse}")
    return "; ".join(parts) + "."


__all__ = ["claims_design", "read_design", "verdict_interval", "interval_text", "size_text", "comparison_words",
           "read_replication", "replication_text", "headline", "policy_split_text", "headline_counts",
           "claim_sentence", "level_text", "format_number"]
