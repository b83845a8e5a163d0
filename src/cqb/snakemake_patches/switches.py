"""The switches of the config's ``execution`` block that patch Snakemake (each
described in workflow/schemas/config.schema.yaml and docs/pipeline.md,
"Throughput"): which patch each turns on, and the one line a patch prints
when it stands down on a Snakemake whose internals are not those it was
written for (Snakemake's own behaviour then goes on)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence

from .job_patches import index_input_producers, memoize_shell_commands, memoize_signatures
from .scheduling import coalesce_rescheduling, defer_remaining_jobs, sample_ready_jobs, skip_unread_input_sizes

# (switch, the patch: True where installed, False where it stood down, what it patches, the patch in a word)
PATCHES: tuple[tuple[str, Callable[[], bool], str, str], ...] = (
    ("coalesce_rescheduling", coalesce_rescheduling, "JobScheduler", "timer"),
    ("defer_remaining_jobs", defer_remaining_jobs, "JobScheduler", "remaining-jobs"),
    ("sample_ready_jobs", sample_ready_jobs, "JobScheduler", "ready-jobs"),
    ("skip_unread_input_sizes", skip_unread_input_sizes, "JobScheduler", "input-sizes"),
    ("index_input_producers", index_input_producers, "Job", "input-producers"),
    ("memoize_shell_commands", memoize_shell_commands, "Job", "shell-command"),
    ("memoize_signatures", memoize_signatures, "get_function_params", "signature"),
)


def stand_down_notice(patched: str, what: str) -> str:
    return f"cqb: this Snakemake's {patched} is not the one the {what} patch was written for; left as it is"


def apply_patches(execution: Mapping, patches: Sequence = PATCHES, stream=None) -> list[str]:
    """Each patch whose switch is on in ``execution``; one notice line on
    ``stream`` (stderr) for each that stands down. The switches of those."""
    stood_down = []
    for switch, patch, patched, what in patches:
        if execution[switch] and not patch():
            print(stand_down_notice(patched, what), file=stream or sys.stderr)
            stood_down.append(switch)
    return stood_down
