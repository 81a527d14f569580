"""The records that cross the worker pipe: one frozen dataclass per request, one pydantic record per reply.

A request crosses the pipe as a builtin dict (`to_wire`, then `musacoder.judge.protocol`): the worker's side reads
only builtin containers and tensors. `from_wire` turns such a dict back into its request in the worker, through the
op table `REQUESTS`; an unknown op or a missing field is a `ValueError` there (a verifier fault, never the
candidate's).

A reply comes back as builtin containers too, but candidate code runs in the worker and can change what it sends, so
the trusted side never reads a reply with `.get` and a default: each request has one reply record here, validated on
arrival (`parse`). A reply that does not fit its record is the candidate's doing (`MalformedReply`; the verdict is
`crashed`), never a verifier fault and never a crash of the trusted process. A reply with `ok` false is a `Fault`:
what the candidate's own code raised (`runtime_error`, `compile_error`) or the harness's error (`infra_error`, with
the worker's device memory at that moment).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

# the L2 flush a timing request asks for when it names none (the worker sizes it no larger than this)
L2_FLUSH_BYTES = 256 << 20


@dataclass(frozen=True)
class Request:
    op: ClassVar[str] = ""

    def to_wire(self) -> dict[str, Any]:
        """The request as the builtin dict that crosses the pipe (`op` plus one key per field; values as they are)."""
        return {"op": self.op, **{f.name: getattr(self, f.name) for f in fields(self)}}


@dataclass(frozen=True)
class LoadRequest(Request):
    """Import the candidate's code (None: a reference-only worker) beside the task's source, its builds hooked."""

    op: ClassVar[str] = "load"
    code: str | None
    backend: str
    device: str
    cache_dir: str
    task_source: str | None = None


@dataclass(frozen=True)
class BuildRequest(Request):
    """Build one extension (`load_inline` keyword arguments) into the cache under `key` (a builder worker)."""

    op: ClassVar[str] = "build"
    key: str
    kwargs: dict
    backend: str


@dataclass(frozen=True)
class InitRequest(Request):
    """Make the candidate's `ModelNew` (and, where asked, the reference) with the verification's weights."""

    op: ClassVar[str] = "init"
    init_inputs: list
    state_dict: dict
    seed: int
    device: str | None = None
    release_memory: bool = False
    build_reference: bool = True


@dataclass(frozen=True)
class TrialRequest(Request):
    """One profiled correctness call on inputs made in the worker from `seed` and `perturb`. `dispatcher_check`: the
    global-state check after the call also digests PyTorch's dispatcher (every operator's kernels: the costly part,
    asked for after a worker's first and last trials, so a registration that outlives a call is seen)."""

    op: ClassVar[str] = "trial"
    seed: int
    perturb: str | None
    profile: bool = True
    ipc: bool = False
    expect: Any = None  # the reference's output spec (`inputs.output_spec`)
    dispatcher_check: bool = True


@dataclass(frozen=True)
class ResendRequest(Request):
    """The last trial's outputs again, through the pipe (a CUDA IPC export that could not be read)."""

    op: ClassVar[str] = "resend"


@dataclass(frozen=True)
class IpcProbeRequest(Request):
    """Export a known pattern over CUDA IPC, before any candidate code is imported."""

    op: ClassVar[str] = "ipc_probe"
    device: str


@dataclass(frozen=True)
class TimeRequest(Request):
    """Interleaved timed rounds of the candidate and the eager reference, with secretly chosen audited rounds."""

    op: ClassVar[str] = "time"
    master_seed: int
    input_sets: int
    perturb: str | None
    warmup: int
    repeats: int
    max_repeats: int
    budget_s: float
    ratio_precision: float
    audit_rounds: list[int]
    check_keep: int = 0
    check_key: int = 0
    late_audit_from: int = 0
    late_audit_p: float = 0.0
    late_audit_max: int = 0
    late_audit_key: int = 0
    host_hold_bytes: int = 1 << 30
    expect: Any = None
    l2_flush_bytes: int = L2_FLUSH_BYTES
    cap_repeats: int = 100


@dataclass(frozen=True)
class ReserveHostRequest(Request):
    """Page-lock host memory for `copies` kept outputs like `expect` (an `output_spec`) before the exclusive timing
    window, where the kept outputs of `host_hold_bytes` or more then take it (`inputs.reserve_host`) rather than
    page-lock fresh memory while the device is held alone."""

    op: ClassVar[str] = "reserve_host"
    expect: Any
    copies: int


@dataclass(frozen=True)
class TakeOutputsRequest(Request):
    """The outputs the worker kept from the given timed rounds (None: all it kept); with `state_check`, also what
    changed in the process's global state since before candidate code (`HarnessGuard.changes`), read once after the
    timing rather than after each audited round inside it."""

    op: ClassVar[str] = "take_outputs"
    ipc: bool = False
    rounds: list[int] | None = None
    state_check: bool = False


@dataclass(frozen=True)
class TimeReferenceRequest(Request):
    """The eager reference alone, timed on the same rotating inputs as a `TimeRequest` (a reference-only worker)."""

    op: ClassVar[str] = "time_reference"
    master_seed: int
    input_sets: int
    warmup: int
    repeats: int
    perturb: str | None = None
    l2_flush_bytes: int = L2_FLUSH_BYTES


@dataclass(frozen=True)
class CompileReferenceRequest(Request):
    """`torch.compile` the reference and make its timing inputs (a reference-only worker)."""

    op: ClassVar[str] = "compile_reference"
    master_seed: int
    input_sets: int
    mode: str | None = None
    perturb: str | None = None


