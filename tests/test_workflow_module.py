"""The workflow's entry points: workflow/Snakefile (the catalog's layout), the
top-level Snakefile that includes it, and either used as a module of another
workflow (`module ... snakefile:`). Run from the root through either file, it
is the main workflow; as a module, a small host workflow includes it, runs one
of its simulations and records, from the host's `onsuccess` (in its Snakemake
process), whether the run server was started and the scheduler's timer patch
applied. A module gets neither unless its config asks for it; the main
workflow gets both by default."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, copy_workflow, snakemake

pytestmark = pytest.mark.slow

RUN = "results/smoke/runs/synth_K5_d5_lam0.7_eps0.1_acc0.005/T300/random/seed0.npz"


# Appended to a copy's workflow/Snakefile: what the parsed workflow decided, at parse time.
PARSE_PROBE = textwrap.dedent("""

    import json as _probe_json

    with open("parse_probe.json", "w") as _probe:
        _probe_json.dump({"module": IS_MODULE, "run_server": config["execution"]["run_server"],
                          "basedir": str(WORKFLOW_ROOT), "report": str(workflow.report_text)}, _probe)
    """)


def planned_jobs(stdout: str) -> dict[str, int]:
    """The dry run's job counts: {rule: count}."""
    jobs = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0].isidentifier():
            jobs[parts[0]] = int(parts[1])
    return jobs


def test_both_entry_points_load_the_same_main_workflow(tmp_path):
    """`snakemake` from the root (the top-level Snakefile) and `-s workflow/Snakefile`,
    without a target: the same plan (rule `all`'s), the project's profile, and
    neither mistaken for a module."""
    copy = copy_workflow(tmp_path / "repo")
    with open(copy / "workflow" / "Snakefile", "a") as snakefile:
        snakefile.write(PARSE_PROBE)
    plans = {}
    for entry in ([], ["-s", "workflow/Snakefile"]):
        process = snakemake(copy, *entry, "-n", "--configfile", "config/smoke.yaml")
        assert "Using workflow specific profile profiles/default" in process.stderr, process.stderr[-2000:]
        probe = json.loads((copy / "parse_probe.json").read_text())
        assert probe == {"module": False, "run_server": True, "basedir": str(copy.resolve()),
                         "report": str(copy.resolve() / "workflow" / "report" / "workflow.rst")}, (entry, probe)
        plans[" ".join(entry) or "root"] = planned_jobs(process.stdout)
    assert plans["root"]["simulate"] > 0 and plans["root"].get("all") == 1, plans
    assert plans["root"] == plans["-s workflow/Snakefile"], plans


def host_workflow(directory: Path, execution: dict | None, entry: str = "Snakefile") -> Path:
    """A host Snakefile that uses every rule of this workflow under the prefix
    `cqb_`, with the smoke config (and `execution` when given), whose
    `onsuccess` records the side effects."""
    directory.mkdir(parents=True)
    overrides = f"config['execution'] = {execution!r}\n" if execution is not None else ""
    (directory / "Snakefile").write_text(textwrap.dedent(f"""\
        configfile: "{REPO}/config/config.yaml"
        configfile: "{REPO}/config/smoke.yaml"
        """) + overrides + textwrap.dedent(f"""\

        module cqb:
            snakefile:
                "{REPO}/{entry}"
            config:
                config


        use rule * from cqb as cqb_*


        onsuccess:
            import json, os
            from snakemake.scheduling.job_scheduler import JobScheduler

            patched = getattr(JobScheduler._schedule_reevalutation, "coalesced", False)
            deferred = getattr(JobScheduler.__dict__["remaining_jobs"], "deferred", False)
            with open("probe.json", "w") as handle:
                json.dump({{"patched": patched, "deferred": deferred, "server": os.environ.get("CQB_RUN_SERVER")}},
                          handle)
        """))
    return directory


def run_host(directory: Path) -> dict:
    process = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", RUN], cwd=directory,
                             capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert (directory / RUN).is_file()  # the module's simulate rule ran in the host's folder
    return json.loads((directory / "probe.json").read_text())


@pytest.mark.parametrize("entry", ["Snakefile", "workflow/Snakefile"])
def test_a_module_starts_no_run_server_and_patches_nothing(tmp_path, entry):
    assert run_host(host_workflow(tmp_path / "host", None, entry)) == {"patched": False, "deferred": False,
                                                                        "server": None}


def test_a_module_whose_config_asks_gets_them(tmp_path):
    probe = run_host(host_workflow(tmp_path / "host", {"run_server": True, "coalesce_rescheduling": True,
                                                       "defer_remaining_jobs": True}))
    assert probe["patched"] is True and probe["deferred"] is True and probe["server"], probe
