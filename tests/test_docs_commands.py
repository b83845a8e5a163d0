"""Every `snakemake …` and `cqb …` command the docs show runs as shown.

The commands come from README.md, docs/*.md and the comments of config/*.yaml
and profiles/**/*.yaml: indented code lines (a `$ ` prompt, a `.venv/bin/`
prefix and backslash continuations allowed) and inline code spans. Each
Snakemake command is first read by Snakemake's own argument parser (a
`--configfile` naming a file that does not exist, or a target swallowed by a
list-taking option, fails here), then dry-run (`-n`) in a copy of the
workflow by tests/test_workflow_docs_commands.py (slow). Each cqb command
runs its subcommand's `--help`, which must name every option the command
uses (`pip install` lines are neither). A command that cannot run here is in NOT_RUN with the
reason; an entry no doc shows any more fails.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, copy_workflow, snakemake

COMMAND = re.compile(r"^(?:\$ )?(?:\.venv/bin/)?(snakemake|cqb)(?= |$)")

# Shown, but not run here, each for its reason.
NOT_RUN = {
    "snakemake --report report.html": "builds its report from a finished run's outputs",
    "snakemake --cores 2 TARGET": "TARGET stands for any target",
    "snakemake --cores 2 'results/runs/…/seed3.npz'": "the path is elided",
}


def documented_files() -> list[Path]:
    return ([REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "config").glob("*.yaml"))]
            + sorted((REPO / "profiles").rglob("*.yaml")))


def _prose_and_code(path: Path) -> tuple[str, list[str]]:
    """A file's prose (for its code spans) and its code lines, continuations joined.
    A YAML file's prose and code are its comments."""
    lines = path.read_text().splitlines()
    if path.suffix == ".yaml":
        lines = [line.split("#", 1)[1][1:] if "#" in line else "" for line in lines]
    prose, code, fenced = [], [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    ") or (path.suffix == ".yaml" and line.startswith("  ")):
            if code and code[-1].endswith("\\"):
                code[-1] = code[-1][:-1].rstrip() + " " + line.strip()
            else:
                code.append(line.strip())
        else:
            prose.append(line)
    return "\n".join(prose), code


def documented_commands() -> dict[str, str]:
    """{command as shown, without prompt, prefix or trailing comment: the file that shows it first}."""
    found: dict[str, str] = {}
    for path in documented_files():
        prose, code = _prose_and_code(path)
        spans = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
        for text in code + spans:
            match = COMMAND.match(text)
            if not match:
                continue
            words = shlex.split(text[match.start(1):], comments=True)
            if "--" in words and words[words.index("--") + 1:][:1] and COMMAND.match(words[words.index("--") + 1]):
                inner = words[words.index("--") + 1:]  # `cqb time … -- snakemake …`: both run
                inner[0] = COMMAND.match(inner[0]).group(1)
                found.setdefault(shlex.join(inner), str(path.relative_to(REPO)))
                words = words[:words.index("--")]
            found.setdefault(shlex.join(words), str(path.relative_to(REPO)))
    return found


COMMANDS = documented_commands()


def test_the_docs_show_commands_and_every_unrun_one_is_still_shown():
    assert sum(command.startswith("snakemake") for command in COMMANDS) > 10, COMMANDS
    assert sum(command.startswith("cqb") for command in COMMANDS) > 5, COMMANDS
    assert "snakemake --cores 2 fig3" in COMMANDS and "cqb publish" in COMMANDS, COMMANDS
    gone = [command for command in NOT_RUN if command not in COMMANDS]
    assert not gone, f"NOT_RUN lists commands no doc shows any more: {gone}"


# ------------------------------------------------------------------ Snakemake

def _snakemake_parser():
    from snakemake.cli import get_argument_parser

    return get_argument_parser()


def _list_options(parser) -> dict[str, str]:
    """{option string: its destination} of Snakemake's options that take a list of words."""
    return {option: action.dest for action in parser._actions if action.nargs in ("*", "+")
            for option in action.option_strings}


@pytest.fixture(scope="module")
def target_rules(tmp_path_factory) -> set[str]:
    workdir = copy_workflow(tmp_path_factory.mktemp("targets") / "repo")
    return set(snakemake(workdir, "--list-target-rules").stdout.split())


def misread_words(words: list[str], target_rules: set[str]) -> list[str]:
    """Why Snakemake would not read ``words`` (a command's arguments) as the
    docs mean: a --configfile that is no file, or a target rule taken as the
    second or later value of a list-taking option while the command names no
    target (`--configfile config/smoke.yaml fig2`, `--forcerun fig2 fig2`)."""
    parser = _snakemake_parser()
    parsed = parser.parse_args(words)
    problems = [f"--configfile {name}: no such file" for name in parsed.configfile or ()
                if not (REPO / name).is_file()]
    list_options = _list_options(parser)
    for place, word in enumerate(words):
        if word not in list_options or parsed.targets:
            continue
        values = []
        for value in words[place + 1:]:
            if value.startswith("-"):
                break
            values.append(value)
        problems += [f"{value!r} is read as a value of {word}, not as a target (targets go first)"
                     for value in values[1:] if value in target_rules]
    return problems


def _runnable(program: str) -> list[str]:
    return [command for command in COMMANDS if command.split()[0] == program and command not in NOT_RUN]


def test_every_documented_snakemake_command_reads_as_the_docs_mean(target_rules):
    misread = {command: problems for command in _runnable("snakemake")
               if (problems := misread_words(shlex.split(command)[1:], target_rules))}
    assert not misread, "\n".join(f"{COMMANDS[command]}: {command}: {problems}"
                                  for command, problems in misread.items())


def test_a_target_after_the_configfile_is_misread(target_rules):
    # the mutant: smoke.yaml's line as it was
    words = shlex.split("--cores 2 --configfile config/smoke.yaml fig2 fig3")
    assert misread_words(words, target_rules) == ["--configfile fig2: no such file", "--configfile fig3: no such file",
                                                  "'fig2' is read as a value of --configfile, not as a target "
                                                  "(targets go first)",
                                                  "'fig3' is read as a value of --configfile, not as a target "
                                                  "(targets go first)"]
    assert misread_words(shlex.split("--cores 1 --forcerun fig2 fig2"), target_rules)
    assert not misread_words(shlex.split("fig2 fig3 --cores 2 --configfile config/smoke.yaml"), target_rules)


# ------------------------------------------------------------------ cqb

def test_every_documented_cqb_command_has_its_subcommand_and_options():
    helps: dict[tuple[str, ...], subprocess.CompletedProcess] = {}
    failures = []
    for command in _runnable("cqb"):
        words = shlex.split(command)[1:]
        subcommand = tuple(words[:1])
        if subcommand not in helps:
            helps[subcommand] = subprocess.run([sys.executable, "-m", "cqb.cli", *subcommand, "--help"],
                                               capture_output=True, text=True, timeout=120)
        process = helps[subcommand]
        options = [word.split("=")[0] for word in words[1:] if word.startswith("--")]
        unknown = [option for option in options if not re.search(rf"{re.escape(option)}\b", process.stdout)]
        if process.returncode != 0 or unknown:
            failures.append(f"{COMMANDS[command]}: {command}: exit {process.returncode}, options not in --help: "
                            f"{unknown}\n{process.stderr[-1000:]}")
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------ the targets

TARGET_BLOCK = re.compile(r"<!-- target-rules begin[^>]*-->\n(.*?)\n<!-- target-rules end -->", re.DOTALL)


def test_the_documented_targets_are_the_workflows(target_rules):
    """The list of targets a misspelt target sends a reader to (the README
    points to it) is every target rule of the workflow (`snakemake
    --list-target-rules`), no more."""
    page = "docs/pipeline.md"
    (block,) = TARGET_BLOCK.findall((REPO / page).read_text())
    expected = ", ".join(f"`{rule}`" for rule in sorted(target_rules))
    assert re.findall(r"`([^`]+)`", block) == sorted(target_rules), f"{page}: the block's line should read\n{expected}"
    assert "snakemake --list-target-rules" in COMMANDS and "--list-target-rules" in (REPO / "README.md").read_text()
