"""The service's local pool: a bounded queue of verification jobs, worker threads, deduplication, a result cache and
deadlines. No HTTP here; `musacoder.service.app` puts it behind the API.

- **Identical jobs share one result.** A job's key hashes the task (source, name, sizes), the candidate text, the
  backend and the effective `VerifyConfig`. A job identical to one queued or running joins it (same job id); one
  identical to a finished job gets its verdict from an LRU cache. `infra_error` verdicts are never cached: they say
  nothing about the candidate, and a retry should run again.
- **The queue is bounded**: `max_queue` jobs may wait (running ones not counted); beyond that `submit` raises
  `QueueFull` with a Retry-After estimate (mean run time × waiting jobs ÷ workers).
- **Every job has a deadline** (`job_deadline_s` from submission). A job past it is answered `infra_error` (reward
  None) wherever it is. A verification already running cannot be stopped from here (its worker process has its own
  time limits, `VerifyConfig.timeout_s` and `build_timeout_s`); it finishes in the background, holding its thread,
  and a verdict it reaches then (not an infra_error) fills the cache for the next identical job.
- **A verifier that raises** yields an `infra_error` verdict for that job, as in `musacoder.judge.batch.verify_many`;
  the thread goes on with the next job.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import itertools
import json
import math
import threading
import time
import uuid
from collections import OrderedDict, deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable, ContextManager

from musacoder.config import VerifyConfig
from musacoder.records import Task, Verdict
from musacoder.service.metrics import Metrics

Verifier = Callable[..., Verdict]  # the signature of musacoder.judge.pipeline.verify


@dataclass(frozen=True)
class JobSpec:
    """What to verify: the task with its sizes applied, the candidate text, the backend and the effective config."""

    task: Task
    candidate: str
    backend: str | None
    config: VerifyConfig


def job_key(spec: JobSpec) -> str:
    """Hash of everything that decides the verdict (the task's file path on the server does not)."""
    payload = {"task": spec.task.model_dump(mode="json", exclude={"path"}), "candidate": spec.candidate,
               "backend": spec.backend, "config": spec.config.model_dump(mode="json")}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass(eq=False)
class Job:
    id: str
    key: str
    spec: JobSpec
    submitted: float  # time.monotonic()
    deadline: float
    future: Future = field(default_factory=Future)
    started: float | None = None
    finished: float | None = None
    cached: bool = False  # answered from the result cache

    def __post_init__(self):
        # Waiters attach through asyncio.wrap_future, which cancels its source when a waiter is cancelled (a client
        # that hung up); a running future cannot be cancelled, so one client leaving never cancels a shared job.
        self.future.set_running_or_notify_cancel()

    @property
    def state(self) -> str:
        return "done" if self.future.done() else "running" if self.started is not None else "queued"

    @property
    def verdict(self) -> Verdict | None:
        return self.future.result() if self.future.done() else None


class QueueFull(Exception):
    def __init__(self, retry_after_s: int, depth: int, max_queue: int):
        super().__init__(f"the queue is full ({depth} of {max_queue} jobs waiting); retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class BatchTooLarge(ValueError):
    pass


class ServiceClosed(RuntimeError):
    pass


def infra_verdict(spec: JobSpec, error: str, feedback: str, flags: list[str] | None = None) -> Verdict:
    return Verdict(status="infra_error", task=spec.task.key, backend=spec.backend, error=error, feedback=feedback,
                   flags=flags or [])


class JobQueue:
    """Bounded FIFO of jobs run by `workers` threads, each calling `verifier(task, candidate, backend=, overrides=,
    config=)`. `pool_context`, if given, is entered while the threads run (the local pool's workers started ahead)."""

    def __init__(self, verifier: Verifier, *, workers: int = 1, max_queue: int = 256, deadline_s: float = 1800.0,
                 cache_size: int = 4096, keep_jobs: int = 10000, metrics: Metrics | None = None,
                 pool_context: Callable[[], ContextManager] | None = None):
        self.verifier = verifier
        self.workers = workers
        self.max_queue = max_queue
        self.deadline_s = deadline_s
        self.cache_size = cache_size
        self.keep_jobs = keep_jobs
        self.metrics = metrics or Metrics()
        self._pool_context = pool_context
        self._cond = threading.Condition()
        self._pending: deque[Job] = deque()
        self._inflight: dict[str, Job] = {}
        self._cache: OrderedDict[str, Verdict] = OrderedDict()
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._deadlines: list[tuple[float, int, Job]] = []
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._stack = contextlib.ExitStack()
        self._running = 0
        self._mean_run_s = 1.0
        self._started = False
        self._closed = False

    # ---- life cycle -------------------------------------------------------------------------------------------
    def start(self) -> None:
        with self._cond:
            if self._started:
                return
            self._started = True
            if self._pool_context is not None:
                self._stack.enter_context(self._pool_context())
            for i in range(self.workers):
                t = threading.Thread(target=self._work, name=f"musacoder-verify-{i}", daemon=True)
                t.start()
                self._threads.append(t)
            reaper = threading.Thread(target=self._reap, name="musacoder-deadlines", daemon=True)
            reaper.start()
            self._threads.append(reaper)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Answer waiting jobs `infra_error`, let running ones finish (up to `timeout_s`), stop the threads."""
        with self._cond:
            self._closed = True
            waiting = list(self._pending)
            self._pending.clear()
            self._cond.notify_all()
        for job in waiting:
            self._resolve(job, infra_verdict(job.spec, "the service stopped before this job ran",
                                             "The verification service shut down before running this job; retry.",
                                             ["shutdown"]))
        end = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, end - time.monotonic()))
        self._stack.close()

    # ---- state ------------------------------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        return len(self._pending)

    @property
    def running(self) -> int:
        return self._running

    @property
    def cache_entries(self) -> int:
        return len(self._cache)

    def get(self, job_id: str) -> Job | None:
        with self._cond:
            return self._jobs.get(job_id)

    # ---- submission -------------------------------------------------------------------------------------------
    def submit(self, spec: JobSpec) -> tuple[Job, str]:
        return self.submit_many([spec])[0]

    def submit_many(self, specs: list[JobSpec]) -> list[tuple[Job, str]]:
        """Queue jobs all or none; returns (job, how) with how = new, in_flight or cached."""
        self.start()
        keys = [job_key(s) for s in specs]
        with self._cond:
            if self._closed:
                raise ServiceClosed("the service is shutting down; retry against a running one")
            fresh = {k for k in keys if k not in self._inflight and k not in self._cache}
            if len(fresh) > self.max_queue:
                raise BatchTooLarge(f"{len(fresh)} new jobs cannot fit a queue of {self.max_queue}; "
                                    "send them in smaller batches")
            if len(self._pending) + len(fresh) > self.max_queue:
                self.metrics.inc(self.metrics.rejected, "queue_full")
                raise QueueFull(self._retry_after_s(len(fresh)), len(self._pending), self.max_queue)
            now = time.monotonic()
            out = []
            for spec, key in zip(specs, keys):
                if key in self._inflight:
                    job, how = self._inflight[key], "in_flight"
                elif key in self._cache:
                    self._cache.move_to_end(key)
                    job, how = self._new_job(spec, key, now), "cached"
                    job.cached = True
                    job.started = job.finished = now
                    job.future.set_result(self._cache[key])
                    self.metrics.observe(self.metrics.job, 0.0, "total")
                else:
                    job, how = self._new_job(spec, key, now), "new"
                    self._pending.append(job)
                    self._inflight[key] = job
                    heapq.heappush(self._deadlines, (job.deadline, next(self._seq), job))
                self.metrics.inc(self.metrics.submitted, how)
                out.append((job, how))
            self._evict_jobs()
            self._cond.notify_all()
        return out

    def _new_job(self, spec: JobSpec, key: str, now: float) -> Job:
        job = Job(id=uuid.uuid4().hex, key=key, spec=spec, submitted=now, deadline=now + self.deadline_s)
        self._jobs[job.id] = job
        return job

    def _retry_after_s(self, extra: int) -> int:
        waiting = len(self._pending) + extra
        return int(min(600, max(1, math.ceil(self._mean_run_s * waiting / self.workers))))

    def _evict_jobs(self) -> None:
        while len(self._jobs) > self.keep_jobs:
            _, oldest = next(iter(self._jobs.items()))
            if not oldest.future.done():
                break
            self._jobs.popitem(last=False)

    # ---- running ----------------------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                job = self._pending.popleft()
                job.started = time.monotonic()
                self._running += 1
            self.metrics.observe(self.metrics.job, job.started - job.submitted, "queue_wait")
            verdict = self._call(job.spec)
            run_s = time.monotonic() - job.started
            with self._cond:
                self._running -= 1
                self._mean_run_s = 0.9 * self._mean_run_s + 0.1 * run_s
            self.metrics.observe(self.metrics.job, run_s, "run")
            self.metrics.inc(self.metrics.device_busy, verdict.device or "none", by=run_s)
            self._resolve(job, verdict)

    def _call(self, spec: JobSpec) -> Verdict:
        try:
            verdict = self.verifier(spec.task, spec.candidate, backend=spec.backend, overrides=None,
                                    config=spec.config)
            if not isinstance(verdict, Verdict):
                raise TypeError(f"the verifier returned {type(verdict).__name__}, not a Verdict")
            return verdict
        except Exception as e:  # noqa: BLE001 - a job the verifier cannot run must not stop the pool
            return infra_verdict(spec, f"{type(e).__name__}: {e}", f"The verifier could not run this job: {e}")

    def _resolve(self, job: Job, verdict: Verdict) -> None:
        with self._cond:
            if verdict.status != "infra_error" and self.cache_size > 0:
                self._cache[job.key] = verdict
                self._cache.move_to_end(job.key)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
            if job.future.done():  # answered at its deadline already
                return
            job.finished = time.monotonic()
            if self._inflight.get(job.key) is job:
                del self._inflight[job.key]
            job.future.set_result(verdict)
            self._evict_jobs()
        self.metrics.inc(self.metrics.verdicts, verdict.status)
        for stage, seconds in verdict.stage_s.items():
            self.metrics.observe(self.metrics.stage, float(seconds), stage)
        self.metrics.observe(self.metrics.job, job.finished - job.submitted, "total")

    def _reap(self) -> None:
        while True:
            expired: list[tuple[Job, str]] = []
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                while self._deadlines and self._deadlines[0][0] <= now:
                    job = heapq.heappop(self._deadlines)[2]
                    if job.future.done():
                        continue
                    if job.started is None:
                        self._pending.remove(job)
                        expired.append((job, "queued"))
                    else:
                        expired.append((job, "running"))
                if not expired:
                    self._cond.wait(self._deadlines[0][0] - now if self._deadlines else None)
            for job, phase in expired:
                self.metrics.inc(self.metrics.deadlines, phase)
                self._resolve(job, infra_verdict(
                    job.spec, f"deadline: no verdict within {self.deadline_s:g} s of submission (job was {phase})",
                    f"The verification service did not finish this job within its deadline of {self.deadline_s:g} s "
                    f"(it was {phase}). This is a fault of the service, not of the candidate; retry later.",
                    ["deadline"]))
