"""The README's claims table and each claim's line, built from the claims
tables only (:mod:`cqb.analysis.claims.lines` writes every cell): per claim the
verdict with the interval it used and its level, its size against δ, the
replication result, the readings mark and Figure 8's mark; the headline
counts holds, does not hold, tie, policy-dependent and inconclusive.
"""

from __future__ import annotations

import pandas as pd

from ..analysis.claims.kinds import KINDS, claim_kind
from ..analysis.claims.lines import (NOT_REGISTERED, claim_sentence, comparison_words, comparisons_in, headline,
                                    headline_counts, interval_text, level_text, policy_split_text,
                                    replication_text, size_text, verdict_interval)
from ..analysis.claims.tables import reading_mark_text
from ..analysis.formatting import format_interval
from ..analysis.multiverse import mark_text

FIGURES_LEVEL = 0.95  # the figures' N = 10 reading: check_claim's default level


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def paper_rows(claims: pd.DataFrame) -> list:
    """The paper's own claims (Figures 2–4), not our findings."""
    return [row for _, row in claims.iterrows() if not str(row["statement"]).startswith("(ours)")
            and row["figure"] in ("fig2", "fig3", "fig4")]


def _reading(verdict, value, low, high, level, detail, comparisons):
    """(text, low, high) of a verdict with the interval it used, labelled with its level."""
    low, high, level, exact = verdict_interval(verdict, value, low, high, level, detail, comparisons)
    return f"**{verdict}** {interval_text(value, low, high, level, exact)}", low, high


def _multiverse(marks: pd.DataFrame | None) -> dict:
    if marks is None:
        return {}
    return {row["claim"]: mark_text(row["mark"], _text(row.get("opposite")), row.get("deciding"), row.get("affected"))
            for _, row in marks.iterrows()}


def _policy_names() -> dict:
    from ..presentation import DISPLAY_NAMES

    return dict(DISPLAY_NAMES)


