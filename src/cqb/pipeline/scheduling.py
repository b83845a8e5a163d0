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
which asks again if it still needs to. The workflow's
``onstart`` calls :func:`coalesce_rescheduling` (config ``coalesce_rescheduling``)."""

from __future__ import annotations

import threading

_PENDING = "_cqb_reevaluation_pending"
_LOCK = threading.Lock()


def coalesce_rescheduling(scheduler_class=None) -> bool:
    """Make ``scheduler_class._schedule_reevalutation`` (Snakemake's
    ``JobScheduler`` by default) keep at most one pending re-evaluation timer
    per scheduler, a daemon one (so none holds the exit). False, changing
    nothing, when the class has no such method (another Snakemake)."""
    if scheduler_class is None:
        try:
            from snakemake.scheduling.job_scheduler import JobScheduler as scheduler_class
        except ImportError:
            return False
    original = getattr(scheduler_class, "_schedule_reevalutation", None)
    if original is None:
        return False
    if getattr(original, "coalesced", False):
        return True

    def schedule_reevaluation(self, delay):
        with _LOCK:
            if getattr(self, _PENDING, False):
                return  # the pending timer's round asks again if it needs to
            setattr(self, _PENDING, True)

        def fire():
            with _LOCK:
                setattr(self, _PENDING, False)  # before the release: that round may arm the next
            self._open_jobs.release()

        timer = threading.Timer(delay, fire)
        timer.daemon = True
        timer.start()

    schedule_reevaluation.coalesced = True
    schedule_reevaluation.original = original
    scheduler_class._schedule_reevalutation = schedule_reevaluation
    return True
