"""Each claim's line (cqb.analysis.claims.lines, cqb.publishing.claims_summary):
the replication column from the replication study's table, the interval a
verdict used with its level, the per-comparison words, and the published
claims outputs rebuilt from the published tables equal to the committed ones."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from conftest import REPO
from cqb.analysis.claims.lines import (NOT_REGISTERED, comparison_words, headline_counts, read_replication,
                                      replication_text, verdict_interval)
from cqb.analysis.summaries import binomial_interval
from cqb.analysis.verdict_rules import FAILS, HOLDS, INCONCLUSIVE

# the replication study's table (claims_replication.tsv): a claim row, a per-policy row, one contradicted
REPLICATION = (
    "claim\tpolicy\toriginal_verdict\toriginal_n\treplication_verdict\treplication_value\treplication_ci_low\t"
    "replication_ci_high\treplication_level\treplication_n\tresult\n"
    "random_linear\t\tholds\t20\tholds\t0.131\t0.11\t0.152\t0.95\t40\treplicated\n"
    "dim_slower\tcqb_opt\tdoes not hold\t217\tholds\t0.56\t0.51\t0.61\t0.95\t300\tcontradicted\n"
    "eps_best_coupon\t\tholds\t160\tinconclusive\t0.02\t-0.01\t0.05\t0.95\t200\tnot replicated\n")


@pytest.fixture
def replication(tmp_path):
    path = tmp_path / "claims_replication.tsv"
    path.write_text(REPLICATION)
    return read_replication(path)


def test_the_replication_column_reads_the_study_and_says_not_registered_without_a_row(replication, tmp_path):
    assert replication_text(replication, "random_linear") == "replicated: holds 0.131 [0.11, 0.152] (95 %, n = 40)"
    assert replication_text(replication, "dim_slower", "cqb_opt").startswith("contradicted: holds 0.56")
    assert replication_text(replication, "dim_slower") == NOT_REGISTERED  # the claim level has no row
    assert replication_text(replication, "cqb_converge") == NOT_REGISTERED
    assert replication_text(None, "random_linear") == NOT_REGISTERED
    assert read_replication(tmp_path / "absent.tsv") is None
    bad = tmp_path / "bad.tsv"
    bad.write_text(REPLICATION.replace("not replicated", "maybe"))
    with pytest.raises(ValueError, match="'maybe' is not one of"):
        read_replication(bad)


def test_the_readme_table_renders_the_replication_column(replication):
    from cqb.publishing.claims_summary import claims_summary_markdown

    claims = pd.DataFrame([{"claim": c, "figure": "fig2", "statement": s, "statistic": "x", "value": 0.6,
                            "ci_low": 0.55, "ci_high": 0.7, "verdict": HOLDS, "n_seeds": 10, "mark": "robust",
                            "detail": ""} for c, s in (("random_linear", "Random grows"), ("other", "Other"))])
    text = claims_summary_markdown(claims, None, replication=replication)
    assert "| Random grows | fig2 | **holds** 0.6 [0.55, 0.7] (95 %) | – | replicated: holds 0.131" in text
    assert "| Other | fig2 | **holds** 0.6 [0.55, 0.7] (95 %) | – | not registered |" in text
    assert "- *Other*: holds 0.6 [0.55, 0.7] (95 %); replication: not registered; readings: robust." in text


def test_does_not_hold_shows_the_bonferroni_interval_it_was_decided_on():
    detail = "p 5→10: 127/187 [0.61, 0.75] holds; p 10→20: 68/174 [0.32, 0.47] does not hold"
    low, high, level, exact = verdict_interval(FAILS, 68 / 174, 0.318, 0.468, 0.95, detail, 2)
    assert (low, high) == binomial_interval(68, 174, 0.975) and level == 0.975 and exact
    assert verdict_interval(HOLDS, 0.6, 0.5, 0.7, 0.9875, detail, 6) == (0.5, 0.7, 0.9875, True)
    # a failing mean: its Bonferroni interval is not in the table, and the label says so
    assert verdict_interval(FAILS, -0.14, -0.22, -0.08, 0.9875, "a − b: -0.14 [-0.22, -0.08] does not hold", 6)[3] \
        is False


def test_the_words_say_what_each_comparison_showed_along_the_sweep():
    detail = ("cqb_opt 5→10: 127/187 [0.61, 0.75] holds (n=217); cqb_opt 10→20: 68/174 [0.32, 0.47] does not "
              "hold (n=217); cqb_opt 3→5: 16/19 [0.54, 0.98] holds (n=20); cqb_eps 3→5: 9/9 [0.6, 1] holds")
    assert comparison_words(detail, "d", "slower", "cqb_opt") == (
        "slower from d = 3 to 5 (16/19 seeds); slower from 5 to 10 (127/187 seeds); "
        "not slower from 10 to 20 (68/174 seeds)")
    assert headline_counts([HOLDS, HOLDS, INCONCLUSIVE, "policy-dependent"]) == (
        "2 holds, 0 does not hold, 0 tie within δ, 1 policy-dependent, 1 inconclusive")


def test_rebuilding_the_published_claims_outputs_from_their_tables_changes_nothing(tmp_path):
    """`cqb publish --rebuild` on a copy of the repository's published tables
    writes every derived file byte for byte as committed: the committed marks,
    lines, README block and report follow from the tables by today's rules."""
    from cqb.figures.multiverse_plot import redraw_published
    from cqb.publishing.republish import rebuild

    for part in ("config", "workflow/schemas", "workflow/report", "docs/results"):
        shutil.copytree(REPO / part, tmp_path / part)
    for name in ("README.md", "docs/figures.md"):
        shutil.copy(REPO / name, tmp_path / name)
    written = rebuild(tmp_path / "docs" / "results", tmp_path / "README.md", tmp_path, draw_fig8=redraw_published)
    assert len(written) >= 8
    for path in written:
        relative = path.split(str(tmp_path) + "/", 1)[-1] if str(tmp_path) in path else path
        assert (tmp_path / relative).read_bytes() == (REPO / relative).read_bytes(), relative