def claims_summary_markdown(claims: pd.DataFrame, powered: pd.DataFrame | None,
                            per_policy: pd.DataFrame | None = None, multiverse: pd.DataFrame | None = None,
                            calibration: pd.DataFrame | None = None, design: dict | None = None,
                            replication: pd.DataFrame | None = None,
                            confirmatory: pd.DataFrame | None = None) -> str:
    """The README's table and lines: each claim of the paper with its headline
    verdict (the primary reading, powered where it has one), the interval it
    used with its level, its size against δ (``design``: claim → kind,
    threshold, margin, side), the replication result (``replication``, the
    replication study's table), the readings mark and Figure 8's mark
    (``multiverse``); ↳ rows give the per-policy verdicts with what each
    comparison showed; a claim whose policies decide differently counts as
    policy-dependent."""
    design = design or {}
    powered_of = {} if powered is None else {row["claim"]: row for _, row in powered.iterrows()}
    confirmatory_of = {} if confirmatory is None else {row["claim"]: row for _, row in confirmatory.iterrows()}
    across = _multiverse(multiverse)
    names = _policy_names()
    extra_head, extra_rule = (" multiverse (Figure 8) mark |", " --- |") if across else ("", "")
    lines = ["| the paper's claim | figure | verdict, value [interval] (level) | size against δ | replication | "
             "readings mark |" + extra_head + " n (cap) | at its N = 10 seeds |",
             "| --- | --- | --- | --- | --- | --- |" + extra_rule + " ---: | --- |"]
    sentences, headlines, notes = [], [], []
    by_construction = 0
    rows = paper_rows(claims)
    for row in rows:
        claim, statement = row["claim"], str(row["statement"]).split(" (")[0]
        own = design.get(claim)
        source = powered_of.get(claim)
        if source is not None:
            verdict, level = source["verdict"], float(source.get("confidence", float("nan")))
            n_text = f"{source['n_seeds']} ({source['cap']})"
            text, low, high = _reading(verdict, source["value"], source["ci_low"], source["ci_high"], level,
                                       source.get("detail", ""), comparisons_in(source.get("detail", "")))
        else:
            verdict, level, n_text = row["verdict"], FIGURES_LEVEL, str(row["n_seeds"])
            text, low, high = _reading(verdict, row["value"], row["ci_low"], row["ci_high"], level,
                                       row.get("detail", ""), _figures_comparisons(row))
        policies = [] if per_policy is None or not len(per_policy) else [
            p for _, p in per_policy.iterrows() if p["claim"] == claim]
        split = {p["policy"]: p["verdict"] for p in policies}
        said = headline(verdict, split)
        construction = row.get("mark") == "by construction"
        if construction:
            by_construction += 1
        else:
            headlines.append(said)
        if said != verdict:  # policy-dependent: the ↳ rows carry each policy's interval
            notes_of = {p["policy"]: " (by construction)" for p in policies if _text(p["by_construction"])}
            text = (f"**{said}**: {policy_split_text(split, names, notes_of)} (↳); over all its policies "
                    f"{text.replace('**', '')}")
        size = size_text(verdict, low, high, own) if said == verdict else "–"
        replicated = replication_text(replication, claim)
        readings = reading_mark_text(row.get("mark", "–"), row.get("mark_deciding"), row.get("mark_alternatives"))
        figures_text, _, _ = _reading(row["verdict"], row["value"], row["ci_low"], row["ci_high"], FIGURES_LEVEL,
                                      row.get("detail", ""), _figures_comparisons(row))
        beside = f" {across.get(claim, '–')} |" if across else ""
        lines.append(f"| {statement} | {row['figure']} | {text} | {size} | {replicated} | {readings} |{beside} "
                     f"{n_text} | {figures_text} |")
        sentences.append("- " + claim_sentence(statement, text.replace("**", ""), size, replicated, readings,
                                               across.get(claim, "–") if across else None))
        for policy in policies:  # the per-policy readings, not counted again
            lines.append(_policy_line(policy, row["figure"], own, names, powered_of, confirmatory_of,
                                      replication, bool(across)))
        if source is not None and verdict == "inconclusive" and int(source["n_seeds"]) >= int(source["cap"]):
            notes.append(_undecided_note(statement, source, policies, calibration, said != verdict))
    construction_text = (f"; {by_construction} holding by construction, shown and not counted"
                         if by_construction else "")
    per = ("\n\n↳ rows: the claim's verdict per policy (confirmatory study where it has one, else powered; "
           "not counted above), and what each comparison showed." if policies_any(per_policy) else "")
    return (f"Of the paper's {len(rows)} claims, primary readings: {headline_counts(headlines)}"
            f"{construction_text}.{per}\n\n" + "\n".join(lines) + "\n\nEach claim in one line, generated from "
            "the row above:\n\n" + "\n".join(sentences) + "\n" + "".join(f"\n{note}\n" for note in notes))


def adversarial_rows(claims: pd.DataFrame) -> list:
    """The adversarial study's claims (Figure 9): the paper's Theorem 6.3, one
    row per adversary, and our hypotheses, counted apart from the §7 claims."""
    return [row for _, row in claims.iterrows() if str(row["figure"]).startswith("fig9")]


