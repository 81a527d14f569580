"""Whose fault an error in the worker is, and how it is written into a reply.

Only what the candidate's own code raises (its import and builds, `ModelNew(...)` and its `.to()`, its forward and the
device synchronise right after it, where asynchronous kernel faults surface) is replied as `runtime_error`
(`candidate_error`). Anything else raised in the worker is the harness's: the RPC loop replies it as `infra_error`
(`harness_error`), with `oom` and the process's device memory facts, and the trusted side decides what it means.
"""

from __future__ import annotations

import traceback


class CandidateError(Exception):
    """What the candidate's own code raised (its forward, or a kernel fault seen at the synchronise after it)."""

    def __init__(self, error: BaseException):
        super().__init__(type(error).__qualname__)  # not str(error): the candidate's object, formatted by `trim_tb`
        self.error = error


def guarded(fn, *args):
    """`fn(*args)`, whatever it raises wrapped as the candidate's (`CandidateError`)."""
    try:
        return fn(*args)
    except BaseException as e:  # noqa: BLE001 - anything the candidate's code raises is its own error
        raise CandidateError(e) from e


def is_oom(e: BaseException) -> bool:
    """The one out-of-memory rule (`musacoder.judge.slots.is_oom`)."""
    from musacoder.judge.slots import is_oom as rule

    return rule(e)


def candidate_error(e: BaseException, where: str) -> dict:
    """The reply for an error the candidate's code raised at `where`."""
    return {"ok": False, "kind": "runtime_error", "error": trim_tb(e), "where": where, "oom": is_oom(e)}


def harness_error(e: BaseException, where: str, memory: dict) -> dict:
    """The reply for an error the harness raised while serving `where` (`memory`: the worker's `memory_facts`)."""
    return {"ok": False, "kind": "infra_error", "error": trim_tb(e), "where": where, "oom": is_oom(e), **memory}


def trim_tb(e: BaseException, limit: int = 4000) -> str:
    """The traceback of `e`, its last `limit` characters. `e` may be the candidate's: an exception with a message of
    gigabytes, or one whose message cannot be made, must not make this harness code fail (that would be the verifier's
    fault, which carries no reward), so a long message is cut before anything is formatted around it."""
    try:
        msg = str(e)
        if len(msg) <= limit:
            text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        else:
            frames = "".join(traceback.format_tb(e.__traceback__))[-(limit // 2):]
            text = f"Traceback (most recent call last):\n{frames}{type(e).__qualname__}: {msg[:limit // 5]} … " \
                   f"[{len(msg) - 2 * (limit // 5)} characters left out] … {msg[-(limit // 5):]}"
    except BaseException:  # noqa: BLE001 - whatever the object does when asked for its text
        return f"{type(e).__qualname__} (its message could not be formatted)"
    return text if len(text) <= limit else "…" + text[-limit:]
