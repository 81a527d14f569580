"""The requests the trusted process sends a candidate worker, one frozen dataclass per operation.

A request crosses the pipe as a builtin dict (`to_wire`, then `musacoder.judge.protocol`): the worker's side reads
only builtin containers and tensors. `from_wire` turns such a dict back into its request in the worker, through the
op table `REQUESTS`; an unknown op or a missing field is a `ValueError` there (a verifier fault, never the
candidate's). The worker's replies are typed records too, validated where they arrive (`musacoder.judge.replies`):
a reply is data the candidate's process wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

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
    """One profiled correctness call on inputs made in the worker from `seed` and `perturb`."""

    op: ClassVar[str] = "trial"
    seed: int
    perturb: str | None
    profile: bool = True
    ipc: bool = False
    expect: Any = None  # the reference's output spec (`inputs.output_spec`)


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
    target_sem: float
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


@dataclass(frozen=True)
class TakeOutputsRequest(Request):
    """The outputs the worker kept from the given timed rounds (None: all it kept)."""

    op: ClassVar[str] = "take_outputs"
    ipc: bool = False
    rounds: list[int] | None = None


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
                            TimeRequest, TakeOutputsRequest, TimeReferenceRequest, CompileReferenceRequest,
                            TimeCompileRequest, ExitRequest)
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


__all__ = ["REQUESTS", "Request", "from_wire", *[c.__name__ for c in REQUESTS.values()]]
