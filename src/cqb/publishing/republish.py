"""Rebuild the published claims outputs from the published tables, without
rerunning anything (``cqb publish --rebuild``): after a change to a rule that
reads only the tables (the marks, the size against δ, how a line is written),
every derived file is written again from docs/results/'s own TSVs:

* the readings marks (claims_readings.{tsv,md}) from the readings' verdicts;
* the claims table's mark columns (claims.{tsv,md});
* Figure 8's marks (fig8_marks.tsv, fig8.md and its block in docs/figures.md,
  the figure, whose rows carry them) from its cells (fig8.tsv);
* the claims' design (claims_design.tsv: the registry's kinds, thresholds and
  margins, refused unless the registry's hash is the one the tables record);
* the README's summary block and the report page.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from ..analysis.aggregate import write_table
from ..io.files import atomic_write_text


def _config(root: Path) -> dict:
    from ..config.schema import validate_config, validate_with_defaults
    from ..datasets.registry import datasets_schema

    config = yaml.safe_load((root / "config" / "config.yaml").read_text())
    config.update(yaml.safe_load((root / "config" / "datasets.yaml").read_text()))
    schemas = root / "workflow" / "schemas"
    validate_config(config, yaml.safe_load((schemas / "config.schema.yaml").read_text()))
    validate_with_defaults(config, datasets_schema(yaml.safe_load((schemas / "datasets.schema.yaml").read_text())))
    return config


def read_published(path: Path) -> pd.DataFrame:
    """A published TSV as the pipeline wrote it ("nan" missing, "" empty text)."""
    return pd.read_csv(path, sep="\t", keep_default_na=False, na_values=["nan"])


def render_claims_pages(folder: Path, record: dict) -> list[str]:
    """claims.md and claims_readings.md of ``folder`` rendered from its TSVs
    (claims, claims_design, claims_readings): the one rendering both the
    pipeline's ``claims`` rule and the publishing path use, so that the same
    tables give the same pages byte for byte (rendered from the floats, a
    value on a rounding edge would print differently)."""
    from ..analysis.claims.lines import read_design
    from ..analysis.claims.tables import READINGS_HEADER, claims_markdown, readings_markdown
    from .provenance import provenance_line

    readings = read_published(folder / "claims_readings.tsv")
    readings["primary"] = readings["primary"].astype(str).str.lower().isin(("true", "1"))
    atomic_write_text(folder / "claims_readings.md",
                      readings_markdown(readings, f"{provenance_line(record)}\n\n{READINGS_HEADER}"))
    claims = read_published(folder / "claims.tsv")
    atomic_write_text(folder / "claims.md", claims_markdown(claims, design=read_design(folder / "claims_design.tsv")))
    return [str(folder / "claims_readings.md"), str(folder / "claims.md")]


def rebuild(folder: Path, readme: Path, root: Path, draw_fig8=None) -> list[str]:
    """Write every table-derived claims output in ``folder`` again (above);
    ``draw_fig8(multiverse, cells, marks, folder, title)``, when given, draws
    Figure 8 again and returns its path (the figures sit above this layer:
    ``cqb.figures.multiverse_plot.redraw_published``)."""
    from ..analysis.claims.lines import claims_design
    from ..analysis.claims.tables import readings_table, with_marks
    from ..analysis.multiverse import claim_marks, render_markdown
    from ..config.experiments import build_plan
    from ..studies.multiverse_plan import multiverse_design
    from .report import report_html
    from .published_results import DOCS_BLOCKS, block_text, claims_in_full, readme_summary, summary_record
    from .provenance import provenance_line
    from .splicing import splice
    from ..studies.claim_specs import claim_specs, registry_hash

    config = _config(root)
    record = json.loads((folder / "provenance.json").read_text())
    if record.get("claims_registry_hash") != registry_hash(config):
        raise ValueError(f"{folder}: its tables were made with claims registry {record.get('claims_registry_hash')}, "
                         f"the config's is {registry_hash(config)}: rerun the claims instead")
    plan = build_plan(config)
    specs = claim_specs(config, plan)
    float_format = config["aggregate"]["float_format"]
    written = []

    def table(name, frame):
        write_table(frame, folder / name, float_format)
        written.append(str(folder / name))

    def text(path, content):
        atomic_write_text(path, content)
        written.append(str(path))

    sweeps = {name: curves[0].sweep_param for name, curves in plan.curves.items() if curves}
    design = claims_design(specs, config["claim_margins"], sweeps)
    table("claims_design.tsv", design)
    by_name = {spec.name: spec for spec in specs}
    old = read_published(folder / "claims_readings.tsv")
    readings = readings_table(old[[c for c in old.columns if not c.startswith("mark")]].to_dict("records"), by_name)
    readings["primary"] = readings["primary"].astype(str).str.lower().isin(("true", "1"))
    table("claims_readings.tsv", readings)
    claims = read_published(folder / "claims.tsv")
    by_construction = {c: r for c, r in zip(claims["claim"], claims["by_construction"]) if isinstance(r, str) and r}
    claims = with_marks(claims.drop(columns=[c for c in claims.columns if c.startswith("mark")]
                                    + ["by_construction"]), readings, by_construction)
    table("claims.tsv", claims)
    written += render_claims_pages(folder, record)
    marks = None
    if (folder / "fig8.tsv").exists():
        cells = read_published(folder / "fig8.tsv")
        old_marks = read_published(folder / "fig8_marks.tsv")
        marks = claim_marks(cells, dict(zip(old_marks["claim"], old_marks["by_construction"])))
        table("fig8_marks.tsv", marks)
        multiverse = multiverse_design(config, plan, specs)
        text(folder / "fig8.md", render_markdown(multiverse, cells, marks))
        if draw_fig8 is not None:
            written.append(draw_fig8(multiverse, cells, marks, folder, config["multiverse"]["title"]))
        page = root / DOCS_BLOCKS[("fig8.md", "fig8")]
        text(page, splice(page.read_text(), "fig8", provenance_line(summary_record("fig8.md", folder)) + "\n\n"
                          + block_text("fig8.md", (folder / "fig8.md").read_text())))
    text(readme, splice(readme.read_text(), "summary", provenance_line(record) + "\n\n" + readme_summary(folder)))
    from .report import read_claims

    def optional(name, reader=read_claims):
        return reader(folder / name) if (folder / name).exists() else None

    text(folder / "report.html", report_html(
        folder, read_claims(folder / "claims.tsv"), optional("claims_powered.tsv"), provenance_line(record),
        root / "workflow" / "report", optional("calibration.tsv", lambda p: pd.read_csv(p, sep="\t", keep_default_na=False)),
        multiverse=marks, per_policy=optional("claims_per_policy.tsv"), summary=readme_summary(folder),
        in_full=claims_in_full(folder)))
    return written
