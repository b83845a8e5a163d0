"""Snakemake script of checkpoint `powered_look`: one look of the powered
reading of one claim (cqb.analysis.powered_reading.evaluate_look) on the run files it reads."""

import json
from dataclasses import replace

from cqb.io.files import atomic_write_text
from cqb.analysis.powered_reading import look_counts, run_files
from cqb.analysis.summaries import SummarySettings, summarise_curves


def main(smk):
    with open(smk.log[0], "w") as log:
        claim = smk.params.claim
        look = int(smk.wildcards.look)
        previous = json.loads(open(smk.input.previous).read()) if smk.input.get("previous") else None
        files = run_files(claim, smk.params.curves, smk.params.run_file, look_counts(claim, look, previous))
        curves = []
        by_unit = {(c.label, c.sweep_text): c for c in smk.params.curves}
        for unit in claim.units:
            paths = files[f"{unit[0]}@{unit[1]}"]
            if paths:
                curve = by_unit[unit]
                curves.append(replace(curve, seeds=(), files=tuple(paths)))  # seeds from the files
        runs = summarise_curves(curves, SummarySettings(**smk.params.summaries))
        from cqb.analysis.powered_reading import evaluate_look

        state = evaluate_look(claim, look, runs, previous)
        atomic_write_text(smk.output.state, json.dumps(state, indent=1, sort_keys=True) + "\n")
        print(f"{claim.spec.name} look {look} (n = {state['n']}, level {state['confidence']:.4g}): "
              f"{state['verdict']}; continue: {state['continue']}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
