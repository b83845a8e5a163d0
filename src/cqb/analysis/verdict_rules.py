"""The verdict rules: one implementation of each, shared by the claims
(:mod:`cqb.analysis.claims.statistics`, one comparison at a time), the powered
reading (:mod:`cqb.analysis.powered_reading`) and the calibration study
(:mod:`cqb.analysis.calibration`, thousands of replications at once).

* :func:`interval_verdicts`: one interval against its threshold, with the
  tie band threshold ± δ;
* :func:`two_level_verdicts`: a comparison's verdict from its interval at the
  claim's level (holds, tie) and at the Bonferroni level over the claim's
  comparisons (does not hold);
* :func:`look_level`, :func:`fail_level`, :func:`procedure_levels`: the
  level of every look (α split over the looks) and of "does not hold" (that
  level split over the claim's comparisons);
* :func:`decided`: the stopping rule (a comparison stops at the first look
  whose verdict is not inconclusive);
* :func:`combine`, :func:`decisive`: a claim's verdict from its comparisons';
* :func:`size_against_margin`: whether a decided interval also excludes every
  effect within the margin δ (the effect matters by the registered margin).

Each rule is written once, vectorised over rows; the scalar forms
(:func:`interval_verdict`, :func:`two_level_verdict`,
:func:`comparison_verdict`) call it on a single row.
"""

from __future__ import annotations

import numpy as np

HOLDS, FAILS, INCONCLUSIVE, TIE = "holds", "does not hold", "inconclusive", "tie within δ"
NOT_TESTABLE = "not testable at this T"
VERDICTS = (HOLDS, FAILS, TIE, INCONCLUSIVE, NOT_TESTABLE)
DECIDED = (HOLDS, FAILS, TIE, NOT_TESTABLE)  # a comparison stops at these
# the size of a decided effect against the margin δ (size_against_margin)
BEYOND_MARGIN, WITHIN_NOT_EXCLUDED = "beyond δ", "size within δ not excluded"
NO_MARGIN, NO_SIZE = "no margin (δ = 0)", ""
SIZES = (BEYOND_MARGIN, WITHIN_NOT_EXCLUDED, NO_MARGIN, NO_SIZE)


def _sides(low, high, threshold, margin, upward):
    """The arguments broadcast as arrays, with which intervals are finite,
    strictly above and strictly below the threshold."""
    low, high, threshold, margin, upward = np.broadcast_arrays(
        np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64),
        np.asarray(threshold, dtype=np.float64), np.asarray(margin, dtype=np.float64),
        np.asarray(upward, dtype=bool))
    finite = np.isfinite(low) & np.isfinite(high)
    above = finite & (low > threshold)
    below = finite & ~above & (high < threshold)
    return low, high, threshold, margin, upward, finite, above, below


def interval_verdicts(low, high, threshold, margin=0.0, upward=True) -> np.ndarray:
    """The verdict of each interval [low, high] (arrays; every argument
    broadcasts): strictly on the claim's side of ``threshold`` (above when
    ``upward``) → holds, strictly on the other → does not hold, straddling it
    but inside threshold ± ``margin`` (δ > 0) → tie within δ, else (or with a
    non-finite end) inconclusive."""
    low, high, threshold, margin, upward, finite, above, below = _sides(low, high, threshold, margin, upward)
    tie = (finite & ~above & ~below & (margin > 0)
           & (threshold - margin < low) & (high < threshold + margin))
    out = np.full(low.shape, INCONCLUSIVE, dtype=object)
    out[tie] = TIE
    out[np.where(upward, below, above)] = FAILS
    out[np.where(upward, above, below)] = HOLDS
    return out


