"""The job queue without HTTP: cached and late verdicts, shutdown, bounded bookkeeping, shared futures."""

import threading
import time

from conftest import RELU_TASK, FakeVerifier

from musacoder.config import VerifyConfig
from musacoder.service.jobs import JobQueue, JobSpec, job_key
from musacoder.tasks import load_task

TASK = load_task(RELU_TASK)


def spec(candidate, **kw):
    return JobSpec(task=TASK, candidate=candidate, backend="cpu", config=VerifyConfig(**kw))


def wait_done(job, timeout=5):
    return job.future.result(timeout)


def test_key_covers_what_decides_the_verdict():
    base = job_key(spec("c"))
    assert base == job_key(spec("c"))
    assert base != job_key(spec("d")) and base != job_key(spec("c", trials=2))
    assert base != job_key(JobSpec(task=TASK, candidate="c", backend=None, config=VerifyConfig()))
    assert base == job_key(JobSpec(task=TASK.model_copy(update={"path": "/elsewhere.py"}), candidate="c",
                                   backend="cpu", config=VerifyConfig()))


def test_a_waiter_leaving_cannot_cancel_a_shared_job():
    gate = threading.Event()
    q = JobQueue(FakeVerifier(gate=gate), workers=1)
    try:
        job, _ = q.submit(spec("shared"))
        assert not job.future.cancel()  # what asyncio.wrap_future does when a client hangs up
        gate.set()
        assert wait_done(job).status == "ok"
    finally:
        q.stop()


def test_late_verdict_fills_the_cache_and_stop_answers_waiting_jobs():
    fake = FakeVerifier(delay_s=0.4)
    q = JobQueue(fake, workers=1, deadline_s=0.1)
    job, _ = q.submit(spec("late"))
    assert wait_done(job).status == "infra_error"
    time.sleep(0.6)  # the verification finishes after its deadline
    again, how = q.submit(spec("late"))
    assert how == "cached" and wait_done(again).status == "ok" and fake.calls == ["late"]
    q.stop()

    gate = threading.Event()
    q = JobQueue(FakeVerifier(gate=gate), workers=1)
    running, _ = q.submit(spec("r"))
    deadline = time.monotonic() + 10
    while q.running < 1 and time.monotonic() < deadline:  # taken by the worker thread, not still pending (a job
        time.sleep(0.01)  # still pending at stop is answered "shutdown", which a loaded machine made of this one)
    assert q.running == 1
    waiting, _ = q.submit(spec("w"))
    threading.Timer(0.2, gate.set).start()
    q.stop()
    v = wait_done(waiting)
    assert v.status == "infra_error" and v.reward is None and "shutdown" in v.flags
    assert wait_done(running).status == "ok"


def test_cache_and_job_table_are_bounded():
    q = JobQueue(FakeVerifier(), workers=2, cache_size=3, keep_jobs=5)
    try:
        jobs = [q.submit(spec(f"c{i}"))[0] for i in range(10)]
        for j in jobs:
            wait_done(j)
        assert q.cache_entries == 3 and len(q._jobs) <= 5
        assert q.get(jobs[-1].id) is jobs[-1] and q.get(jobs[0].id) is None
    finally:
        q.stop()
