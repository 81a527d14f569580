"""Verifiers the Ray tests' actors import by path (`ray_fakes:slow_verify`): no builds, seconds long on purpose."""

import os
import time

from musacoder.records import Verdict


def slow_verify(task, candidate, backend=None, overrides=None, config=None):
    """`sleep:S` sleeps S seconds, `die` kills the actor's process, `bad` raises ValueError (as the real verifier
    does for an unusable argument); the verdict names the process that ran it."""
    if candidate == "die":
        os._exit(1)
    if candidate == "bad":
        raise ValueError("unknown backend 'bad'")
    if candidate.startswith("sleep:"):
        time.sleep(float(candidate.split(":")[1].split()[0]))
    return Verdict(status="ok", compiled=True, legal=True, correct=True, pass_fraction=1.0, reward=1.0,
                   task=task.key, backend=backend, device="cpu", feedback=f"pid:{os.getpid()}")
