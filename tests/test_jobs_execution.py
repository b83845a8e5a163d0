"""The execution switches (config key `execution`): how jobs run, not what
they compute, so not part of the config hash; and the scheduler patch they
switch on (cqb.snakemake_patches.scheduling), checked against the method it replaces
and on a real Snakemake run."""

from __future__ import annotations

import copy
import inspect
import json
import subprocess
import sys
import textwrap
import threading

import pytest
import yaml

from conftest import REPO
from cqb.config.schema import validate_config
from cqb.config.schema import config_hash
from cqb.jobs.client import WORKER_RUNS
from cqb.snakemake_patches.job_patches import (index_input_producers, indexable, memoizable, memoize_shell_commands,
                                      memoize_signatures)
from cqb.snakemake_patches.scheduling import (DeferredJobs, coalesce_rescheduling, defer_remaining_jobs, deferrable,
                                     freeze_the_dag, replaceable, samplable, sample_ready_jobs, sizes_unread,
                                     skippable, skip_unread_input_sizes, spare_the_dag_build)

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


def _config() -> dict:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    validate_config(config, SCHEMA)  # with the schema's defaults, as the workflow hashes it
    return config


def test_the_execution_switches_default_on_and_stay_out_of_the_config_hash():
    config = _config()
    assert config["execution"] == {"run_server": True, "run_client": True, "coalesce_rescheduling": True,
                                   "defer_remaining_jobs": True, "sample_ready_jobs": True,
                                   "skip_unread_input_sizes": True, "index_input_producers": True,
                                   "tune_collector": True,
                                   "memoize_shell_commands": True,
                                   "memoize_signatures": True, "simulate_in_sh": True,
                                   "worker_runs": WORKER_RUNS}
    for switch in config["execution"]:
        flipped = copy.deepcopy(config)
        flipped["execution"][switch] = 1 if switch == "worker_runs" else False
        assert config_hash(flipped) == config_hash(config), switch
    science = copy.deepcopy(config)
    science["aggregate"]["ddof"] = 0
    assert config_hash(science) != config_hash(config)
    experiment = copy.deepcopy(config)
    experiment["experiments"]["synthetic_base"]["seeds"] += 1
    assert config_hash(experiment) != config_hash(config)


def test_an_execution_switch_outside_its_group_is_refused_by_name():
    from cqb.errors import ConfigError

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["run_server"] = False
    with pytest.raises(ConfigError, match="unknown config key run_server"):
        validate_config(config, SCHEMA)


# ------------------------------------------------------------------ the scheduler patch

class FakeScheduler:
    """What Snakemake 9's JobScheduler does in the method the patch replaces."""

    def __init__(self):
        self._open_jobs = threading.Semaphore(0)

    def _schedule_reevalutation(self, delay):
        threading.Timer(delay, lambda: self._open_jobs.release()).start()


def test_the_patch_leaves_alone_a_method_it_was_not_written_for():
    class NewParameter(FakeScheduler):
        def _schedule_reevalutation(self, delay, reason=None):
            threading.Timer(delay, lambda: self._open_jobs.release()).start()

    class RenamedSemaphore(FakeScheduler):
        def _schedule_reevalutation(self, delay):
            threading.Timer(delay, lambda: self._jobs_ready.release()).start()

    class MoreWork(FakeScheduler):
        def _schedule_reevalutation(self, delay):
            self.rounds = getattr(self, "rounds", 0) + 1
            threading.Timer(delay, lambda: self._open_jobs.release()).start()

    for changed in (NewParameter, RenamedSemaphore, MoreWork):
        original = changed._schedule_reevalutation
        assert not replaceable(original), changed.__name__
        assert coalesce_rescheduling(changed) is False
        assert changed._schedule_reevalutation is original
    assert replaceable(FakeScheduler._schedule_reevalutation)