@dataclass(frozen=True)
class TimeCompileRequest(Request):
    """Time the compiled reference that `CompileReferenceRequest` made."""

    op: ClassVar[str] = "time_compile"
    warmup: int
    repeats: int
    l2_flush_bytes: int = L2_FLUSH_BYTES


@dataclass(frozen=True)
class ExitRequest(Request):
    op: ClassVar[str] = "exit"


REQUESTS: dict[str, type[Request]] = {
    cls.op: cls for cls in (LoadRequest, BuildRequest, InitRequest, TrialRequest, ResendRequest, IpcProbeRequest,
                            TimeRequest, ReserveHostRequest, TakeOutputsRequest, TimeReferenceRequest,
                            CompileReferenceRequest, TimeCompileRequest, ExitRequest)
}


def from_wire(msg: dict) -> Request:
    """The request a wire dict stands for; `ValueError` for an unknown op or fields that do not fit its record."""
    if type(msg) is not dict or msg.get("op") not in REQUESTS:
        raise ValueError(f"unknown request {msg.get('op') if type(msg) is dict else type(msg).__name__!r}")
    cls = REQUESTS[msg["op"]]
    names = {f.name for f in fields(cls)}
    extra = set(msg) - names - {"op"}
    if extra:
        raise ValueError(f"`{cls.op}` request with unknown fields: {', '.join(sorted(extra))}")
    try:
        return cls(**{k: v for k, v in msg.items() if k != "op"})
    except TypeError as e:
        raise ValueError(f"`{cls.op}` request: {e}") from None


# -- replies -----------------------------------------------------------------------------------------------------------

class Reply(BaseModel):
    """A worker's reply (`ok` true), as the trusted side reads it; fields the record does not name are ignored."""

    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True, frozen=True)


class MalformedReply(ValueError):
    """A worker reply that does not fit the record of its request."""


class Fault(Reply):
    """`ok` false: who raised what, where."""

    kind: Literal["runtime_error", "compile_error", "infra_error"]
    error: str = ""
    where: str = ""
    log: str = ""  # the compiler's log (compile_error)
    builds: list[dict[str, Any]] = []
    oom: bool = False  # the error was running out of device memory
    mem_allocated: int = 0  # bytes the worker's allocator held when a harness fault happened
    mem_free: int = 0  # bytes free on its device then


class CallReport(Reply):
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
    # the worker's own seconds for the parts of a trial (`HARNESS_PARTS`): diagnostics for `stage_s`, never judged
    harness_s: dict[str, float] = {}


# the parts of a trial the worker times itself (`CallReport.harness_s`, kept in `Verdict.stage_s` as `trial.<part>`):
# making the inputs, poisoning the allocator, the profiled call, reading the profiler's events, the global-state check
# (`HarnessGuard.changes`), the input-mutation check, the outputs' reply
HARNESS_PARTS = ("inputs", "poison", "call", "events", "guard", "mutation_check", "reply")
# the parts of a `time` request's wall, its exclusive window, that `TimeReply.parts_s` reports: refilling the round's
# inputs, the candidate's timed calls with their checks, keeping a checked round's output, the reference's timed
# calls, the audited rounds under the profiler, and the stopping rule's arithmetic
WINDOW_PARTS = ("inputs", "candidate", "keep", "reference", "audit", "rule")


class LoadReply(Reply):
    builds: list[dict[str, Any]] = []
    seconds: float = 0.0
    global_state: list[str] = []


class InitReply(Reply):
    notes: list[str] = []
    device_mem_peak: int = 0


class TrialReply(Reply):
    outputs: Any = None
    report: CallReport


class RoundReport(Reply):
    report: CallReport


class TimeReply(Reply):
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
    parts_s: dict[str, float] = {}  # the window's wall by part (`WINDOW_PARTS`): a diagnostic, never judged


class OutputsReply(Reply):
    outputs: Any = None
    global_state: list[str] = []


class ProbeReply(Reply):
    probe: dict[str, Any]


class ReferenceTimesReply(Reply):
    """`time_reference`: ms per call of the eager reference, one per timed round."""

    reference_ms: list[float]


class CompileTimesReply(Reply):
    """`time_compile`: ms per call of the compiled reference, one per timed round."""

    compile_ms: list[float]


class Ack(Reply):
    """A reply that carries nothing but `ok` (`compile_reference`)."""


class ReservedReply(Reply):
    """`reserve_host`: the bytes page-locked."""
    reserved_bytes: int = 0


R = TypeVar("R", bound=Reply)


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


def exchange(sandbox, request: Request, timeout_s: float, record: type[R]) -> R | Fault:
    """Send `request` to a worker (`sandbox`: anything with `request(request, timeout_s)`, a `Sandbox` or a fake) and
    read its reply as `record` (`parse`). Worker-level failures (timeout, death) propagate as the sandbox raises them."""
    return parse(sandbox.request(request, timeout_s), record)


__all__ = ["REQUESTS", "Request", "from_wire", *[c.__name__ for c in REQUESTS.values()], "Reply", "MalformedReply",
           "Fault", "CallReport", "LoadReply", "InitReply", "TrialReply", "RoundReport", "TimeReply", "OutputsReply",
           "ProbeReply", "ReferenceTimesReply", "CompileTimesReply", "Ack", "ReservedReply", "parse", "exchange"]
