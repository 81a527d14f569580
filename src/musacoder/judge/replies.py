"""What the candidate's worker replies, as typed records, checked when they arrive in the trusted process.

A worker's reply crosses the protocol as builtin containers (`musacoder.judge.protocol`). Candidate code runs in that
process and can change what it sends, so the trusted side never reads a reply with `.get` and a default: each request
has one record type here, validated on arrival (`parse`). A reply that does not fit its record is the candidate's
doing (`MalformedReply`; the verdict is `crashed`), never a verifier fault and never a crash of the trusted process.
A reply with `ok` false is a `Fault`: what the candidate's own code raised (`runtime_error`, `compile_error`) or the
harness's error (`infra_error`, with the worker's device memory at that moment).
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True, frozen=True)


class MalformedReply(ValueError):
    """A worker reply that does not fit the record of its request."""


class Fault(_Reply):
    """`ok` false: who raised what, where."""

    kind: Literal["runtime_error", "compile_error", "infra_error"]
    error: str = ""
    where: str = ""
    log: str = ""  # the compiler's log (compile_error)
    builds: list[dict[str, Any]] = []
    oom: bool = False  # the error was running out of device memory
    mem_allocated: int = 0  # bytes the worker's allocator held when a harness fault happened
    mem_free: int = 0  # bytes free on its device then


class CallReport(_Reply):
    """The worker's account of one candidate call (a trial or an audited round)."""

    launches: int = 0  # calls of the candidate's own kernels the build hook counted
    illegal_ops: list[str] = []
    ops: list[str] = []
    device_kernels: list[str] = []
    device_time_ms: float | None = None
    python_op_counts: dict[str, int] = {}
    device_mem_peak: int = 0
    global_state: list[str] = []
    py_threads_added: int = 0
    native_threads_added: int = 0
    output_type_error: str | None = None
    input_mutation: str | None = None
    device_clocks: list[str] = []  # Triton kernels compiled so far that read a GPU clock


class LoadReply(_Reply):
    builds: list[dict[str, Any]] = []
    seconds: float = 0.0
    global_state: list[str] = []


class InitReply(_Reply):
    notes: list[str] = []
    device_mem_peak: int = 0


class TrialReply(_Reply):
    outputs: Any = None
    report: CallReport


class RoundReport(_Reply):
    report: CallReport


class TimeReply(_Reply):
    candidate_ms: list[float]
    reference_ms: list[float]
    audits: dict[int, RoundReport]
    checks: dict[int, RoundReport] = {}
    device_mem_peak: int = 0
    timer_overhead_ms: float | None = None
    no_launch_rounds: list[int] = []
    relaid_rounds: list[int] = []
    final_round: int | None = None
    patched_rounds: list[int] = []
    patched: list[str] = []
    device_clocks: list[str] = []


class OutputsReply(_Reply):
    outputs: Any = None


class ProbeReply(_Reply):
    probe: dict[str, Any]


R = TypeVar("R", bound=_Reply)


def parse(raw, record: type[R]) -> R | Fault:
    """The reply as `record` (or as a `Fault` when `ok` is false); `MalformedReply` when it fits neither."""
    if type(raw) is not dict or type(raw.get("ok")) is not bool:
        raise MalformedReply(f"expected a reply object with a boolean `ok`, got {type(raw).__name__}")
    try:
        return record.model_validate(raw) if raw["ok"] else Fault.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0] if e.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise MalformedReply(f"{record.__name__ if raw['ok'] else 'Fault'}: {where}: {first.get('msg', e)}") from None
