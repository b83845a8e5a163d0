"""What the workflow does around Snakemake's own scheduler."""

import threading


def cancel_rescheduling_timers() -> int:
    """Cancel this process's pending ``threading.Timer`` threads; the number cancelled.

    Snakemake's job-rate limiter (``--max-jobs-per-timespan``) runs the
    scheduler again one timespan after every scheduling round, from a
    non-daemon Timer. The default profile's 10-s timespan runs those rounds a
    tenth as often as the default 1 s (docs/pipeline.md, "Throughput"), but the
    last timers would hold the exit for up to 10 s. The workflow's
    ``onsuccess`` and ``onerror`` call this: once the run is over, no round is
    needed."""
    timers = [thread for thread in threading.enumerate() if isinstance(thread, threading.Timer)]
    for timer in timers:
        timer.cancel()
    return len(timers)
