"""Markdown tables of the 'Beyond the paper' numbers, read off the pipeline's
tables (for docs/beyond.md):

    cqb tables [results_dir] [figures_dir]      (or python -m cqb.beyond_tables)
"""

import sys
from pathlib import Path

import pandas as pd

from .aggregate import read_table
from .policies import DISPLAY_NAMES


def markdown(frame):
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def main(results="results", figures="figures"):
    summary = pd.read_csv(Path(results, "aggregate", "regret_rates.tsv"), sep="\t")
    slopes = pd.read_csv(Path(results, "aggregate", "regret_slopes.tsv"), sep="\t",
                         keep_default_na=False, na_values={c: ["nan"] for c in ("slope", "ci_low", "ci_high")})
    print("Fitted slopes of log R_T on log T (95% seed-bootstrap interval):\n")
    print(markdown(pd.DataFrame({
        "policy": [DISPLAY_NAMES.get(p, p) for p in slopes["policy"]],
        "slope": [f"{s:.2f}" for s in slopes["slope"]],
        "95% interval": [f"[{lo:.2f}, {hi:.2f}]" for lo, hi in zip(slopes["ci_low"], slopes["ci_high"])],
        "horizons in fit": slopes["horizons_used"], "dropped (mean ≤ 0)": slopes["horizons_dropped"],
        "bootstrap draws kept": slopes["bootstrap_kept"]})))
    print("\nR_T = mean of Q(T) − Q*(T) over seeds [95% t-interval] (n seeds):\n")
    cells = summary.assign(cell=[f"{m:.2f} [{lo:.2f}, {hi:.2f}] ({n})" for m, lo, hi, n in
                                 zip(summary["mean"], summary["ci_low"], summary["ci_high"], summary["n_seeds"])])
    wide = cells.pivot(index="horizon", columns="policy", values="cell")[list(dict.fromkeys(summary["policy"]))]
    wide.columns = [DISPLAY_NAMES.get(p, p) for p in wide.columns]
    print(markdown(wide.reset_index().rename(columns={"horizon": "T"})))
    queues = summary.assign(cell=[f"{q:.2f} / {o:.2f}" for q, o in zip(summary["mean_queue"], summary["mean_oracle"])])
    wide = queues.pivot(index="horizon", columns="policy", values="cell")[list(dict.fromkeys(summary["policy"]))]
    wide.columns = [DISPLAY_NAMES.get(p, p) for p in wide.columns]
    print("\nMean Q(T) / mean Q*(T):\n")
    print(markdown(wide.reset_index().rename(columns={"horizon": "T"})))

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