def claims_short_markdown(claims: pd.DataFrame, powered: pd.DataFrame | None,
                          per_policy: pd.DataFrame | None = None, multiverse: pd.DataFrame | None = None,
                          calibration: pd.DataFrame | None = None, replication: pd.DataFrame | None = None) -> str:
    """The front door's table: per claim of the paper its headline verdict
    (as :func:`claims_summary_markdown` counts it), whether the replication
    study replicated it, and whether it is robust to the paper's open
    readings and to the reconstruction's choices (Figure 8); the headline
    counts above it, the notes on claims left undecided at their cap below.
    The adversarial study's claims follow in a table of their own, the
    paper's and ours counted apart."""
    table = _ShortTable(powered, per_policy, _multiverse(multiverse), calibration, replication)
    rows = paper_rows(claims)
    lines, headlines, notes, by_construction = table.lines(rows)
    construction_text = (f"; {by_construction} holding by construction, shown and not counted"
                         if by_construction else "")
    text = (f"Of the paper's {len(rows)} claims, primary readings: {headline_counts(headlines)}"
            f"{construction_text}.\n\n" + "\n".join(lines) + "\n" + "".join(f"\n{note}\n" for note in notes))
    adversarial = adversarial_rows(claims)
    if not adversarial:
        return text
    lines, _, notes, _ = table.lines(adversarial, whole_statements=True)
    paper = [row for row in adversarial if not str(row["statement"]).startswith("(ours)")]
    ours = [row for row in adversarial if str(row["statement"]).startswith("(ours)")]
    count = lambda chosen: headline_counts([table.headline(row) for row in chosen])  # noqa: E731
    return (text + f"\n**The adversarial study** (Figure 9, [adversarial.md](docs/adversarial.md)): the paper's "
            f"Theorem 6.3, never tested by its experiments, {len(paper)} rows (one per adversary): {count(paper)}; "
            f"our {len(ours)} hypotheses: {count(ours)}.\n\n" + "\n".join(lines) + "\n"
            + "".join(f"\n{note}\n" for note in notes))


class _ShortTable:
    """The short table's rows for a list of claims."""

    def __init__(self, powered, per_policy, across, calibration, replication):
        self.powered_of = {} if powered is None else {row["claim"]: row for _, row in powered.iterrows()}
        self.per_policy, self.across, self.calibration, self.replication = per_policy, across, calibration, replication
        self.names = _policy_names()

    def _policies(self, claim) -> list:
        return [] if not policies_any(self.per_policy) else [
            p for _, p in self.per_policy.iterrows() if p["claim"] == claim]

    def headline(self, row) -> str:
        source = self.powered_of.get(row["claim"])
        verdict = row["verdict"] if source is None else source["verdict"]
        return headline(verdict, {p["policy"]: p["verdict"] for p in self._policies(row["claim"])})

    def lines(self, rows, whole_statements: bool = False):
        """The table's lines; a statement loses its parenthesis (the paper's
        §7 claims) unless ``whole_statements`` (rows that differ only there)."""
        lines = ["| claim | verdict | replicated | robust |", "| --- | --- | --- | --- |"]
        headlines, notes, by_construction = [], [], 0
        for row in rows:
            claim, statement = row["claim"], str(row["statement"])
            statement = statement if whole_statements else statement.split(" (")[0]
            source = self.powered_of.get(claim)
            verdict = row["verdict"] if source is None else source["verdict"]
            policies = self._policies(claim)
            split = {p["policy"]: p["verdict"] for p in policies}
            said = self.headline(row)
            if row.get("mark") == "by construction":
                by_construction += 1
                text = f"**{said}** (by construction: not counted)"
            else:
                headlines.append(said)
                text = f"**{said}**"
            if said != verdict:
                notes_of = {p["policy"]: " (by construction)" for p in policies if _text(p["by_construction"])}
                text += f": {policy_split_text(split, self.names, notes_of)}"
            readings = reading_mark_text(row.get("mark", "–"), row.get("mark_deciding"), row.get("mark_alternatives"))
            robust = f"readings: {readings}" + (
                f"; choices (Figure 8): {self.across.get(claim, '–')}" if self.across else "")
            lines.append(f"| {statement} | {text} | {_replicated(self.replication, claim, policies, self.names)} "
                         f"| {robust} |")
            if source is not None and verdict == "inconclusive" and int(source["n_seeds"]) >= int(source["cap"]):
                notes.append(_undecided_note(statement, source, policies, self.calibration, said != verdict,
                                             "per policy"))
        return lines, headlines, notes, by_construction


