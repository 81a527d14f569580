"""One long-lived process that runs `check_task` on candidate tasks, killed and restarted on a timeout or a crash.

Why a process and not the caller's own: a generated graph can hang in a kernel, allocate without bound or crash the
interpreter, and none of that may take the synthesis run down or leave it holding gigabytes. Why one process for
many tasks: importing torch costs seconds, checking a CPU-sized task milliseconds.
"""

from __future__ import annotations

import multiprocessing as mp

from musacoder.data.check import CheckLimits
from musacoder.data.records import TaskCheck


def _serve(conn, memory_limit_bytes: int, threads: int) -> None:  # pragma: no cover - runs in the child
    import resource

    if memory_limit_bytes > 0:
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = memory_limit_bytes if hard == resource.RLIM_INFINITY else min(memory_limit_bytes, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    import torch

    torch.set_num_threads(threads)
    from musacoder.data.check import check_task

    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        source, seed, limits = msg
        result = check_task(source, seed, CheckLimits.model_validate(limits))
        conn.send(result.model_dump())


class CheckWorker:
    """`check(source, seed)` → `TaskCheck`, in a child process; use as a context manager."""

    def __init__(self, limits: CheckLimits | None = None, threads: int = 1):
        self.limits = limits or CheckLimits()
        self.threads = threads
        self._proc = None
        self._conn = None
        self._served = False  # whether the running child has answered once (torch imported)

    def _start(self) -> None:
        ctx = mp.get_context("spawn")  # a fresh interpreter: no inherited torch state or threads
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, self.limits.memory_limit_bytes, self.threads),
                                 daemon=True, name="musacoder-task-check")
        self._proc.start()
        child.close()

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(5)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None
        self._served = False

    def check(self, source: str, seed: int = 0) -> TaskCheck:
        if self._proc is None or not self._proc.is_alive():
            self._stop()
            self._start()
        self._conn.send((source, seed, self.limits.model_dump()))
        grace_s = 0.0 if self._served else 60.0  # a fresh child imports torch first
        if not self._conn.poll(self.limits.timeout_s + grace_s):
            self._stop()
            return TaskCheck(kept=False, reason=f"timeout: no result within {self.limits.timeout_s:.0f} s")
        try:
            result = TaskCheck.model_validate(self._conn.recv())
            self._served = True
            return result
        except (EOFError, ConnectionError, OSError):
            code = self._proc.exitcode if self._proc is not None else None
            self._stop()
            return TaskCheck(kept=False, reason=f"crashed: the check process exited (code {code})")

    def close(self) -> None:
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(5)
            except OSError:
                pass
        self._stop()

    def __enter__(self) -> "CheckWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
