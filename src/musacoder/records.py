"""Typed records exchanged between the stages of the data path.

task -> candidate -> build -> run/judge (MooreEval) -> verdict -> reward/feedback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, Field, model_validator

Backend = Literal["cpu", "triton", "cuda", "musa"]
BACKENDS: tuple[str, ...] = get_args(Backend)

Status = Literal[
    "ok",
    "extract_error",
    "illegal",
    "compile_error",
    "runtime_error",
    "incorrect",
    "timeout",
    "crashed",
    "infra_error",
]
STATUSES: tuple[str, ...] = get_args(Status)

# The stages of one verification, in the order they run.
STAGES: tuple[str, ...] = (
    "extract",
    "static_legality",
    "build",
    "binary_legality",
    "correctness",
    "runtime_legality",
    "timing",
    "reward",
)


class Task(BaseModel):
    """One problem in KernelBench format: `class Model`, `get_inputs()`, `get_init_inputs()`.

    `source` is the problem file's text; `overrides` are module-level size constants replaced before the
    module's inputs and modules are made (see `musacoder.tasks.apply_overrides`).
    """

    name: str  # problem file name without `.py`, e.g. "19_ReLU"
    level: int | None = None
    problem_id: int | None = None
    source: str
    path: str | None = None
    overrides: dict[str, int | float | bool | str] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"level{self.level}/{self.name}" if self.level is not None else self.name


class Candidate(BaseModel):
    """Code extracted from a raw model response (or given as plain code)."""

    code: str | None
    backend: Backend | None = None
    extract_error: str | None = None


class TrialResult(BaseModel):
    """Outcome of one correctness trial, compared in the trusted process."""

    trial: int
    passed: bool
    max_abs_error: float | None = None
    rel_l2_error: float | None = None
    precision_error: float | None = None  # error against the float64 reference, where the precision rule applied
    precision_bound: float | None = None  # the rule's bound τ for that trial (musacoder.judge.compare)
    message: str = ""
    # the trial's inputs: "task" (the task's own), "scale" (log-normally rescaled), "center" (zero-mean), "slice"
    # (zero-mean with one offset slice), "timed" (a timing round re-checked), "shape" (an extra size)
    kind: str | None = None
    # a failed trial built to expose a systematic defect names it here (reduced precision, skipped work, shapes
    # hard-coded): the verdict's q is then 0 (`musacoder.reward`, docs/reward.md)
    systematic: str | None = None


class Timing(BaseModel):
    """Timing summary of one side (candidate or a baseline), milliseconds per call."""

    median_ms: float
    mean_ms: float
    stdev_ms: float
    min_ms: float
    max_ms: float
    repeats: int


class Verdict(BaseModel):
    """MooreEval's verdict on one candidate for one task. The JSON contract of `musacoder verify --json`."""

    status: Status
    compiled: bool = False
    legal: bool = False
    correct: bool = False
    pass_fraction: float = 0.0
    # the defect a decisive trial exposed (reduced precision, skipped work, hard-coded shapes): no partial credit
    systematic_defect: str | None = None
    speedup: float | None = None  # against the configured baseline (eager by default)
    speedup_vs_eager: float | None = None
    # the 95 % interval of the speedup beside the candidate (the median paired log-ratio, `musacoder.judge.stopping`)
    speedup_interval: list[float] | None = None
    speedup_vs_compile: float | None = None
    runtime_ms: float | None = None
    ref_runtime_ms: float | None = None
    compile_runtime_ms: float | None = None
    reward: float | None = -1.0  # None for infra_error: a verifier fault is no verdict on the candidate
    violations: list[str] = Field(default_factory=list)
    feedback: str = ""
    # Diagnostics (not part of the minimal contract, but stable).
    task: str | None = None
    backend: str | None = None
    device: str | None = None  # where the candidate ran: "cpu" or the GPU it was pinned to ("cuda:N")
    stages: dict[str, str] = Field(default_factory=dict)
    trials: list[TrialResult] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)
    compile_log: str | None = None
    error: str | None = None
    candidate_timing: Timing | None = None
    reference_timing: Timing | None = None
    # the eager reference timed in the candidate's worker beside its rounds, and again in a fresh reference-only worker
    # (`VerifyConfig.clean_reference`); `ref_runtime_ms`/`reference_timing` are the lower of the two
    ref_runtime_ms_in_process: float | None = None
    ref_runtime_ms_clean: float | None = None
    wall_s: float | None = None
    candidate_device_ms: float | None = None  # GPU kernel time the profiler saw per audited call (timing cross-check)
    # the host round trip allowed between the candidate's calling-stream end and the whole device's end (CUDA; the
    # 75th percentile measured in the timing loop): device time beyond it is work left on other streams, and charged
    timer_overhead_ms: float | None = None
    device_mem_gb: float | None = None  # peak GPU memory the candidate's worker reserved (PyTorch allocator), GiB
    # peak GPU memory the trusted process reserved while the verification ran, GiB (process-wide: it is this
    # verification's own only when it ran alone, e.g. `verify-batch --workers 1`)
    trusted_mem_gb: float | None = None
    # isolation layers the candidate's worker ran in (musacoder.judge.isolation: net, ipc, pid, mount-ro, tmpfs, dev,
    # caps, seccomp, rlimits, pids-cgroup, memory-cgroup); empty when no worker started
    sandbox: list[str] = Field(default_factory=list)
    memory_estimate_gb: dict[str, float] | None = None  # the admission estimate per side ("worker", "trusted"), GiB
    build_s: float | None = None  # seconds spent importing the candidate (its builds, or cache hits)
    build_cached: bool | None = None  # every extension came from the build cache
    # Seconds per stage: admission_wait (waiting until the verification's memory estimate fits on its GPU), build,
    # correctness, timing, recheck, clean_reference_start and clean_reference (the eager reference in a reference-only
    # worker), compile_build and compile_baseline (torch.compile baseline), the waits for a device slot (`<stage>_wait`), the wait for a ready worker
    # (worker_start) and the worker's own account of its start (`worker.<part>`).
    stage_s: dict[str, float] = Field(default_factory=dict)
    # the task's reference work (reference outputs, the clean reference's timing) came from the per-task cache
    # (`musacoder.judge.task_cache`): an earlier candidate of the same task in this batch or service had started it
    reference_reused: bool = False


    @model_validator(mode="after")
    def _infra_error_has_no_reward(self):
        """However a verdict is made, an infra_error carries no reward."""
        if self.status == "infra_error" and self.reward is not None:
            self.reward = None
        return self


class VerifyRequest(BaseModel):
    """One line of a `verify-batch` manifest."""

    id: str
    task: str  # path to a problem file
    candidate: str  # path to a raw response or plain code
    backend: Backend | None = None
    set: dict[str, int | float | bool | str] = Field(default_factory=dict)


def as_path(p: str | Path) -> Path:
    return p if isinstance(p, Path) else Path(p)