def test_the_installed_snakemake_has_the_method_the_patch_was_written_for():
    from snakemake.scheduling.job_scheduler import JobScheduler

    assert replaceable(getattr(JobScheduler._schedule_reevalutation, "original", JobScheduler._schedule_reevalutation))


def test_where_its_own_way_fails_the_patch_calls_the_original(capsys, monkeypatch):
    armed = []

    class RecordingTimer:
        def __init__(self, delay, function):
            armed.append((delay, function.__name__))

        def start(self):
            pass

    class Scheduler(FakeScheduler):
        pass

    assert coalesce_rescheduling(Scheduler)
    monkeypatch.setattr(threading, "Timer", RecordingTimer)
    scheduler = Scheduler()
    scheduler._schedule_reevalutation(0.5)
    assert armed == [(0.5, "fire")]  # its own way
    broken = Scheduler()
    broken._open_jobs = object()  # what a changed attribute looks like: no release()
    broken._schedule_reevalutation(0.25)
    assert armed[1:] == [(0.25, "<lambda>")]  # the original's timer
    assert "Snakemake's own re-evaluation instead" in capsys.readouterr().err


class FakeDAG:
    """needrun_jobs counts its passes; negative jobs are finished."""

    def __init__(self, jobs):
        self.jobs, self.passes = jobs, 0

    def needrun_jobs(self):
        self.passes += 1
        return iter(self.jobs)

    def finished(self, job):
        return job < 0


class FakeRemaining:
    """What Snakemake 9's JobScheduler.remaining_jobs does."""

    def __init__(self, jobs, running=(), failed=()):
        self.workflow = type("Workflow", (), {})()
        self.workflow.dag = FakeDAG(jobs)
        self.running, self.failed = set(running), set(failed)

    @property
    def remaining_jobs(self):
        return [
            job
            for job in self.workflow.dag.needrun_jobs()
            if job not in self.running
            and not self.workflow.dag.finished(job)
            and job not in self.failed
        ]


def test_the_deferred_remaining_jobs_are_the_originals_made_only_when_read():
    class Scheduler(FakeRemaining):
        pass

    assert deferrable(FakeRemaining.__dict__["remaining_jobs"])
    assert defer_remaining_jobs(Scheduler) and defer_remaining_jobs(Scheduler)  # patching twice wraps once
    assert Scheduler.__dict__["remaining_jobs"].original is FakeRemaining.__dict__["remaining_jobs"]
    scheduler = Scheduler([3, -1, 5, 7, 9], running={5}, failed={9})
    remaining = scheduler.remaining_jobs
    assert isinstance(remaining, DeferredJobs) and scheduler.workflow.dag.passes == 0  # not listed until read
    assert list(remaining) == [3, 7] and len(remaining) == 2 and remaining[1] == 7 and remaining
    assert scheduler.workflow.dag.passes == 1  # listed once, then kept
    assert not Scheduler([-2], running=()).remaining_jobs and 7 in remaining


def test_the_remaining_jobs_patch_leaves_alone_a_property_it_was_not_written_for():
    class Changed(FakeRemaining):
        @property
        def remaining_jobs(self):  # another pass: ordered by priority
            return sorted(FakeRemaining.remaining_jobs.fget(self), key=lambda job: self.workflow.dag.priority(job))

    original = Changed.__dict__["remaining_jobs"]
    assert not deferrable(original) and defer_remaining_jobs(Changed) is False
    assert Changed.__dict__["remaining_jobs"] is original
    assert defer_remaining_jobs(object) is False


def test_the_installed_snakemake_has_the_property_the_patch_defers_and_greedy_never_reads_it():
    from snakemake.scheduling.job_scheduler import JobScheduler

    prop = inspect.getattr_static(JobScheduler, "remaining_jobs")
    assert deferrable(getattr(prop, "original", prop))

    def unread(scheduler):
        raise AssertionError("the greedy selector read the remaining jobs")

    job = type("Job", (), {"scheduler_resources": {"_cores": 1}, "input": (), "priority": 0})()
    assert _greedy(True).select_jobs([job], DeferredJobs(unread, None), {"_cores": 2}, {}) == [job]


