"""Snakemake script of rule `fig8`: the multiverse's cells (each claim's own
verdict rule), the marks, the table (TSV, Markdown) and the figure."""

from cqb.analysis.aggregate import write_table
from cqb.analysis.multiverse import claim_marks, evaluate_cells, render_markdown
from cqb.analysis.summaries import read_runs_table
from cqb.figures.multiverse_plot import plot_multiverse
from cqb.io.files import atomic_write_text


def main(smk):
    multiverse = smk.params.multiverse
    tables = {name: read_runs_table(path) for name, path in zip(smk.params.alternatives, smk.input.runs)}
    cells = evaluate_cells(multiverse, tables)
    marks = claim_marks(cells, multiverse.specs)
    write_table(cells, smk.output.tsv, smk.params.float_format)
    write_table(marks, smk.output.marks, smk.params.float_format)
    atomic_write_text(smk.output.md, render_markdown(multiverse, cells, marks))
    plot_multiverse(multiverse, cells, marks, smk.output.pdf, smk.output.png, smk.params.title)
    with open(smk.log[0], "w") as log:
        print(marks[["claim", "default_verdict", "mark", "opposite"]].to_string(index=False), file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