def size_against_margin(low, high, threshold, margin=0.0, upward=True) -> np.ndarray:
    """The size of each interval's effect against the margin δ (arrays; every
    argument broadcasts), for an interval that decides a side of ``threshold``:
    "beyond δ" when it lies entirely beyond threshold ± ``margin`` on that side
    (strictly, as the verdicts), "size within δ not excluded" when it reaches
    into the band; "no margin (δ = 0)" for a decided interval of a kind with no
    margin. An interval that decides no side (a tie, inconclusive, a non-finite
    end) gets no size: "". The size is the same on either side, so ``upward``
    (accepted so that calls mirror :func:`interval_verdicts`) does not change it;
    call it with the interval the verdict used (the Bonferroni level's for
    "does not hold")."""
    low, high, threshold, margin, _, _, above, below = _sides(low, high, threshold, margin, upward)
    beyond = (above & (low > threshold + margin)) | (below & (high < threshold - margin))
    out = np.full(low.shape, NO_SIZE, dtype=object)
    out[above | below] = WITHIN_NOT_EXCLUDED
    out[beyond] = BEYOND_MARGIN
    out[(above | below) & ~(margin > 0)] = NO_MARGIN
    return out


def size_label(low, high, threshold, margin=0.0, upward=True) -> str:
    """:func:`size_against_margin` of one interval."""
    return str(size_against_margin(low, high, threshold, margin, upward).reshape(-1)[0])


def two_level_verdicts(narrow, wide) -> np.ndarray:
    """A comparison's verdict from its interval verdict at the claim level
    (``narrow``: holds, tie) and at the Bonferroni level (``wide``: does not
    hold): holds if the narrow interval holds, else does not hold if the wide
    one fails, else a tie if the narrow one ties, else inconclusive."""
    narrow, wide = np.broadcast_arrays(np.asarray(narrow, dtype=object), np.asarray(wide, dtype=object))
    out = np.full(narrow.shape, INCONCLUSIVE, dtype=object)
    out[narrow == TIE] = TIE
    out[wide == FAILS] = FAILS
    out[narrow == HOLDS] = HOLDS
    return out


def comparison_verdicts(low, high, wide_low, wide_high, threshold, margin=0.0, upward=True) -> np.ndarray:
    """The two-level verdict of comparisons given both intervals: the claim
    level's [low, high] and the Bonferroni level's [wide_low, wide_high]."""
    return two_level_verdicts(interval_verdicts(low, high, threshold, margin, upward),
                              interval_verdicts(wide_low, wide_high, threshold, margin, upward))


def correct_verdicts(value: float, margin: float, threshold: float = 0.5, upward: bool = True) -> frozenset:
    """The verdicts that a true ``value`` makes true: the direction of its
    side of ``threshold`` (holds on the claim's side, above when ``upward``;
    none on the threshold itself), and a tie within δ when it lies within
    ``margin`` of the threshold (so at 0.45 against 1/2 with δ = 0.15 both a
    tie and "does not hold" are correct). The power analysis and the
    calibration's power both count these."""
    claim_side = value > threshold if upward else value < threshold
    other_side = value < threshold if upward else value > threshold
    right = {HOLDS} if claim_side else {FAILS} if other_side else set()
    if margin > 0 and abs(value - threshold) < margin:
        right.add(TIE)
    return frozenset(right)


def interval_verdict(low, high, threshold, margin=0.0, upward=True) -> str:
    """:func:`interval_verdicts` of one interval."""
    return str(interval_verdicts(low, high, threshold, margin, upward).reshape(-1)[0])


def two_level_verdict(narrow: str, wide: str) -> str:
    """:func:`two_level_verdicts` of one comparison: "does not hold" needs the
    wider interval on the wrong side."""
    return str(two_level_verdicts(narrow, wide).reshape(-1)[0])


def comparison_verdict(low, high, wide_low, wide_high, threshold, margin=0.0, upward=True) -> str:
    """:func:`comparison_verdicts` of one comparison."""
    return str(comparison_verdicts(low, high, wide_low, wide_high, threshold, margin, upward).reshape(-1)[0])


def look_level(alpha: float, looks: int) -> float:
    """The level of every look's intervals: 1 − α/K (Bonferroni over K looks)."""
    return 1 - alpha / looks


def fail_level(confidence: float, comparisons: int) -> float:
    """The level of the "does not hold" intervals of a claim of
    ``comparisons`` comparisons: Bonferroni over them."""
    return 1 - (1 - confidence) / max(1, comparisons)