class FakeOpen:
    """What Snakemake 9's JobScheduler lists as open jobs, and the names of
    the scheduling round that subsamples them."""

    def __init__(self, ready, subsample=3, dryrun=False):
        self.workflow = type("Workflow", (), {})()
        self.workflow.dag = type("DAG", (), {"ready_jobs": set(ready)})()
        self.subsample, self.dryrun = subsample, dryrun

    @property
    def open_jobs(self):
        """Return open jobs."""
        jobs = list(self.workflow.dag.ready_jobs)
        return jobs

    def schedule(self):  # the names the round uses, as Snakemake 9's
        import random
        needrun = set(self.open_jobs)
        for job in needrun:
            job.reset_params_and_resources()
        if self.dryrun:
            return needrun
        if self.subsample and len(needrun) > self.subsample:
            needrun = set(random.sample(tuple(needrun), k=self.subsample))
        return needrun


def test_the_sampled_open_jobs_are_a_uniform_subsample_of_the_ready_ones_or_all_of_them():
    class Scheduler(FakeOpen):
        pass

    assert samplable(Scheduler, FakeOpen.__dict__["open_jobs"])
    assert sample_ready_jobs(Scheduler) and sample_ready_jobs(Scheduler)  # patching twice wraps once
    assert Scheduler.__dict__["open_jobs"].original is FakeOpen.__dict__["open_jobs"]
    scheduler = Scheduler(range(10))
    seen = {}
    for _ in range(3000):
        drawn = scheduler.open_jobs
        assert len(drawn) == 3 and len(set(drawn)) == 3 and set(drawn) <= set(range(10))
        for job in drawn:
            seen[job] = seen.get(job, 0) + 1
    assert sorted(seen) == list(range(10)) and min(seen.values()) > 700  # 900 each on average
    assert sorted(Scheduler(range(3)).open_jobs) == [0, 1, 2]  # no more than the subsample: all
    assert sorted(Scheduler(range(10), dryrun=True).open_jobs) == list(range(10))  # a dry run runs them all
    assert sorted(Scheduler(range(10), subsample=None).open_jobs) == list(range(10))
    assert Scheduler([]).open_jobs == []


def test_the_ready_jobs_patch_leaves_alone_a_property_or_a_round_it_was_not_written_for():
    class Sorted(FakeOpen):
        @property
        def open_jobs(self):  # another list: ordered
            return sorted(self.workflow.dag.ready_jobs)

    class Unsampled(FakeOpen):
        def schedule(self):  # a round that takes every ready job
            return set(self.open_jobs)

    for scheduler_class in (Sorted, Unsampled):
        original = scheduler_class.__dict__.get("open_jobs", FakeOpen.__dict__["open_jobs"])
        assert sample_ready_jobs(scheduler_class) is False
        assert inspect.getattr_static(scheduler_class, "open_jobs") is original
    assert sample_ready_jobs(object) is False


def test_the_installed_snakemake_has_the_open_jobs_and_the_round_the_patch_was_written_for():
    from snakemake.scheduling.job_scheduler import JobScheduler

    prop = inspect.getattr_static(JobScheduler, "open_jobs")
    assert samplable(JobScheduler, getattr(prop, "original", prop))


class FakeSizes:
    """What Snakemake 9's JobScheduler does to update the input sizes."""

    def __init__(self, selector):
        self._scheduler, self._input_sizes = selector, {}

    async def update_input_sizes(self, jobs):
        import asyncio

        async def get_size(path):
            return path, await path.size() if await path.exists() else None

        paths = {path for job in jobs for path in job.input}
        if paths:
            self._input_sizes.update(await asyncio.gather(*[get_size(path) for path in paths]))


class StatCountingPath(str):
    stats = 0

    async def exists(self):
        StatCountingPath.stats += 1
        return True

    async def size(self):
        return 10


