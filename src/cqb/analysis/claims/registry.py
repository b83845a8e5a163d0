"""The claims registry's types: a claim (:class:`ClaimSpec`) with its named
alternative readings (:class:`Reading`); its kind is a row of
:mod:`cqb.analysis.claims.kinds`, and what a check returns
(:class:`ClaimResult`, one interval :class:`Comparison`) is in
:mod:`cqb.analysis.claims.statistics`.

The registry itself is the ``claims:`` section of ``config/config.yaml``
(docs/verdicts.md, "The claims registry"), read into ClaimSpecs by
:func:`cqb.studies.claim_specs.claim_specs`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .kinds import KINDS

METRICS = ("final_regret", "tail_regret", "mean_regret", "early_regret", "peak_round", "peak_queue",
           "late_slope", "full_slope", "time_to_optimal", "explore_rounds")
TESTABLE = ("always", "exploration_half")
CLAIM_COLUMNS = ("claim", "figure", "experiment", "statement", "statistic", "value", "ci_low",
                 "ci_high", "verdict", "n_seeds", "detail")


@dataclass(frozen=True)
class Reading:
    """A named alternative reading of a claim: the fields of the primary
    reading it replaces (kind, metric, direction, threshold, testable)."""

    name: str
    why: str
    overrides: tuple[tuple[str, object], ...] = ()


READING_FIELDS = ("kind", "metric", "direction", "threshold", "testable")


@dataclass(frozen=True)
class ClaimSpec:
    name: str
    statement: str  # the claim in words
    kind: str
    experiment: str
    policies: tuple[str, ...] = ()
    figure: str = ""
    metric: str = "tail_regret"
    direction: str = "increasing"  # ordered: along increasing sweep values the metric is …
    sweep_values: tuple[str, ...] = ()  # restrict to these sweep values (all when empty)
    threshold: float = 0.0
    source: str = "paper"  # "paper" or "ours"
    # the registry (docs/verdicts.md, "The claims registry")
    quote: str = ""  # the paper's sentence, verbatim
    section: str = ""
    quantity: str = ""  # what the paper reports or plots for it
    reading: str = ""  # the primary reading's name
    why: str = ""  # why the primary reading is the closest to the words
    testable: str = "always"  # or "exploration_half": judged only where τ ≤ T/2
    by_construction: str = ""  # why the check cannot fail: shown, not counted as evidence
    readings: tuple[Reading, ...] = ()  # the named alternatives
    per_policy: bool = False  # the verdict is also given per policy
    per_policy_by_construction: tuple[tuple[str, str], ...] = ()  # (policy, why its check cannot fail)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.metric not in METRICS:
            raise ValueError(f"claim {self.name!r}: metric must be one of {METRICS}, got {self.metric!r}")
        if self.direction not in ("increasing", "decreasing"):
            raise ValueError(f"claim {self.name!r}: direction must be increasing or decreasing, "
                             f"got {self.direction!r}")
        if self.testable not in TESTABLE:
            raise ValueError(f"claim {self.name!r}: testable must be one of {TESTABLE}, got {self.testable!r}")
        for reading in self.readings:
            unknown = {key for key, _ in reading.overrides} - set(READING_FIELDS)
            if unknown:
                raise ValueError(f"claim {self.name!r}, reading {reading.name!r}: cannot override {sorted(unknown)}")

    def alternative(self, reading: Reading) -> "ClaimSpec":
        """This claim read another way: the primary's fields with the reading's overrides."""
        from dataclasses import replace

        return replace(self, reading=reading.name, why=reading.why, readings=(), **dict(reading.overrides))

    def for_policy(self, policy: str) -> "ClaimSpec":
        """This claim for one of its policies (its per-policy reading)."""
        from dataclasses import replace

        if policy not in self.policies:
            raise ValueError(f"claim {self.name!r}: {policy!r} is not one of its policies {self.policies}")
        return replace(self, policies=(policy,), readings=(), per_policy=False, per_policy_by_construction=(),
                       by_construction=dict(self.per_policy_by_construction).get(policy, ""))