def procedure_levels(alpha: float, looks: int, comparisons: int) -> tuple[float, float]:
    """(level of holds and ties, level of does not hold) at every look of a
    design of ``looks`` looks for a claim of ``comparisons`` comparisons."""
    confidence = look_level(alpha, looks)
    return confidence, fail_level(confidence, comparisons)


def decided(verdicts) -> np.ndarray:
    """The stopping rule: a comparison stops at the first look whose verdict
    is not inconclusive (holds, does not hold, tie within δ, not testable)."""
    return np.asarray(verdicts, dtype=object) != INCONCLUSIVE


def is_decided(verdict: str) -> bool:
    """:func:`decided` of one verdict."""
    return bool(decided([verdict])[0])


def combine(verdicts) -> str:
    """A claim's verdict from its comparisons': untestable ones left out
    (all untestable: not testable); does not hold if one does not; holds if
    all hold; a tie within δ if all hold or tie; else inconclusive."""
    verdicts = [v for v in verdicts if v != NOT_TESTABLE]
    if not verdicts:
        return NOT_TESTABLE
    if any(v == FAILS for v in verdicts):
        return FAILS
    if all(v == HOLDS for v in verdicts):
        return HOLDS
    if all(v in (HOLDS, TIE) for v in verdicts):
        return TIE
    return INCONCLUSIVE


def decisive(comparisons, upward: bool = True):
    """The comparison that decides a combined verdict, to be reported: a
    failing one if any (the farthest on the wrong side), else an inconclusive
    one, else a tie, else the holding one whose interval comes nearest to its
    threshold, else an untestable one. ``upward``: the claim wants values
    above its threshold."""
    for wanted in (FAILS, INCONCLUSIVE, TIE, HOLDS, NOT_TESTABLE):
        chosen = [c for c in comparisons if c.verdict == wanted]
        if chosen:
            if wanted == NOT_TESTABLE:
                return chosen[0]
            if upward:
                return min(chosen, key=lambda c: c.ci_high if wanted == FAILS else c.ci_low)
            return max(chosen, key=lambda c: c.ci_low if wanted == FAILS else c.ci_high)
    raise ValueError("no comparisons")


# ------------------------------------------------------------------ the marks
# A mark says what the alternatives (readings of a claim, cells of Figure 8)
# decided, never what they failed to decide.
AGREES, DEPENDS, UNDECIDED, NO_ALTERNATIVE = "robust", "dependent", "undecided", "no alternative"
DECIDING = (HOLDS, FAILS, TIE)  # a verdict that says something about the effect


def agreement(default_verdict: str, alternatives) -> tuple[str, int, int, list]:
    """(category, deciding, affected, otherwise) of a claim from its default's
    verdict (the primary reading, Figure 8's default column) and the verdicts
    of the alternatives that change what it reads (name → verdict):

    * ``undecided`` when the default decides nothing (not holds, does not
      hold or a tie);
    * ``dependent`` when some alternative decides otherwise (the opposite
      direction, or a tie against a direction; ``otherwise`` names them);
    * ``no alternative`` when none changes what the claim reads;
    * ``undecided`` when most alternatives (more than half) decide nothing;
    * ``robust`` else: the default decided and every alternative that decides agrees.

    ``deciding`` of ``affected`` alternatives decide."""
    verdicts = dict(alternatives)
    deciding = sum(1 for v in verdicts.values() if v in DECIDING)
    affected = len(verdicts)
    otherwise = [name for name, v in verdicts.items() if v in DECIDING and v != default_verdict]
    if default_verdict not in DECIDING:
        return UNDECIDED, deciding, affected, []
    if otherwise:
        return DEPENDS, deciding, affected, otherwise
    if affected == 0:
        return NO_ALTERNATIVE, 0, 0, []
    if 2 * (affected - deciding) > affected:
        return UNDECIDED, deciding, affected, []
    return AGREES, deciding, affected, []


def policy_dependent(verdicts) -> bool:
    """A claim's per-policy verdicts (policy → verdict) are all decided
    (holds, does not hold, a tie) and not all the same."""
    verdicts = list(dict(verdicts).values())
    return len(verdicts) > 1 and all(v in DECIDING for v in verdicts) and len(set(verdicts)) > 1