def _greedy(omit: bool):
    """Snakemake's greedy selector, told to omit (or not) its prioritisation by temp and input files."""
    from snakemake.scheduling.greedy import Scheduler as Greedy
    from snakemake.scheduling.greedy import SchedulerSettings

    greedy = Greedy.__new__(Greedy)
    greedy.settings = SchedulerSettings(omit_prioritize_by_temp_and_input=omit)
    greedy.__post_init__()
    return greedy


def test_the_input_sizes_are_skipped_only_for_greedy_omitting_them_and_greedy_then_never_reads_them():
    import asyncio

    class Scheduler(FakeSizes):
        pass

    assert skippable(FakeSizes.__dict__["update_input_sizes"])
    assert skip_unread_input_sizes(Scheduler) and skip_unread_input_sizes(Scheduler)  # wraps once
    assert Scheduler.__dict__["update_input_sizes"].original is FakeSizes.__dict__["update_input_sizes"]
    job = type("Job", (), {"input": [StatCountingPath("a"), StatCountingPath("b")], "priority": 0,
                           "scheduler_resources": {"_cores": 1}})()
    other_selector = type("Scheduler", (), {"settings": _greedy(True).settings})()  # not greedy's class
    for selector, skipped in ((_greedy(True), True), (_greedy(False), False), (other_selector, False)):
        scheduler, before = Scheduler(selector), StatCountingPath.stats
        asyncio.run(scheduler.update_input_sizes([job]))
        assert sizes_unread(scheduler) is skipped
        assert (scheduler._input_sizes, StatCountingPath.stats - before) == (({}, 0) if skipped else
                                                                             ({"a": 10, "b": 10}, 2))

    class Unreadable(dict):
        def __getitem__(self, key):
            raise AssertionError("greedy read an input size")

    assert _greedy(True).select_jobs([job], [], {"_cores": 2}, Unreadable()) == [job]


def test_the_input_sizes_patch_leaves_alone_a_method_it_was_not_written_for():
    class Synchronous(FakeSizes):
        def update_input_sizes(self, jobs):  # not a coroutine
            self._input_sizes.update({path: None for job in jobs for path in job.input})

    assert not skippable(Synchronous.__dict__["update_input_sizes"])
    assert skip_unread_input_sizes(Synchronous) is False and skip_unread_input_sizes(object) is False
    assert not getattr(Synchronous.update_input_sizes, "skipped", False)


def test_the_installed_snakemake_has_the_input_size_update_the_patch_skips():
    from snakemake.scheduling.job_scheduler import JobScheduler

    method = inspect.getattr_static(JobScheduler, "update_input_sizes")
    assert skippable(getattr(method, "original", method))


class CountedDependencies(dict):
    passes = 0

    def items(self):
        CountedDependencies.passes += 1
        return super().items()


class FakeProducer:
    def __init__(self, pipes=()):
        self.pipe_or_service_output = set(pipes)


class FakePrepared:
    """What Snakemake 9's Job reads for its pipe-or-service test, and a prepare that tests every input."""

    def __init__(self, dependencies, inputs):
        self.dag = type("DAG", (), {})()
        self.dag.dependencies = {self: CountedDependencies(dependencies)}
        self.input, self.answers = inputs, None

    async def prepare(self):
        self.answers = {f for f in self.input if self.is_pipe_or_service_input(f)}

    def is_pipe_or_service_input(self, path) -> bool:
        for dep, files in self.dag.dependencies[self].items():
            if path in files:
                return path in dep.pipe_or_service_output
        return False


