"""The replication report: one static HTML page the pipeline writes beside the
figures (``figures/report.html``) and ``cqb publish`` copies to
``docs/results/`` with the figures' PNGs.

Per figure: the image, its caption (workflow/report/<figure>.rst, the same
text as Snakemake's report), and every claim about it with both readings —
the paper's N = 10 seeds and the powered one — each with its statistic, value,
interval and verdict. The short table of the paper's claims (the README's)
opens the page; every claim in full and the links (the full claims table, the
reconstruction notes, the tuning, Figure 7's grid, the timings) close it.
Built from the generated tables only.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

from ..analysis.claims.lines import comparisons_in, interval_text, verdict_interval
from ..analysis.claims.tables import reading_mark_text
from ..analysis.multiverse import mark_text

# Sections in reading order: the paper's figures, then ours.
SECTIONS = (
    ("fig2", "Figure 2: the synthetic base instance and the slack ϵ"),
    ("fig3", "Figure 3: more servers K, larger dimension d"),
    ("fig4", "Figure 4: the real datasets"),
    ("fig5", "Beyond the paper — Figure 5: regret against the horizon"),
    ("fig6", "Beyond the paper — Figure 6: the bonus scale c_β"),
    ("fig7", "Beyond the paper — Figure 7: the real-data claim under other readings"),
    ("fig8", "Beyond the paper — Figure 8: every claim under the reconstruction's open choices"),
    ("fig9_rounds", "Beyond the paper — Figure 9: adversarial contexts, the regret over rounds"),
    ("fig9_rates", "Beyond the paper — Figure 9: adversarial contexts, the regret against the horizon"),
    ("fig9_smoothing", "Beyond the paper — Figure 9: the smoothed adversary, the regret against σ"),
    ("tuning", "Held-out tuning"),
)
# Where the rest lives, relative to docs/results/ (the published copy).
LINKS = (
    ("All claims, with every comparison behind each verdict", "claims.md"),
    ("Every registered reading of every claim (robust / reading-dependent)", "claims_readings.md"),
    ("The calibration study: type-I error and power of the procedure", "calibration.tsv"),
    ("Per experiment and policy: regrets and stalled runs", "results.md"),
    ("How every statistic and verdict is defined (stalls, tuning, powered reading)", "../verdicts.md"),
    ("Reconstruction notes: every choice the paper leaves open", "../reconstruction.md"),
    ("Figure 7's grid and its reading", "../figures.md"),
    ("Timings of the pipeline and its benchmarks", "../benchmarks.md"),
)
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.5em; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; white-space: nowrap; }
img { max-width: 100%; border: 1px solid #ddd; }
.holds { color: #17632a; font-weight: bold; } .does-not-hold { color: #a11; font-weight: bold; }
.inconclusive { color: #8a6d00; font-weight: bold; } .tie-within-δ { color: #1f4e99; font-weight: bold; }
.caption { color: #444; }
"""


def _verdict(text) -> str:
    if not isinstance(text, str) or not text:
        return "–"
    return f'<span class="{html.escape(text.replace(" ", "-"))}">{html.escape(text)}</span>'


def _number(value) -> str:
    return "–" if pd.isna(value) else f"{float(value):.3g}"


def _interval(row) -> str:
    return f"{_number(row['value'])} [{_number(row['ci_low'])}, {_number(row['ci_high'])}]"


def rst_to_html(text: str) -> str:
    """The captions' small reStructuredText: **bold**, *italic*, ``code``, paragraphs."""
    out = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        escaped = html.escape(" ".join(paragraph.split()))
        escaped = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", escaped)
        escaped = re.sub(r"\*(.+?)\*", r"<i>\1</i>", escaped)
        escaped = re.sub(r"``(.+?)``", r"<code>\1</code>", escaped)
        out.append(f'<p class="caption">{escaped}</p>')
    return "\n".join(out)


def claims_rows(claims: pd.DataFrame, powered: pd.DataFrame | None) -> list[dict]:
    """One row per claim: its N = 10 reading and, when there is one, its powered reading."""
    by_name = {} if powered is None else {row["claim"]: row for _, row in powered.iterrows()}
    rows = []
    for _, row in claims.iterrows():
        entry = {"claim": row["claim"], "figure": row["figure"], "statement": row["statement"],
                 "statistic": row["statistic"], "paper": row, "powered": by_name.get(row["claim"])}
        rows.append(entry)
    return rows


def paper_claims(rows: list[dict]) -> list[dict]:
    """The paper's own claims (Figures 2–4), not our findings."""
    return [row for row in rows if not str(row["statement"]).startswith("(ours)")
            and row["figure"] in ("fig2", "fig3", "fig4")]


