"""What the workflow changes in Snakemake's own scheduling loop, and why.

Snakemake's job-rate limiter (``--max-jobs-per-timespan``, default 100/1s)
ends every scheduling round that finds ready jobs by arming a
``threading.Timer`` that runs another round one timespan later, and that round
arms the next. Every finished job starts such a chain, and a chain ends only
when a round finds no ready job — with thousands of ready simulate jobs,
never. So the rounds per second grow with the jobs done: a py-spy profile of
the full run (docs/benchmarks.md) found 300–350 timer threads, and 1,900
after 2,000 jobs with a 10-s timespan, each round a new asyncio loop and a
pass over every job of the DAG. One pending timer is enough for what the
timers are for (trying again once the rate limit allows): a round that
wants one while another is pending can rely on the pending one's round,
which asks again if it still needs to. The workflow's ``onstart`` calls
:func:`coalesce_rescheduling` (config ``execution.coalesce_rescheduling``).

Every scheduling round also lists the scheduler's remaining jobs (its
``remaining_jobs`` property: a pass over every job of the DAG) for the job
selector, and the greedy selector of the profile never reads them. With the
DAG's ~23,000 jobs that pass was a third of Snakemake's own CPU in a py-spy
profile, and its cost per job grows with the DAG. :func:`defer_remaining_jobs`
(config ``execution.defer_remaining_jobs``) makes the list one that is made
when first read (the ILP selector reads it at once; the greedy one never).

Every scheduling round also copies the ready jobs into a set and resets the
params and resources of each (a pass over up to ~20,000 jobs in the full
run) before it draws its random subsample of ``scheduler-subsample`` jobs,
the only ones it reads. :func:`sample_ready_jobs` (config
``execution.sample_ready_jobs``) draws that subsample where the ready jobs are
listed (``open_jobs``), so the round copies and resets those jobs alone; a dry
run, which runs every ready job, and a scheduler without a subsample get the
whole list.

Every scheduling round also has the input files of its jobs stat'ed, one
asyncio task per file, for the job selector's prioritisation by temp and
input files; the profile's greedy selector omits that prioritisation and
never reads the sizes. With the aggregations' thousands of inputs this was a
quarter of Snakemake's own CPU in a py-spy profile of the full run.
:func:`skip_unread_input_sizes` (config ``execution.skip_unread_input_sizes``)
skips the update where the selector is greedy with that setting.

What the workflow changes in Snakemake's jobs: :mod:`cqb.snakemake_patches.job_patches`.

Each patch replaces a private method or property, so it first checks that
it is the one it was written for (its parameters and the names its code
uses), keeps the original, and falls back to it: the timer patch calls the
original whenever its own way fails, the deferred list and the sampled
jobs are the original's where a round would read them all, the sizes are
updated wherever a selector reads them."""

from __future__ import annotations

import importlib
import inspect
import random
import sys
import threading
from collections.abc import Sequence

METHOD = "_schedule_reevalutation"  # sic: Snakemake's spelling
_PENDING = "_cqb_reevaluation_pending"
_LOCK = threading.Lock()
# All the original does (snakemake 9): threading.Timer(delay, lambda: self._open_jobs.release()).start()
_ORIGINAL_PARAMETERS = ["self", "delay"]
_ORIGINAL_NAMES = {"threading", "Timer", "start", "_open_jobs", "release"}


