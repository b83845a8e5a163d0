"""Power and sample size of a confirmatory study of an ``ordered`` claim.

A confirmatory study (docs/verdicts.md, "The confirmatory study") judges a
claim left undecided at the powered reading's cap on fresh seeds, in one look
of a fixed number of seeds at its own α. Its sample size comes from here:
the smallest number of seeds at which, at the effects observed so far, the
claim's verdict is *correct* with probability at least ``power``.

One comparison of an ordered claim is a paired sign test: of N seeds a share
q carries a sign (two censored runs tie), and a signed pair moves the
claimed way with probability p. At N seeds its verdict is the two-level
verdict of :mod:`cqb.analysis.verdict_rules` on the exact (Clopper–Pearson)
intervals at the study's levels, and it is correct when the true p makes it
true: holds when p > 1/2, does not hold when p < 1/2, tie within δ when
|p − 1/2| < δ (so at p = 0.45 both a tie and "does not hold" are correct:
the study tells a tie within δ from a direction). The power of one
comparison is exact (a sum over the binomial numbers of signed and of moved
pairs); the claim's is bounded below by 1 − Σ (1 − power of each comparison),
whatever the dependence between comparisons.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .summaries import binomial_bounds
from .verdict_rules import FAILS, HOLDS, TIE, comparison_verdicts, correct_verdicts, procedure_levels


@dataclass(frozen=True)
class Effect:
    """An observed comparison: ``moved`` of ``counted`` signed pairs moved the
    claimed way, of ``seeds`` seeds."""

    comparison: str
    moved: int
    counted: int
    seeds: int

    @property
    def share(self) -> float:  # p: the share of signed pairs moving the claimed way
        return self.moved / self.counted

    @property
    def signed(self) -> float:  # q: the share of seeds whose pair carries a sign
        return self.counted / self.seeds


def _binomial_pmf(k, n, p):
    from scipy.stats import binom

    return binom.pmf(k, n, p)


def counted_power(effect: Effect, max_counted: int, alpha: float, margin: float, comparisons: int,
                  share: float | None = None, threshold: float = 0.5, upward: bool = True) -> np.ndarray:
    """P(correct verdict | c signed pairs) for c = 0 … ``max_counted``: the
    sum over the numbers k of moved pairs within 9 standard deviations of c·p
    (the rest weighs below 1e-18). ``share``: a true p other than the
    effect's observed one (a replication's shrunken effect); ``threshold``
    and ``upward``: a share judged against another bound than 1/2 (a stall
    rate below its bound: upward False).

    Computed once per true share and arguments (the analyses ask again), its
    exact bounds shared between the effects at a level (:func:`_level_bounds`)."""
    p = effect.share if share is None else float(share)
    return _counted_power_table(p, int(max_counted), float(alpha), float(margin), int(comparisons),
                                float(threshold), bool(upward)).copy()


def moved_grid(p: float, max_counted: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (c signed pairs, k moved) the power sums over: for each
    c ≤ ``max_counted``, the k within 9 standard deviations of c·p."""
    c_parts, k_parts = [], []
    for c in range(max_counted + 1):
        spread = 9 * np.sqrt(c * p * (1 - p)) + 2
        k = np.arange(max(0, int(c * p - spread)), min(c, int(np.ceil(c * p + spread))) + 1)
        c_parts.append(np.full(k.size, c))
        k_parts.append(k)
    return np.concatenate(c_parts), np.concatenate(k_parts)


@functools.lru_cache(maxsize=128)
def _counted_power_table(p: float, max_counted: int, alpha: float, margin: float, comparisons: int,
                         threshold: float, upward: bool) -> np.ndarray:
    """:func:`counted_power` at the true share ``p``, computed (read-only: cached)."""
    confidence, fail_confidence = procedure_levels(alpha, 1, comparisons)
    c, k = moved_grid(p, max_counted)
    low, high = _level_bounds(k, c, confidence)
    wide_low, wide_high = _level_bounds(k, c, fail_confidence)
    verdicts = comparison_verdicts(low, high, wide_low, wide_high, threshold, margin, upward)
    ok = np.isin(verdicts.astype(str), list(correct_verdicts(p, margin, threshold, upward))).astype(np.float64)
    table = np.bincount(c, weights=_binomial_pmf(k, c, p) * ok, minlength=max_counted + 1)
    table.flags.writeable = False
    return table