def _replicated(replication: pd.DataFrame | None, claim: str, policies: list, names: dict) -> str:
    """The replication study's result for a claim, or for each of its
    policies where only they were registered: "replicated (holds, n = 20)"."""
    def short(policy=""):
        rows = None if replication is None else replication[
            (replication["claim"] == claim) & (replication["policy"].fillna("") == policy)]
        if rows is None or rows.empty:
            return None
        found = rows.iloc[0]
        return f"{found['result']} ({found['replication_verdict']}, n = {found['replication_n']})"

    own = short()
    if own:
        return own
    per = [(p["policy"], short(p["policy"])) for p in policies]
    per = [f"{names.get(policy, policy)}: {text}" for policy, text in per if text]
    return "; ".join(per) if per else NOT_REGISTERED


def _figures_comparisons(row) -> int:
    """How many comparisons the figures' reading of a claim combined (its detail, one per "; ")."""
    return max(1, len(_text(row.get("detail", "")).split("; ")))


def policies_any(per_policy) -> bool:
    return per_policy is not None and len(per_policy) > 0


def _policy_line(policy, figure, own, names, powered_of, confirmatory_of, replication, with_multiverse) -> str:
    """A ↳ row: the policy's verdict with the interval it used and its level,
    its size, its replication, and in words what each comparison showed."""
    claim, name = policy["claim"], policy["policy"]
    if policy["source"] == "confirmatory":
        design_row = confirmatory_of.get(f"{claim}__{name}")
    else:
        design_row = powered_of.get(claim)
    level = float(design_row.get("confidence", float("nan"))) if design_row is not None else FIGURES_LEVEL
    comparisons = comparisons_in(design_row.get("detail", "")) if design_row is not None else 1
    text, low, high = _reading(policy["verdict"], policy["value"], policy["ci_low"], policy["ci_high"], level,
                               policy.get("detail", ""), comparisons)
    sweep_pairs = bool(own) and own.get("kind") in KINDS and claim_kind(own["kind"]).sweep_pairs
    words = comparison_words(policy.get("detail", ""), (own or {}).get("sweep_symbol", ""), (own or {}).get("word", ""),
                             name) if sweep_pairs else ""
    construction = " (by construction)" if _text(policy["by_construction"]) else ""
    figures = (f"**{policy['figures_verdict']}** "
               f"{format_interval(policy['figures_value'], policy['figures_ci_low'], policy['figures_ci_high'])} "
               f"({level_text(FIGURES_LEVEL)})")
    return (f"| ↳ for {names.get(name, name)}{construction} | {figure} | {text}{': ' + words if words else ''} | "
            f"{size_text(policy['verdict'], low, high, own)} | {replication_text(replication, claim, name)} | – |"
            f"{' – |' if with_multiverse else ''} {policy['n_seeds']} ({policy['source']}) | {figures} |")


def _undecided_note(statement, powered, policies, calibration, split: bool,
                    per_policy_label: str = "per policy (↳ rows)") -> str:
    """Why a primary verdict stays inconclusive at the cap: more looks would
    exceed the design's α; what its last interval excludes; the power the
    calibration shows at the observed effect; the per-policy verdicts."""
    power = None if calibration is None else next(
        (r["power"] for _, r in calibration.iterrows()
         if r["claim"] == powered["claim"] and r["scenario"] == "effect"), None)
    excluded = _text(powered.get("excluded"))
    decided = [f"{p['policy']} {p['verdict']} ({p['source']})" for p in policies if p["verdict"] != "inconclusive"]
    over = "over all its policies " if split else ""
    return (f"*{statement}* {over}stays inconclusive: its registered cap of {powered['cap']} seeds is spent, and "
            f"more looks would exceed the design's α{f' ({excluded})' if excluded else ''}"
            + (f"; the design's power at the observed effect was {float(power):.2f} (calibration)"
               if power is not None and power == power else "")
            + (f"; {per_policy_label}: {', '.join(decided)}" if decided else "") + ".")