def _mark(row) -> str:
    mark = row["paper"].get("mark") if hasattr(row["paper"], "get") else None
    return mark if isinstance(mark, str) and mark else "–"


def _per_policy_source(row) -> str:
    return f"{row['n_seeds']} ({row['source']})"


def _figures_reading(row) -> dict:
    return {"verdict": row["figures_verdict"], "value": row["figures_value"], "ci_low": row["figures_ci_low"],
            "ci_high": row["figures_ci_high"]}


def _used_interval(row, level: float, comparisons: int) -> str:
    """The interval a verdict used, labelled with its level (cqb.analysis.claims.lines.verdict_interval)."""
    low, high, level, exact = verdict_interval(row["verdict"], row["value"], row["ci_low"], row["ci_high"], level,
                                               row.get("detail", ""), comparisons)
    return html.escape(interval_text(row["value"], low, high, level, exact))


def markdown_to_html(text: str) -> str:
    """The README's generated summary (paragraphs, one table, a list) as HTML."""
    def inline(line):
        line = html.escape(line)
        line = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", line)
        return re.sub(r"\*(.+?)\*", r"<i>\1</i>", line)

    out, table, items = [], [], []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.splitlines()
        if lines[0].startswith("|"):
            rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if "---" not in line]
            table = ["<table>", "<tr>" + "".join(f"<th>{inline(c)}</th>" for c in rows[0]) + "</tr>"]
            table += ["<tr>" + "".join(f"<td>{inline(c)}</td>" for c in row) + "</tr>" for row in rows[1:]]
            out.append("\n".join(table + ["</table>"]))
        elif lines[0].startswith("- "):
            items = [f"<li>{inline(line[2:])}</li>" for line in lines]
            out.append("<ul>" + "".join(items) + "</ul>")
        else:
            out.append(f"<p>{inline(' '.join(lines))}</p>")
    return "\n".join(out)