def test_the_indexed_pipe_test_answers_as_the_original_with_one_pass_per_prepare():
    import asyncio

    class Job(FakePrepared):
        pass

    assert indexable(FakePrepared) and index_input_producers(Job) and index_input_producers(Job)  # wraps once
    piped, plain, late = FakeProducer({"p1", "both"}), FakeProducer(), FakeProducer({"shared"})
    # "shared" is made by `plain` first: the first dependency holding a path decides, as in the original
    dependencies = {plain: {"x", "y", "shared"}, piped: {"p1", "both", "z"}, late: {"shared", "w"}}
    inputs = ["x", "p1", "both", "z", "shared", "w", "nowhere"]
    original, job = FakePrepared(dependencies, inputs), Job(dependencies, inputs)
    asyncio.run(original.prepare())
    CountedDependencies.passes = 0
    asyncio.run(job.prepare())
    assert job.answers == original.answers == {"p1", "both"}
    assert CountedDependencies.passes == 1  # one pass for all seven tests
    assert "_cqb_input_producers" not in job.__dict__  # the index lives for one prepare
    assert [job.is_pipe_or_service_input(f) for f in inputs] == [original.is_pipe_or_service_input(f) for f in inputs]
    assert CountedDependencies.passes > 1  # outside a prepare: the original, pass by pass



def test_the_input_index_is_dropped_when_the_prepare_fails():
    import asyncio

    class Failing(FakePrepared):
        async def prepare(self):
            self.is_pipe_or_service_input("x")
            raise OSError("disk full")

    assert index_input_producers(Failing)
    job = Failing({FakeProducer(): {"x"}}, ["x"])
    with pytest.raises(OSError, match="disk full"):
        asyncio.run(job.prepare())
    assert "_cqb_input_producers" not in job.__dict__


def test_the_input_index_leaves_alone_a_job_it_was_not_written_for():
    class Reordered(FakePrepared):
        def is_pipe_or_service_input(self, path) -> bool:  # the last holder decides: another rule
            answer = False
            for dep, files in self.dag.dependencies[self].items():
                if path in files:
                    answer = path in dep.pipe_or_service_output
            return answer and bool(self.input)

    class Untested(FakePrepared):
        async def prepare(self):  # a prepare that never runs the test
            self.answers = set()

    for job_class in (Reordered, Untested):
        assert not indexable(job_class) and index_input_producers(job_class) is False
        assert not getattr(job_class.is_pipe_or_service_input, "indexed", False)
    assert index_input_producers(object) is False


def test_the_installed_snakemake_has_the_job_the_input_index_was_written_for():
    from snakemake.jobs import Job

    test, prepare = (inspect.getattr_static(Job, name) for name in ("is_pipe_or_service_input", "prepare"))
    original = type("Original", (), {"is_pipe_or_service_input": getattr(test, "original", test),
                                     "prepare": getattr(prepare, "original", prepare)})
    assert indexable(original)


def _snakemake_in(folder, snakefile: str, result: str, *arguments: str):
    """A real Snakemake run of ``snakefile`` in ``folder`` on 2 cores with
    ``arguments``; what its onsuccess wrote to the JSON file ``result``."""
    (folder / "Snakefile").write_text(snakefile)
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *arguments], cwd=folder,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((folder / result).read_text())


ROUNDS_SNAKEFILE = textwrap.dedent('''
    import json
    from pathlib import Path
    from snakemake.jobs import Job
    from snakemake.scheduling.job_scheduler import JobScheduler
    from cqb.snakemake_patches.scheduling import sample_ready_jobs

    resets, rounds = [0], []
    reset, selector = Job.reset_params_and_resources, JobScheduler.job_selector

    def counted_reset(self):
        resets[0] += 1
        return reset(self)

    def counted_selector(self, jobs):
        rounds.append((resets[0], len(jobs)))  # resets and jobs offered in this round
        resets[0] = 0
        return selector(self, jobs)

    Job.reset_params_and_resources, JobScheduler.job_selector = counted_reset, counted_selector
    if config["patch"]:
        assert sample_ready_jobs()

    rule all:
        input: expand("out/{i}.txt", i=range(40))

    rule one:
        output: "out/{i}.txt"
        shell: "echo {wildcards.i} > {output}"

    onsuccess:
        Path("rounds.json").write_text(json.dumps(rounds))
''')