def code_names(code) -> set[str]:
    """The global and attribute names a function's code uses, its nested code's included."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if inspect.iscode(constant):
            names |= code_names(constant)
    return names


def snakemake_class(given, module: str, name: str):
    """``given``, else Snakemake's class ``module.name``; None where Snakemake
    has no such class (a patch of None finds nothing to replace)."""
    if given is not None:
        return given
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def patch_state(owner, attribute: str, mark: str, written_for):
    """(the attribute as ``owner`` defines it, True if a patch marked ``mark``
    is already there, False if ``written_for(attribute)`` says it is not the
    one the patch was written for, else None: patch it)."""
    original = inspect.getattr_static(owner, attribute, None)
    if getattr(original, mark, False):
        return original, True
    return original, (None if written_for(original) else False)


def getter_reads(prop, names: set) -> bool:
    """Whether ``prop`` is a property whose getter takes only ``self`` and
    uses exactly the global and attribute ``names``."""
    getter = getattr(prop, "fget", None)
    code = getattr(getter, "__code__", None)
    if not isinstance(prop, property) or code is None:
        return False
    return list(inspect.signature(getter).parameters) == ["self"] and code_names(code) == names


class PatchedProperty(property):
    """A patched property: unlike a plain property it takes attributes, so
    :func:`install` can mark it and give it ``original``."""


def install(owner, attribute: str, replacement, original, mark: str) -> bool:
    """Put ``replacement`` (a function, or a :class:`PatchedProperty`) at
    ``owner.attribute``, marked ``mark`` (what :func:`patch_state` looks for,
    so a second patch sees it) and given ``original``. True."""
    setattr(replacement, mark, True)
    replacement.original = original
    setattr(owner, attribute, replacement)
    return True


def replaceable(method) -> bool:
    """Whether ``method`` is the re-evaluation method the patch replaces."""
    code = getattr(method, "__code__", None)
    if code is None:
        return False
    try:
        parameters = list(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        return False
    return parameters == _ORIGINAL_PARAMETERS and code_names(code) == _ORIGINAL_NAMES


def coalesce_rescheduling(scheduler_class=None) -> bool:
    """Make ``scheduler_class._schedule_reevalutation`` (Snakemake's
    ``JobScheduler`` by default) keep at most one pending re-evaluation timer
    per scheduler, a daemon one (so none holds the exit). False, changing
    nothing, when the class has no such method or not the one it replaces."""
    scheduler_class = snakemake_class(scheduler_class, "snakemake.scheduling.job_scheduler", "JobScheduler")
    original, done = patch_state(scheduler_class, METHOD, "coalesced", replaceable)
    if done is not None:
        return done

    def schedule_reevaluation(self, delay):
        try:
            release = self._open_jobs.release  # what the timer calls: checked before relying on it
            if not callable(release):
                raise TypeError("_open_jobs.release is not callable")
            with _LOCK:
                if getattr(self, _PENDING, False):
                    return  # the pending timer's round asks again if it needs to
                setattr(self, _PENDING, True)

            def fire():
                with _LOCK:
                    setattr(self, _PENDING, False)  # before the release: that round may arm the next
                release()

            timer = threading.Timer(delay, fire)
            timer.daemon = True
            timer.start()
        except Exception as error:  # Snakemake's own way, then
            with _LOCK:
                setattr(self, _PENDING, False)
            print(f"cqb: the scheduler's timer patch failed ({type(error).__name__}: {error}); "
                  "Snakemake's own re-evaluation instead", file=sys.stderr)
            original(self, delay)

    return install(scheduler_class, METHOD, schedule_reevaluation, original, "coalesced")


OPEN_JOBS = "open_jobs"
# What the original lists (snakemake 9): the DAG's ready jobs
_OPEN_NAMES = {"list", "workflow", "dag", "ready_jobs"}
# What the scheduling round does with them (snakemake 9): a set, each job's
# params and resources reset, then a random subsample when there are more
# than `subsample` (none in a dry run, which runs them all)
_ROUND_NAMES = {"open_jobs", "reset_params_and_resources", "subsample", "dryrun", "random", "sample"}


def samplable(scheduler_class, prop) -> bool:
    """Whether ``prop`` is the open-jobs property the patch samples, read by
    the scheduling round it was written for."""
    round_code = getattr(getattr(scheduler_class, "schedule", None), "__code__", None)
    return round_code is not None and _ROUND_NAMES <= code_names(round_code) and getter_reads(prop, _OPEN_NAMES)


def sample_ready_jobs(scheduler_class=None) -> bool:
    """Make ``scheduler_class.open_jobs`` (Snakemake's ``JobScheduler`` by
    default) the random subsample of at most ``subsample`` ready jobs that the
    scheduling round would draw from the whole list, so the round resets and
    copies those jobs and not every ready one. A dry run, or a scheduler
    without a subsample, gets the whole list. False, changing nothing, when
    the class has no such property or not the one the patch was written for."""
    scheduler_class = snakemake_class(scheduler_class, "snakemake.scheduling.job_scheduler", "JobScheduler")
    original, done = patch_state(scheduler_class, OPEN_JOBS, "sampled", lambda prop: samplable(scheduler_class, prop))
    if done is not None:
        return done
    getter = original.fget

    def open_jobs(self):
        size = self.subsample
        if self.dryrun or not size:
            return getter(self)
        ready = self.workflow.dag.ready_jobs
        if len(ready) <= size:
            return list(ready)
        # the module-level generator, as the round's own subsample: job order changes no output
        return random.sample(tuple(ready), k=size)

    return install(scheduler_class, OPEN_JOBS, PatchedProperty(open_jobs, doc=original.__doc__), original, "sampled")


INPUT_SIZES = "update_input_sizes"
# What the original does (snakemake 9): every input file of the round's jobs stat'ed, one task each
_INPUT_SIZES_NAMES = {"size", "exists", "gather", "_input_sizes", "input", "update"}
# Where greedy reads them (snakemake 9): only without omit-prioritize-by-temp-and-input
_REWARD_NAMES = {"settings", "omit_prioritize_by_temp_and_input", "priority", "input", "is_flagged"}
GREEDY_MODULE = "snakemake.scheduling.greedy"


def sizes_unread(scheduler) -> bool:
    """Whether the job selector of ``scheduler`` (a JobScheduler) never reads
    the input sizes: Snakemake's greedy selector told to omit its
    prioritisation by temp and input files (the profile's). Another
    selector, or greedy without that setting, reads them."""
    selector = getattr(scheduler, "_scheduler", None)
    settings = getattr(selector, "settings", None)
    return (type(selector).__module__ == GREEDY_MODULE and type(selector).__name__ == "Scheduler"
            and getattr(settings, "omit_prioritize_by_temp_and_input", None) is True)


def skippable(method) -> bool:
    """Whether ``method`` is the input-size update the patch skips, and the
    installed greedy selector reads sizes only when it does not omit them."""
    code = getattr(method, "__code__", None)
    if code is None or not inspect.iscoroutinefunction(method):
        return False
    try:
        from snakemake.scheduling.greedy import Scheduler as Greedy
    except ImportError:
        return False
    reward = getattr(getattr(Greedy, "job_reward", None), "__code__", None)
    return (list(inspect.signature(method).parameters) == ["self", "jobs"]
            and _INPUT_SIZES_NAMES <= code_names(code) and reward is not None and _REWARD_NAMES <= code_names(reward))


def skip_unread_input_sizes(scheduler_class=None) -> bool:
    """Make ``scheduler_class.update_input_sizes`` (Snakemake's ``JobScheduler``
    by default) do nothing where the job selector never reads the sizes
    (:func:`sizes_unread`), and what it did elsewhere. False, changing
    nothing, when the class has no such method or not the one the patch was
    written for."""
    scheduler_class = snakemake_class(scheduler_class, "snakemake.scheduling.job_scheduler", "JobScheduler")
    original, done = patch_state(scheduler_class, INPUT_SIZES, "skipped", skippable)
    if done is not None:
        return done

    async def update_input_sizes(self, jobs):
        if sizes_unread(self):
            return
        await original(self, jobs)

    return install(scheduler_class, INPUT_SIZES, update_input_sizes, original, "skipped")


REMAINING = "remaining_jobs"
# What the original lists (snakemake 9): the DAG's needrun jobs that are not running, finished or failed
_REMAINING_NAMES = {"workflow", "dag", "needrun_jobs", "running", "finished", "failed"}


class DeferredJobs(Sequence):
    """The list ``getter(scheduler)`` returns, made when it is first read
    (length, truth, items or iteration) and kept: a selector that never reads
    it costs nothing."""

    def __init__(self, getter, scheduler):
        self._getter, self._scheduler, self._jobs = getter, scheduler, None

    def _list(self) -> list:
        if self._jobs is None:
            self._jobs = list(self._getter(self._scheduler))
        return self._jobs

    def __len__(self) -> int:
        return len(self._list())

    def __getitem__(self, index):
        return self._list()[index]

    def __iter__(self):
        return iter(self._list())


def deferrable(prop) -> bool:
    """Whether ``prop`` is the remaining-jobs property the patch defers."""
    return getter_reads(prop, _REMAINING_NAMES)


def defer_remaining_jobs(scheduler_class=None) -> bool:
    """Make ``scheduler_class.remaining_jobs`` (Snakemake's ``JobScheduler``
    by default) a :class:`DeferredJobs` of the original property. False,
    changing nothing, when the class has no such property or not the one the
    patch was written for."""
    scheduler_class = snakemake_class(scheduler_class, "snakemake.scheduling.job_scheduler", "JobScheduler")
    original, done = patch_state(scheduler_class, REMAINING, "deferred", deferrable)
    if done is not None:
        return done
    getter = original.fget
    deferred = PatchedProperty(lambda self: DeferredJobs(getter, self), doc=original.__doc__)
    return install(scheduler_class, REMAINING, deferred, original, "deferred")


# Python's cyclic collector traverses every tracked object of a generation at
# each of its collections. Snakemake's main process builds a DAG of hundreds
# of thousands of objects that live to its end (the jobs, their file lists,
# reasons and params): a forced dry run of the full config spent about an
# eighth of its CPU in a dozen full collections while the DAG grew.
DAG_BUILD_THRESHOLD = 50_000  # allocations between youngest-generation collections (Python's default: 700)


def spare_the_dag_build() -> tuple:
    """Fewer collections while the DAG is built: the youngest generation's
    threshold raised to DAG_BUILD_THRESHOLD (the older ones' kept). The
    thresholds before, for :func:`freeze_the_dag` to restore."""
    import gc

    before = gc.get_threshold()
    gc.set_threshold(max(before[0], DAG_BUILD_THRESHOLD), *before[1:])
    return before


def freeze_the_dag(thresholds: tuple | None = None) -> int:
    """Once the DAG is built: every object alive now moved out of the
    collector's generations for good (``gc.freeze``), so no later collection
    traverses the DAG; the thresholds before :func:`spare_the_dag_build`
    restored. The number of objects frozen."""
    import gc

    gc.freeze()
    if thresholds is not None:
        gc.set_threshold(*thresholds)
    return gc.get_freeze_count()
