"""The curve: one policy label at one sweep value of an experiment, over its
seeds, with its run files. The plan (:func:`cqb.config.experiments.build_plan`)
makes every curve; the tables (:mod:`cqb.analysis.aggregate`,
:mod:`cqb.analysis.summaries`) read one curve's run files at a time.

Here, below both, so that the analysis can take the plan's own objects; no
numpy or pandas at import time (the workflow imports it while parsing).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .formatting import format_value


@dataclass(frozen=True)
class Curve:
    """A policy label at one sweep value within an experiment, over its seeds.

    The tables need only ``label``, ``sweep_param``, ``sweep_value`` and
    ``files``; the plan fills in the rest (what the runs are)."""

    label: str  # the run label (the tables' `policy` column), e.g. cqb_opt.bonus_scale0.1
    sweep_param: str = ""  # "" without a sweep
    sweep_value: object = None  # None without a sweep
    seeds: tuple[int, ...] = ()
    files: tuple[str, ...] = ()  # one run file per seed, in seed order (see with_files)
    experiment: str = ""
    base_label: str = ""  # the label in the config, e.g. cqb_opt
    policy: str = ""
    display: str = ""
    params: dict = field(default_factory=dict)
    instance: dict = field(default_factory=dict)
    instance_id: str = ""
    horizon: int = 0
    second_stage_seeds: tuple[int, ...] = ()  # the seeds of a second stage (a tail of ``seeds``), else ()

    @property
    def sweep_text(self) -> str:
        return "" if self.sweep_value is None else format_value(self.sweep_value)

    @property
    def run_key(self) -> tuple[str, str, str]:
        return self.instance_id, str(self.horizon), self.label

    def run_file(self, run_file: str, seed: int) -> str:
        """The run file of one seed, from the workflow's pattern (its RUN_FILE)."""
        return run_file.format(instance_id=self.instance_id, horizon=self.horizon, policy=self.label, seed=seed)

    def with_files(self, run_file: str, seeds=None) -> Curve:
        """This curve with the run files of ``seeds`` (default its own) under ``run_file``."""
        seeds = self.seeds if seeds is None else tuple(seeds)
        return replace(self, seeds=seeds, files=tuple(self.run_file(run_file, seed) for seed in seeds))
