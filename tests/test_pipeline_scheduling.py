import threading

from cqb.pipeline.scheduling import cancel_rescheduling_timers


def test_pending_timers_are_cancelled_and_other_threads_left_alone():
    fired = []
    timers = [threading.Timer(60, fired.append, args=(i,)) for i in range(3)]
    for timer in timers:
        timer.start()
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        assert cancel_rescheduling_timers() >= 3
        for timer in timers:
            timer.join(timeout=5)
            assert not timer.is_alive()
        assert fired == []
        assert worker.is_alive()  # only timers are cancelled
    finally:
        stop.set()
        worker.join()
