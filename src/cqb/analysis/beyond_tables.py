"""Markdown tables of the 'Beyond the paper' numbers, read off the pipeline's
tables (Figures 5 and 6, docs/figures.md):

    cqb tables [results_dir] [figures_dir]      (or python -m cqb.analysis.beyond_tables)
"""

import sys
from pathlib import Path

import pandas as pd

from .aggregate import read_table
from ..presentation import DISPLAY_NAMES


def markdown(frame):
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def main(results="results", figures="figures"):
    summary = pd.read_csv(Path(results, "aggregate", "regret_rates.tsv"), sep="\t")
    slopes = pd.read_csv(Path(results, "aggregate", "regret_slopes.tsv"), sep="\t",
                         keep_default_na=False, na_values=["nan"])
    print("Fitted slopes of log R on log T, R the mean tail regret of the runs that did not stall "
          "(95% seed-bootstrap interval; cqb.analysis.rates):\n")
    print(markdown(pd.DataFrame({
        "experiment": slopes["experiment"],
        "policy": [DISPLAY_NAMES.get(p, p) for p in slopes["policy"]],
        "slope": [f"{s:.2f}" for s in slopes["slope"]],
        "95% interval": [f"[{lo:.2f}, {hi:.2f}]" for lo, hi in zip(slopes["ci_low"], slopes["ci_high"])],
        "theorem": [f"{r} ({s:.2f})" for r, s in zip(slopes["reference"], slopes["reference_slope"])],
        "verdict": slopes["verdict"], "stalled runs": [f"{s} / {n}" for s, n in zip(slopes["n_stalled"], slopes["n_runs"])],
        "horizons dropped (estimate ≤ 0)": slopes["horizons_dropped"]})))
    for experiment, own in summary.groupby("experiment", sort=False):
        print(f"\n{experiment}: R at ≈ T [95% bootstrap interval] (runs, stalled):\n")
        cells = own.assign(cell=[f"{m:.3f} [{lo:.3f}, {hi:.3f}] ({n}, {k})" for m, lo, hi, n, k in
                                 zip(own["estimate"], own["ci_low"], own["ci_high"], own["n_runs"], own["n_stalled"])])
        wide = cells.pivot(index="horizon", columns="policy", values="cell")[list(dict.fromkeys(own["policy"]))]
        wide.columns = [DISPLAY_NAMES.get(p, p) for p in wide.columns]
        print(markdown(wide.reset_index().rename(columns={"horizon": "T"})))
    print()

    fig6 = read_table(Path(figures, "fig6.tsv"))
    final = fig6[fig6["t"] == fig6["t"].max()]
    final = final[final["panel"].isin([1, 2])]
    rows = []
    for _, row in final.iterrows():
        name = "Optimal" if row["policy"] == "oracle" else DISPLAY_NAMES.get(row["policy"].split(".")[0])
        scale = "—" if row["policy"] == "oracle" else row["sweep_value"]
        rows.append((name, scale, f"{row['queue_mean']:.1f} ± {row['queue_sd']:.1f}", int(row["n_seeds"])))
    table = pd.DataFrame(rows, columns=["policy", "c_β", f"Q(T = {int(final['t'].max())}) mean ± sd", "seeds"])
    print("\nFigure 6, final queue length:\n")
    print(markdown(table.drop_duplicates()))


if __name__ == "__main__":
    main(*sys.argv[1:])