def test_the_short_table_gives_each_claim_its_verdict_replication_and_marks(replication):
    from cqb.publishing.claims_summary import claims_short_markdown

    claims = pd.DataFrame([
        {"claim": "random_linear", "figure": "fig2", "statement": "Random grows", "value": 0.6, "ci_low": 0.55,
         "ci_high": 0.7, "verdict": HOLDS, "n_seeds": 10, "mark": "robust", "mark_deciding": 1,
         "mark_alternatives": 1},
        {"claim": "dim_slower", "figure": "fig3", "statement": "Larger d slower (paper)", "value": 0.5,
         "ci_low": 0.4, "ci_high": 0.6, "verdict": INCONCLUSIVE, "n_seeds": 10, "mark": "by construction"},
        {"claim": "ours", "figure": "fig3", "statement": "(ours) not the paper's", "value": 1.0, "ci_low": 0.9,
         "ci_high": 1.0, "verdict": HOLDS, "n_seeds": 10, "mark": "robust"}])
    per_policy = pd.DataFrame([
        {"claim": "dim_slower", "policy": p, "verdict": v, "by_construction": ""}
        for p, v in (("cqb_eps", HOLDS), ("cqb_opt", FAILS))])
    text = claims_short_markdown(claims, None, per_policy, replication=replication)
    assert "| claim | verdict | replicated | robust |" in text and "(ours)" not in text
    assert "| Random grows | **holds** | replicated (holds, n = 40) | readings: robust (1/1 alternative" in text
    # counted once, as policy-dependent; its replication is per policy; by construction is not counted
    assert ("| Larger d slower | **policy-dependent** (by construction: not counted): holds for CQB-ε, does not "
            "hold for CQB-Opt | CQB-Opt: contradicted (holds, n = 300) | readings: by construction |") in text
    assert "primary readings: 1 holds, 0 does not hold" in text and "1 holding by construction" in text
    assert "| not registered |" in claims_short_markdown(claims[:1], None)
