"""Copy the generated Figure 7 summary (figures/fig7.md, written by the fig7 rule
from figures/fig7.tsv) into docs/real_data_sensitivity.md between its markers.

    python scripts/sensitivity_docs.py [figures/fig7.md] [docs/real_data_sensitivity.md]
"""

import sys
from pathlib import Path

BEGIN, END = "<!-- BEGIN fig7.md -->", "<!-- END fig7.md -->"


def main(summary="figures/fig7.md", doc="docs/real_data_sensitivity.md") -> int:
    text = Path(doc).read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"error: {doc} lacks the markers {BEGIN} … {END}", file=sys.stderr)
        return 1
    if not Path(summary).exists():
        print(f"error: {summary} does not exist; run `snakemake --cores 2 fig7` first", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    generated = Path(summary).read_text(encoding="utf-8").strip()
    Path(doc).write_text(f"{head}{BEGIN}\n{generated}\n{END}{tail}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