@pytest.mark.parametrize("patch", [True, False])
def test_with_the_patch_a_real_round_resets_only_its_subsample_and_every_job_runs(tmp_path, patch):
    rounds = _snakemake_in(tmp_path, ROUNDS_SNAKEFILE, "rounds.json", "--scheduler-subsample", "5",
                           "--config", f"patch={patch}")
    assert sorted(int(p.stem) for p in (tmp_path / "out").iterdir()) == list(range(40))
    assert all(offered <= 5 for _, offered in rounds)
    most_reset = max(reset for reset, _ in rounds)
    assert most_reset <= 5 if patch else most_reset == 40  # unpatched, the first round resets all 40


PRODUCERS_SNAKEFILE = textwrap.dedent('''
    import json
    from pathlib import Path
    from snakemake.jobs import Job
    from snakemake.scheduling.job_scheduler import JobScheduler
    from cqb.snakemake_patches.job_patches import index_input_producers
    from cqb.snakemake_patches.scheduling import skip_unread_input_sizes

    seen = {"tests": 0, "true": 0, "wrong": [], "sizes": 0}
    selector = JobScheduler.job_selector

    def sizes_seen(self, jobs):
        seen["sizes"] = max(seen["sizes"], len(self._input_sizes))
        return selector(self, jobs)

    JobScheduler.job_selector = sizes_seen
    if config["patch"]:
        assert index_input_producers() and skip_unread_input_sizes()
        indexed = Job.is_pipe_or_service_input

        def checked(self, path):  # every indexed answer against the original's, from scratch
            answer = indexed(self, path)
            if "_cqb_input_producers" in self.__dict__:
                seen["tests"] += 1
                seen["true"] += answer
                if answer != indexed.original(self, path):
                    seen["wrong"].append(str(path))
            return answer

        Job.is_pipe_or_service_input = checked

    rule all:
        input: "sum.txt", "piped.txt"

    rule one:
        output: "out/{i}.txt"
        shell: "echo {wildcards.i} > {output}"

    rule gather:
        input: expand("out/{i}.txt", i=range(30))
        output: "sum.txt"
        shell: "cat {input} > {output}"

    rule make_pipe:
        output: pipe("numbers.pipe")
        shell: "seq 3 > {output}"

    rule read_pipe:
        input: "numbers.pipe", "out/0.txt"
        output: "piped.txt"
        shell: "cat {input[0]} > {output}"

    onsuccess:
        Path("seen.json").write_text(json.dumps(seen))
''')


@pytest.mark.parametrize("patch", [True, False])
def test_with_the_patches_a_real_run_indexes_each_prepare_as_the_original_and_stats_no_input(tmp_path, patch):
    seen = _snakemake_in(tmp_path, PRODUCERS_SNAKEFILE, "seen.json", "--scheduler", "greedy",
                         "--scheduler-greedy-omit-prioritize-by-temp-and-input", "--config", f"patch={patch}")
    assert (tmp_path / "sum.txt").read_text().split() == [str(i) for i in range(30)]
    assert (tmp_path / "piped.txt").read_text().split() == ["1", "2", "3"]
    if patch:  # the gather's 30 inputs and the pipe reader's two, each answered from the index
        assert seen["wrong"] == [] and seen["tests"] >= 32 and seen["true"] == 1 and seen["sizes"] == 0
    else:
        assert seen["sizes"] >= 30  # the sizes of the gather's inputs, stat'ed for a selector that omits them


def test_the_collector_is_spared_while_the_dag_is_built_and_the_dag_frozen_after(monkeypatch):
    import gc

    monkeypatch.setattr(gc, "set_threshold", gc.set_threshold)  # restored after the test, whatever it sets
    original = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        before = spare_the_dag_build()
        assert before == (700, 10, 10) and gc.get_threshold() == (50_000, 10, 10)  # the older generations kept
        dag = [[job] for job in range(1000)]  # tracked objects alive when the DAG is built
        frozen_before = gc.get_freeze_count()
        assert freeze_the_dag(before) >= frozen_before + len(dag)
        assert gc.get_threshold() == (700, 10, 10)  # Python's settings back for the run
        gc.set_threshold(90_000, 5, 5)
        assert spare_the_dag_build() == (90_000, 5, 5) and gc.get_threshold() == (90_000, 5, 5)  # never lowered
    finally:
        gc.unfreeze()
        gc.set_threshold(*original)


