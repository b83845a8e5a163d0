"""The Markdown tables of the pipeline's results summary (results.md): per
experiment and curve the final and tail regret and the stalled runs."""

from __future__ import annotations

import pandas as pd

from ..analysis.formatting import format_number

def results_summary(curves: dict[str, pd.DataFrame], display_names: dict, descriptions: dict) -> str:
    """Markdown: per experiment, one row per curve with its final regret,
    median, tail regret, stalled runs and runs with an uncertified projection
    (from :func:`cqb.analysis.summaries.curve_summaries`)."""
    lines = []
    for experiment, table in curves.items():
        lines += [f"**{experiment}** — {descriptions.get(experiment, '')}", "",
                  "| policy | sweep | Q(T) − Q*(T) mean | median | tail regret mean | median | stalled [95% interval] "
                  "| stalled seeds | projection not converged: runs, seeds |",
                  "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |"]
        for row in table.itertuples():
            sweep = f"{row.sweep_param} = {row.sweep_value}" if row.sweep_param else ""
            lines.append(
                f"| {display_names.get(row.policy.split('.', 1)[0], row.policy)} | {sweep} | "
                f"{format_number(row.final_regret_mean)} | {format_number(row.final_regret_median)} | "
                f"{format_number(row.tail_regret_mean)} | {format_number(row.tail_regret_median)} | "
                f"{row.n_stalled}/{row.n_runs} [{row.stall_ci_low:.2f}, {row.stall_ci_high:.2f}] | "
                f"{row.stalled_seeds} | {_unconverged(row)} |")
        lines.append("")
    return "\n".join(lines)


def _unconverged(row) -> str:
    """Runs of a curve with a projection that ended uncertified, and their seeds."""
    count = getattr(row, "n_unconverged_runs", 0)
    return f"{count}/{row.n_runs}" + (f": {row.unconverged_seeds}" if count else "")


def markdown_table(table: pd.DataFrame) -> str:
    """A plain Markdown table (numbers to 3 significant digits)."""
    def cell(value):
        return format_number(value) if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(map(str, table.columns)) + " |",
             "| " + " | ".join("---" for _ in table.columns) + " |"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)
