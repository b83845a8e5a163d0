"""Every Snakemake command the docs show (tests/test_docs_commands.py finds
them and checks their words) dry-runs (`-n`) in a copy of the workflow; the
commands that differ only in their targets share one dry run. Slow: a dry
run of the full config plans some 14,000 jobs (multiverse and replication
more)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, copy_workflow
from test_docs_commands import COMMANDS, NOT_RUN, _snakemake_parser
from test_workflow_candidates import plugin_env  # noqa: F401  (a fixture: the example plugin installed)

pytestmark = pytest.mark.slow

# What the dry run of a command needs besides the command: the example plugin (examples/greedy_rate).
PLUGIN_COMMANDS = ("candidates=[greedy_rate]",)


# Options that only change what a run prints: the dry run sets its own.
PRINTING = ("-n", "--dry-run", "-p", "--printshellcmds")
# The default profile's cores: `snakemake fig2` and `snakemake --cores N fig2` share a dry run.
PROFILE_CORES = str(yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())["cores"])


def dry_run_groups() -> dict[tuple[str, ...], list[str]]:
    """{a command's arguments other than its targets: the targets of every
    command that shares them} (a command with no target has `all`'s; the
    default profile's --cores is left out)."""
    parser = _snakemake_parser()
    groups: dict[tuple[str, ...], list[str]] = {}
    for command in [command for command in COMMANDS if command.split()[0] == "snakemake" and command not in NOT_RUN]:
        words = shlex.split(command)[1:]
        targets = sorted(parser.parse_args(words).targets)
        if "--workflow-profile" not in words:
            for place in range(len(words) - 1):
                if words[place:place + 2] == ["--cores", PROFILE_CORES]:
                    words = words[:place] + words[place + 2:]
                    break
        rest = []
        for place, word in enumerate(words):  # a target's word, unless it is an option's value
            if word in targets and (place == 0 or not words[place - 1].startswith("-") or words[place - 1] in PRINTING):
                continue
            if word not in PRINTING:
                rest.append(word)
        groups.setdefault(tuple(rest), [])
        groups[tuple(rest)] += [target for target in targets or ["all"] if target not in groups[tuple(rest)]]
    return groups


GROUPS = dry_run_groups()


@pytest.fixture(scope="module")
def docs_workdir(tmp_path_factory) -> Path:
    return copy_workflow(tmp_path_factory.mktemp("docs-commands") / "repo")


@pytest.mark.parametrize("arguments", list(GROUPS), ids=[" ".join(key) or "(none)" for key in GROUPS])
def test_every_documented_snakemake_command_dry_runs(arguments, docs_workdir, request):
    env = request.getfixturevalue("plugin_env") if any(item in arguments for item in PLUGIN_COMMANDS) else None
    words = list(arguments)
    if "--unlock" in words:  # cheap and only touches the copy's .snakemake: run it
        command = words
    else:  # the targets first: a trailing list-taking option would swallow them
        command = [*GROUPS[arguments], "-n", *words]
    process = subprocess.run([sys.executable, "-m", "snakemake", *command], cwd=docs_workdir, capture_output=True,
                             text=True, timeout=600, env=env)
    assert process.returncode == 0, (f"snakemake {shlex.join(command)}:\n{process.stdout[-3000:]}\n"
                                     f"{process.stderr[-3000:]}")