TIMER_SNAKEFILE = textwrap.dedent('''
    import json, threading
    from pathlib import Path
    from cqb.snakemake_patches.scheduling import coalesce_rescheduling

    class CountingTimer(threading.Timer):
        """Every Timer Snakemake (or the patch) arms: how many are pending at once."""
        lock = threading.Lock()
        pending = peak = armed = 0

        def start(self):
            with CountingTimer.lock:
                CountingTimer.pending += 1
                CountingTimer.armed += 1
                CountingTimer.peak = max(CountingTimer.peak, CountingTimer.pending)
            super().start()

        def run(self):
            try:
                super().run()
            finally:
                with CountingTimer.lock:
                    CountingTimer.pending -= 1

    threading.Timer = CountingTimer
    if config["patch"]:
        assert coalesce_rescheduling()

    rule all:
        input: expand("out/{i}.txt", i=range(60))

    rule one:
        output: "out/{i}.txt"
        shell: "echo {wildcards.i} > {output}"

    onsuccess:
        Path("timers.json").write_text(json.dumps({"peak": CountingTimer.peak, "armed": CountingTimer.armed}))
''')


def _timers(tmp_path, patch: bool) -> dict:
    return _snakemake_in(tmp_path, TIMER_SNAKEFILE, "timers.json", "--config", f"patch={patch}")


class RuleException(Exception):
    pass


class FakeJob:
    """Snakemake 9's Job as far as the shell-command memo reads it: the command
    formatted from the job's params and resources, which a reset drops."""

    formatted = 0

    def __init__(self, template):
        self.rule = type("Rule", (), {"shellcmd": template})()
        self._params = self._resources = None
        self._params_and_resources_resetted = False
        self.jobid = 7
        self.next_params = {"policy": "cqb_opt"}

    def format_wildcards(self, string):
        if self._params is None:  # as Job.params: made when first read after a reset
            self._params = dict(self.next_params)
        if self._resources is None:
            self._resources = {"threads": 1}
        FakeJob.formatted += 1
        return string.format(params=self._params, threads=self._resources["threads"], jobid=self.jobid)

    def reset_params_and_resources(self):
        if not self._params_and_resources_resetted:
            self._resources = None
            self._params = None
            self._params_and_resources_resetted = True

    @property
    def shellcmd(self):
        """Return the shell command."""
        try:
            return self.format_wildcards(self.rule.shellcmd) if self.rule.shellcmd else None
        except AttributeError as ex:
            raise RuleException(str(ex))
        except KeyError as ex:
            raise RuleException("Unknown variable when printing shell command: {}".format(str(ex)))


def test_the_memoized_shell_command_is_the_one_formatted_from_scratch_at_every_step():
    class Job(FakeJob):
        pass

    assert memoizable(FakeJob) and memoize_shell_commands(Job) and memoize_shell_commands(Job)  # wraps once
    assert Job.__dict__["shellcmd"].original is FakeJob.__dict__["shellcmd"]
    job, scratch = Job("run {params[policy]} on {threads} (job {jobid})"), FakeJob.__dict__["shellcmd"].fget
    steps = [lambda: None, lambda: None,  # read again: the memo
             job.reset_params_and_resources,  # params and resources dropped: formatted again
             lambda: setattr(job, "next_params", {"policy": "q_ucb"}),
             lambda: (setattr(job, "_params_and_resources_resetted", False), job.reset_params_and_resources()),
             lambda: setattr(job, "_resources", {"threads": 2}),  # new resources object
             lambda: setattr(job, "jobid", 8)]
    FakeJob.formatted = 0
    for step in steps:
        step()
        assert job.shellcmd == scratch(job)  # the memo against a formatting from scratch
    # the memo's own formatting: one per change of params, resources or id (4), the first read (1)
    assert FakeJob.formatted == len(steps) + 5
    assert Job("").shellcmd is None