def _claims_table(rows: list[dict], with_statistic: bool) -> str:
    head = ["claim", "paper's N: value [interval] (level)", "verdict", "n",
            "powered: value [interval] (level)", "verdict", "n (cap)", "readings mark"]
    if with_statistic:
        head.insert(1, "statistic")
    lines = ["<table>", "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for entry in rows:
        paper, powered = entry["paper"], entry["powered"]
        cells = [html.escape(entry["statement"])]
        if with_statistic:
            cells.append(html.escape(entry["statistic"]))
        detail = paper.get("detail", "") if hasattr(paper, "get") else ""
        cells += [f'<span class="num">{_used_interval(paper, 0.95, max(1, len(str(detail).split("; "))))}</span>',
                  _verdict(paper["verdict"]), str(paper["n_seeds"])]
        if powered is None:
            cells += ["–", "–", "–"]
        else:
            cells += [_used_interval(powered, float(powered["confidence"]), comparisons_in(powered["detail"])),
                      _verdict(powered["verdict"]), f"{powered['n_seeds']} ({powered['cap']})"]
        cells.append(html.escape(reading_mark_text(_mark(entry), paper.get("mark_deciding"),
                                                   paper.get("mark_alternatives"))))
        lines.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _markdown_code(text: str) -> str:
    """Escaped text with Markdown's `code` spans as <code> (the provenance line is Markdown)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def calibration_html(table: pd.DataFrame) -> str:
    """The calibration study's figure and its table (type-I error with its
    Monte-Carlo SE at the null, power at the observed effect)."""
    head = ["claim", "kind", "comparison", "type-I error ± SE", "within α + 2 SE", "power", "mean seeds"]
    lines = ['<img src="calibration.png" alt="calibration">', "<table>",
             "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for claim, group in table.groupby("claim", sort=False):
        null = group[group["scenario"] == "null"].iloc[0]
        effect = group[group["scenario"] == "effect"].iloc[0]
        cells = [claim, null["kind"], null["comparison"],
                 f"{_number(null['type1_error'])} ± {_number(null['type1_se'])}", str(null["type1_ok"]),
                 f"{_number(effect['power'])} ({html.escape(str(effect['expected']))})",
                 _number(effect["mean_seeds"])]
        lines.append("<tr>" + "".join(f"<td>{html.escape(str(c)) if i < 3 else c}</td>"
                                       for i, c in enumerate(cells)) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def multiverse_html(marks: pd.DataFrame) -> str:
    """Figure 8's marks: per claim the default column's verdict, the mark and the alternatives named."""
    head = ["claim", "default", "mark", "opposite under", "differs under"]
    lines = ["<table>", "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for _, row in marks.iterrows():
        mark = mark_text(row["mark"], "", row.get("deciding"), row.get("affected"))
        cells = [html.escape(str(row["statement"])), _verdict(row["default_verdict"]), html.escape(mark),
                 html.escape(str(row["opposite"] or "–")), html.escape(str(row["differs"] or "–"))]
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def per_policy_html(per_policy: pd.DataFrame) -> str:
    """The per-policy readings: per claim and policy the headline verdict
    (confirmatory where there is one, else powered), its value, n and source,
    and the figures' seeds' verdict."""
    head = ["claim", "policy", "value [CI]", "verdict", "n (source)", "at the figures' seeds", "note"]
    lines = ["<table>", "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for _, row in per_policy.iterrows():
        note = row["by_construction"] if isinstance(row["by_construction"], str) else ""
        cells = [html.escape(str(row["statement"]).split(" (")[0]), html.escape(str(row["policy"])),
                 f'<span class="num">{_interval(row)}</span>', _verdict(row["verdict"]),
                 html.escape(_per_policy_source(row)),
                 f'{_verdict(row["figures_verdict"])} {_interval(_figures_reading(row))}',
                 html.escape("by construction: " + note if note else "")]
        lines.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def report_html(figures_dir: Path, claims: pd.DataFrame, powered: pd.DataFrame | None, provenance: str,
                captions_dir: Path, calibration: pd.DataFrame | None = None,
                multiverse: pd.DataFrame | None = None, per_policy: pd.DataFrame | None = None,
                summary: str | None = None, in_full: str | None = None) -> str:
    """The page; images are referred to by file name, beside the page.
    ``summary``: the README's short claims table (results.readme_summary),
    which opens the page; then each figure with its claims; then
    ``in_full`` (results.claims_in_full: every claim with the interval each
    verdict used, its size, the replication, both marks and the per-policy rows)."""
    rows = claims_rows(claims, powered)
    paper = paper_claims(rows)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>Contextual queueing bandits: replication report</title>",
             f"<style>{STYLE}</style></head><body>",
             "<h1>Queue length regret bounds for contextual queueing bandits: the replication report</h1>",
             f"<p>{_markdown_code(provenance)}</p>",
             "<h2>The paper's claims</h2>",
             markdown_to_html(summary) if summary else _claims_table(paper, with_statistic=False),
             '<p>Each figure follows with its claims; <a href="#in-full">every claim in full</a> closes the '
             "page.</p>"]
    for figure, title in SECTIONS:
        image = figures_dir / f"{figure}.png"
        if not image.exists():
            continue
        parts.append(f'<h2 id="{figure}">{html.escape(title)}</h2>')
        parts.append(f'<img src="{figure}.png" alt="{html.escape(title)}">')
        caption = captions_dir / f"{figure}.rst"
        if caption.exists():
            parts.append(rst_to_html(caption.read_text()))
        if figure == "fig8" and multiverse is not None:
            parts.append(multiverse_html(multiverse))
        about = [row for row in rows if row["figure"] == figure]
        if about:
            parts.append(_claims_table(about, with_statistic=True))
    parts += ['<h2 id="in-full">Every claim of the paper in full</h2>',
              "<p>Each claim has two readings: the paper's (its N seeds, the figures' runs) and the powered one "
              "(seeds added in looks until the verdict is decided or the cap is reached, the error controlled "
              "across the looks); each interval is the one its verdict used, labelled with its level. The "
              "readings mark is robust when the primary reading decides and every alternative reading that "
              "decides agrees, reading-dependent when one decides otherwise, undecided by the readings when "
              "the primary or most alternatives decide nothing; a check that cannot fail is marked by "
              "construction.</p>"]
    if in_full:
        parts.append(markdown_to_html(in_full))
    elif per_policy is not None and len(per_policy):
        parts += ["<h3>Per policy</h3>", per_policy_html(per_policy)]
    parts.append("<ul>" + "".join(f'<li><a href="{href}">{html.escape(text)}</a></li>' for text, href in LINKS)
                 + "</ul>")
    if calibration is not None and len(calibration):
        parts.append('<h2 id="calibration">Error rates of the powered reading, simulated</h2>')
        parts.append(calibration_html(calibration))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def read_claims(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", keep_default_na=False, na_values={"value": ["nan", ""],
                       "ci_low": ["nan", ""], "ci_high": ["nan", ""]})


def read_multiverse_marks(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", keep_default_na=False)