# {confidence: the largest c it covers, and the exact bounds of every k <= c up to it, (k, c) at
# c(c + 1)/2 + k}; and {confidence: the largest c asked so far}
_BOUNDS_TABLES: dict[float, tuple[int, np.ndarray, np.ndarray]] = {}
_LARGEST_ASKED: dict[float, int] = {}


def _level_bounds(k: np.ndarray, c: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`binomial_bounds` of the pairs (k, c), element by element the
    same values. Pairs reaching past every c asked before at this level (the
    first effect, a sample-size search going further) are computed alone: a
    band of about 18·√c moved counts per c. Pairs within a range asked before
    (several effects, or the same one again) are read from one table of every
    k ≤ c over that range, computed once."""
    most = int(c.max(initial=0))
    table = _BOUNDS_TABLES.get(confidence)
    if table is None or table[0] < most:
        asked = _LARGEST_ASKED.get(confidence, -1)
        if most > asked:
            _LARGEST_ASKED[confidence] = most
            return binomial_bounds(k, c, confidence)
        every_c = np.repeat(np.arange(asked + 1), np.arange(asked + 1) + 1)
        every_k = np.arange(every_c.size) - every_c * (every_c + 1) // 2
        table = (asked, *binomial_bounds(every_k, every_c, confidence))
        _BOUNDS_TABLES[confidence] = table
    at = c * (c + 1) // 2 + k
    return table[1][at], table[2][at]


def comparison_power(effect: Effect, seeds, alpha: float, margin: float, comparisons: int,
                     share: float | None = None, threshold: float = 0.5, upward: bool = True) -> np.ndarray:
    """The exact power of one comparison at each number of seeds in ``seeds``
    (``share``, ``threshold``, ``upward``: as :func:`counted_power`)."""
    seeds = np.atleast_1d(np.asarray(seeds, dtype=int))
    given_counted = counted_power(effect, int(seeds.max()), alpha, margin, comparisons, share, threshold, upward)
    # P(c signed of n) for every n at once (one call, the same values), each n's then dotted as before
    pmf = _binomial_pmf(np.concatenate([np.arange(n + 1) for n in seeds]), np.repeat(seeds, seeds + 1),
                        effect.signed)
    starts = np.concatenate([[0], np.cumsum(seeds + 1)])
    return np.array([float(np.dot(pmf[start:start + n + 1], given_counted[:n + 1]))
                     for start, n in zip(starts, seeds)])


def claim_power(effects: Sequence[Effect], seeds, alpha: float, margin: float, comparisons: int) -> np.ndarray:
    """The lower bound 1 − Σ (1 − power) of the claim's power at each number of seeds."""
    shortfall = sum(1 - comparison_power(e, seeds, alpha, margin, comparisons) for e in effects)
    return np.clip(1 - shortfall, 0.0, 1.0)


def sample_size(effects: Sequence[Effect], alpha: float, margin: float, comparisons: int, power: float = 0.9,
                max_seeds: int = 4000, stay: int = 25) -> int:
    """The smallest number of seeds N at which the claim's power bound is at
    least ``power`` at N and at each of the next ``stay`` numbers of seeds (the
    exact power of a discrete test saws up and down, and the two-level rule
    dips where the claim level's interval has left 1/2 and the Bonferroni
    level's has not). Searched up to 500, 1000, … ``max_seeds``; ValueError beyond."""
    limit = min(500, max_seeds)
    while True:
        seeds = np.arange(2, limit + stay + 1)
        reached = claim_power(effects, seeds, alpha, margin, comparisons) >= power
        window = np.convolve(reached.astype(int), np.ones(stay + 1, dtype=int), mode="valid") == stay + 1
        qualifying = np.flatnonzero(window)  # N = seeds[i] qualifies when reached[i .. i + stay] all hold
        if qualifying.size:
            return int(seeds[qualifying[0]])
        if limit >= max_seeds:
            raise ValueError(f"power {power} is not reached within {max_seeds} seeds")
        limit = min(2 * limit, max_seeds)


def power_analysis(entry: Mapping, margin: float) -> dict:
    """The registration's power analysis of one confirmatory entry
    (``confirmatory.claims[i]`` of the config): its sample size and, at that
    size, each comparison's exact power and the claim's bound."""
    effects = [Effect(e["comparison"], int(e["moved"]), int(e["counted"]), int(e["seeds"]))
               for e in entry["observed"]]
    alpha, power, comparisons = float(entry["alpha"]), float(entry["power"]), int(entry["comparisons"])
    n = sample_size(effects, alpha, margin, comparisons, power)
    rows = [{"comparison": e.comparison, "observed": f"{e.moved}/{e.counted} of {e.seeds}", "share": e.share,
             "signed": e.signed, "correct": " or ".join(sorted(correct_verdicts(e.share, margin))),
             "power": float(comparison_power(e, [n], alpha, margin, comparisons)[0])} for e in effects]
    return {"seeds": n, "alpha": alpha, "margin": margin, "comparisons": comparisons, "target": power,
            "claim_power_bound": float(claim_power(effects, [n], alpha, margin, comparisons)[0]),
            "comparisons_power": rows}


def spread_from_interval(low: float, high: float, n: int, confidence: float) -> float:
    """The per-seed standard deviation behind a mean's interval [low, high]
    at ``confidence`` on ``n`` seeds, read as a t interval (the skew
    correction shifts the ends, to first order not the width)."""
    from scipy.stats import t as student

    return (high - low) * np.sqrt(n) / (2 * float(student.ppf(1 - (1 - confidence) / 2, n - 1)))


def mean_power(mean: float, sd: float, seeds, alpha: float, margin: float, comparisons: int,
               threshold: float = 0.0, upward: bool = True) -> np.ndarray:
    """The power of one mean comparison judged once at level α ("does not
    hold" at α/``comparisons``) at each number of seeds in ``seeds``, in the
    normal approximation: the estimate ~ N(mean, sd²/N), its intervals the
    estimate ± t·sd/√N. Given N the verdict is constant between the points
    where an interval's end crosses the threshold or the tie band's edges, so
    it is read off :func:`comparison_verdicts` at each piece's midpoint and
    the pieces' normal masses of a correct verdict are summed."""
    from scipy.stats import norm, t as student

    seeds = np.atleast_1d(np.asarray(seeds, dtype=int))
    confidence, fail_confidence = procedure_levels(alpha, 1, comparisons)
    right = list(correct_verdicts(mean, margin, threshold, upward))
    out = np.empty(seeds.size)
    # the t quantiles of every N in one call each (elementwise: the values of one call per N)
    narrow_t = student.ppf(1 - (1 - confidence) / 2, seeds - 1)
    wide_t = student.ppf(1 - (1 - fail_confidence) / 2, seeds - 1)
    for i, n in enumerate(seeds):
        se = sd / np.sqrt(n)
        half = float(narrow_t[i]) * se
        wide = float(wide_t[i]) * se
        cuts = np.unique(threshold + np.array([-half, half, -wide, wide, margin - half, half - margin,
                                               -margin + half, -(half - margin)]))
        edges = np.concatenate([[-np.inf], cuts, [np.inf]])
        middle = np.concatenate([[cuts[0] - 1.0], (cuts[:-1] + cuts[1:]) / 2, [cuts[-1] + 1.0]])
        verdicts = comparison_verdicts(middle - half, middle + half, middle - wide, middle + wide, threshold,
                                       margin, upward)
        mass = np.diff(norm.cdf(edges, loc=mean, scale=se))
        out[i] = float(mass[np.isin(verdicts.astype(str), right)].sum())
    return out


def smallest_size(power_at, target: float, cap: int, stay: int = 25) -> int | None:
    """The smallest N ≤ ``cap`` at which ``power_at`` (an array of N → the
    power bound at each) is at least ``target`` at N and at each of the next
    ``stay`` sizes (a discrete test's power saws up and down), or None."""
    seeds = np.arange(2, cap + stay + 1)
    reached = np.asarray(power_at(seeds)) >= target
    window = np.convolve(reached.astype(int), np.ones(stay + 1, dtype=int), mode="valid") == stay + 1
    qualifying = np.flatnonzero(window)
    qualifying = qualifying[seeds[qualifying] <= cap]
    return int(seeds[qualifying[0]]) if qualifying.size else None
