import threading

from cqb.snakemake_patches.scheduling import coalesce_rescheduling


class FakeScheduler:
    """The two things of Snakemake's JobScheduler the patch touches."""

    def __init__(self):
        self._open_jobs = threading.Semaphore(0)

    def _schedule_reevalutation(self, delay):
        threading.Timer(delay, lambda: self._open_jobs.release()).start()


def timers():
    return [t for t in threading.enumerate() if isinstance(t, threading.Timer)]


def test_many_requests_arm_one_daemon_timer_whose_round_can_arm_the_next():
    class Scheduler(FakeScheduler):
        pass

    assert coalesce_rescheduling(Scheduler)
    scheduler = Scheduler()
    before = len(timers())
    for _ in range(50):
        scheduler._schedule_reevalutation(0.2)
    pending = timers()
    assert len(pending) == before + 1 and all(t.daemon for t in pending[before:])
    assert scheduler._open_jobs.acquire(timeout=5)  # the one round
    assert not scheduler._open_jobs.acquire(timeout=0.5)  # and no other
    scheduler._schedule_reevalutation(0.05)  # that round asks again: a new timer
    assert scheduler._open_jobs.acquire(timeout=5)


def test_schedulers_do_not_share_their_pending_timer():
    class Scheduler(FakeScheduler):
        pass

    coalesce_rescheduling(Scheduler)
    first, second = Scheduler(), Scheduler()
    first._schedule_reevalutation(0.05)
    second._schedule_reevalutation(0.05)
    assert first._open_jobs.acquire(timeout=5) and second._open_jobs.acquire(timeout=5)


def test_patching_twice_wraps_once_and_a_class_without_the_method_is_left_alone():
    class Scheduler(FakeScheduler):
        pass

    assert coalesce_rescheduling(Scheduler) and coalesce_rescheduling(Scheduler)
    assert Scheduler._schedule_reevalutation.original is FakeScheduler._schedule_reevalutation
    assert coalesce_rescheduling(object) is False


def test_the_installed_snakemake_has_the_method_the_patch_replaces():
    from snakemake.scheduling.job_scheduler import JobScheduler

    assert callable(getattr(JobScheduler, "_schedule_reevalutation", None))