def test_the_shell_command_memo_leaves_alone_a_job_it_was_not_written_for():
    class Changed(FakeJob):
        @property
        def shellcmd(self):  # formatted from something the memo does not key on
            return self.format_wildcards(self.rule.shellcmd) + str(self.attempt)

    class OtherReset(FakeJob):
        def reset_params_and_resources(self):
            self._params = self._resources = self._input = None

    for job_class in (Changed, OtherReset):
        original = job_class.__dict__.get("shellcmd", FakeJob.__dict__["shellcmd"])
        assert not memoizable(job_class) and memoize_shell_commands(job_class) is False
        assert inspect.getattr_static(job_class, "shellcmd") is original
    assert memoize_shell_commands(object) is False


def test_the_installed_snakemake_has_the_job_and_the_function_the_memos_were_written_for():
    from snakemake.jobs import Job

    assert memoizable(Job)
    import snakemake.common as common

    code = common.get_function_params.__code__
    from cqb.snakemake_patches import job_patches

    assert job_patches.code_names(code) == job_patches._SIGNATURE_NAMES


def test_a_memoized_signature_is_the_functions_own_and_an_overwrite_still_wins(monkeypatch):
    import snakemake.common as common
    from snakemake.common import overwrite_function_params

    original = common.get_function_params
    if getattr(original, "memoized", False):
        original = original.original
    monkeypatch.setattr(common, "get_function_params", original)  # restored after the test
    host = type(sys)("host")
    host.get_function_params = original
    assert memoize_signatures([host]) and memoize_signatures([host])  # wraps once
    patched = common.get_function_params
    assert patched.original is original and host.get_function_params is patched

    def input_function(wildcards, input, threads=1):
        return input

    first = patched(input_function)
    assert list(first) == ["wildcards", "input", "threads"] and first == original(input_function)
    assert patched(input_function) is first  # kept on the function
    assert common.get_input_function_aux_params(input_function, {"input": 1, "output": 2}) == {"input": 1}
    overwrite_function_params(input_function, ["wildcards", "output"])
    assert patched(input_function) == ["wildcards", "output"] == original(input_function)
    assert list(patched(len)) == list(original(len))  # a builtin: no attribute to keep it on


def test_the_signature_memo_leaves_alone_a_function_it_was_not_written_for(monkeypatch):
    import snakemake.common as common

    def get_function_params(func):  # another lookup
        return list(inspect.signature(func).parameters)[1:]

    monkeypatch.setattr(common, "get_function_params", get_function_params)
    assert memoize_signatures([]) is False and common.get_function_params is get_function_params


def test_with_the_patch_a_real_run_keeps_at_most_one_pending_timer(tmp_path):
    timers = _timers(tmp_path, patch=True)
    assert timers["armed"] >= 1  # the rounds asked for re-evaluation
    assert timers["peak"] <= 1


def test_the_fault_table_names_tests_that_exist_and_the_values_the_code_uses():
    import re

    from cqb.jobs.client import LOST_AFTER_START

    text = (REPO / "docs" / "jobs.md").read_text()
    table = text[text.index("## Faults and their tests"):]
    named = set(re.findall(r"`(test_\w+)`", table))
    defined = {name for path in (REPO / "tests").glob("test_jobs_*.py")
               for name in re.findall(r"^def (test_\w+)", path.read_text(), re.MULTILINE)}
    assert named and named <= defined, sorted(named - defined)
    assert "LOST_AFTER_START" in text and "REQUEST_TIMEOUT" in text and "REQUEST_LIMIT" in text
    assert LOST_AFTER_START == 75  # EX_TEMPFAIL of sysexits.h, as the page calls it
