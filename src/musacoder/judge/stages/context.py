"""What the stages of one verification share: the `RunContext`, and the two exceptions that end a stage early.

Every stage is a function of the context. It returns what the next stages need (the orchestrator keeps it in the
context's field for it) or raises `Stop` with the verdict's status, once it has filled the verdict's fields. The
context holds no logic of its own beyond timing a stage into the verdict and the device questions every stage asks.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

from musacoder.config import VerifyConfig
from musacoder.judge.messages import LoadReply
from musacoder.judge.sandbox import Sandbox
from musacoder.judge.slots import DEVICE_SLOTS, DeviceLease, Footprint, is_large
from musacoder.judge.task_cache import TaskCache, TaskKey
from musacoder.legality.static import StaticReport
from musacoder.records import Task, TrialResult, Verdict


def task_with_overrides(task: Task, overrides: dict | None) -> Task:
    """`task` with its size overrides updated by `overrides` (checked against its source: an unknown name is a
    `ValueError`)."""
    if not overrides:
        return task
    from musacoder.tasks import apply_overrides

    merged = {**task.overrides, **overrides}
    apply_overrides(task.source, merged, task.path or task.name)
    return task.model_copy(update={"overrides": merged})


# seconds added to a call's limit per GiB of the task's weights, inputs and outputs (`RunContext.call_limit`)
LIMIT_S_PER_GIB = 5.0


class Stop(Exception):
    """A stage reached the verdict; its fields are filled, `status` is the verdict's status."""

    def __init__(self, status: str):
        super().__init__(status)
        self.status = status


class RetryAlone(Exception):
    """Redo the verification with the device to itself: the harness, or the candidate while it shared the device, ran
    out of device memory (the verifier's doing, not the candidate's)."""


@dataclass
class ReferenceWeights:
    """The reference model's weights as the correctness stage made them from the master seed; the baselines timed in
    reference-only workers are built with the same."""

    state: dict[str, torch.Tensor]
    init_inputs: list
    seed: int


@dataclass
class Correctness:
    """What the correctness stage hands on: the trusted reference model, the judged trials, the runtime violations
    seen, the candidate's kernel launches, and notes on how its state dict lined up with the reference's."""

    ref_model: Any
    trials: list[TrialResult]
    illegal: list[str] = field(default_factory=list)
    launches: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class TimedInputs:
    """The inputs of the candidate's last `time` request, which the clean reference is timed on again."""

    master_seed: int
    input_sets: int
    perturb: str | None


@dataclass
class RunContext:
    """One verification's state, passed to every stage. Fields after `verdict` are filled as the stages run."""

    task: Task
    text: str  # the candidate as given: a model's response or plain code
    requested_backend: str | None  # None: what the code shows
    cfg: VerifyConfig
    verdict: Verdict
    master_seed: int  # the secret the weights and the correctness trials' inputs derive from
    rng: random.Random  # the trial plan's order
    timing_rng: random.Random  # the timed rounds' inputs and audit choices: the verification's own secret
    cache: TaskCache | None = None  # the per-task cache this verification shares (`share_reference`)
    cache_key: TaskKey | None = None
    shared_asked: int = 0  # shared entries asked for so far
    # extract + static legality
    code: str = ""
    backend: str = "cpu"
    static: StaticReport | None = None
    device_pool: str = "cpu"  # the device asked for: one device, or a pool name such as `cuda`
    module: ModuleType | None = None  # the task's module: the trusted reference
    # the attempt on a device (set again by each attempt)
    device: str = "cpu"  # the concrete device the attempt is pinned to
    alone: bool = False  # the device to itself (the retry after running out of memory)
    fp: Footprint | None = None  # estimated device bytes of the task (None off a GPU or when not estimable)
    lease: DeviceLease | None = None
    sandbox: Sandbox | None = None  # the candidate's worker
    ipc: bool = False  # large outputs come over CUDA IPC (musacoder.judge.ipc) once the probe read back
    host_reserved: Any = None  # the output spec the worker page-locked kept outputs for while waiting for memory
    precision_models: tuple | None = None  # (float64 copy, rounded fp32 copy) of the reference
    # what the stages produced
    loaded: LoadReply | None = None
    weights: ReferenceWeights | None = None
    expect: Any = None  # the reference's output spec on the first trial; the timed rounds' outputs are held to it
    task_bytes: int = 0  # the task's own weights, inputs and outputs: sets the memory budget
    center_ok: bool | None = None  # the reference stayed finite on zero-mean inputs (a "center" trial)
    correctness: Correctness | None = None
    timed_with: TimedInputs | None = None
    clean_started: bool = False  # this verification timed the task's clean reference (after its timing, or at its end)
    # clean reference figures measured before (`timing._earlier_figure`), as first looked up by this verification
    earlier_figures: dict = field(default_factory=dict)
    ref_forward_s: float = 0.0  # the slowest reference forward measured for this task (sets the call limits)
    call_limit_s: float | None = None  # the limit of the last request sent (reported when it ran out)

    def call_limit(self, first: bool = False, extra_s: float = 0.0) -> float:
        """The time a candidate call may take (`VerifyConfig.call_limit_factor`): `factor` times the reference's own
        forward, at least `call_floor_s` (`first_call_s` for the first call, which may compile) plus
        `LIMIT_S_PER_GIB` per GiB of the task's own data (the harness makes, copies, checks and sends it around the
        call: at full size that is seconds the candidate must not be blamed for), never more than `timeout_s`;
        `extra_s` is added for requests that run many calls (timing)."""
        cfg = self.cfg
        floor = cfg.call_floor_s
        if first:
            floor = cfg.first_call_s or (60.0 if self.backend == "triton" else 20.0)
        floor += LIMIT_S_PER_GIB * self.task_bytes / (1 << 30)
        self.call_limit_s = min(cfg.timeout_s + extra_s, max(floor, cfg.call_limit_factor * self.ref_forward_s) + extra_s)
        return self.call_limit_s

    @classmethod
    def new(cls, task: Task, text: str, backend: str | None, cfg: VerifyConfig,
            cache: TaskCache | None = None) -> RunContext:
        master = cfg.seed if cfg.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
        own = cfg.seed if cfg.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
        return cls(task=task, text=text, requested_backend=backend, cfg=cfg,
                   verdict=Verdict(status="infra_error", task=task.key), master_seed=master,
                   rng=random.Random(master ^ 0xA5A5), timing_rng=random.Random(own ^ 0x5A5A),
                   cache=cache if cfg.share_reference and cfg.seed is None else None)

    def share_with_task(self) -> None:
        """Once the device pool is known: the master seed becomes the task's secret in the shared cache (the same for
        every candidate of the task until the cache rotates), so its reference work is computed once."""
        if self.cache is None:
            return
        self.master_seed = self.cache.master_seed(self.task_key())
        self.rng = random.Random(self.master_seed ^ 0xA5A5)

    def task_in_use(self):
        """A block during which the task's cache entries stay kept for its later candidates (`TaskCache.in_use`)."""
        if self.cache is None:
            return contextlib.nullcontext()
        return self.cache.in_use(self.task_key())

    def task_key(self) -> TaskKey:
        """Everything that can change the task's reference figures (`TaskKey`): its source with the sizes, the
        backend and device model, the torch and CUDA versions and the verification config (less the fields that only
        say where and how long). Computed once; the first call on a GPU starts this process's CUDA state."""
        if self.cache_key is not None:
            return self.cache_key
        from musacoder.judge.baseline import source_with_overrides

        cfg = self.cfg
        source = source_with_overrides(self.task)
        model = torch.cuda.get_device_name(0) if self.device_pool.startswith("cuda") and torch.cuda.is_available() \
            else self.device_pool
        runtime = f"torch {torch.__version__} cuda {torch.version.cuda}"
        policy = tuple(sorted(cfg.model_dump(mode="json", exclude={"cache_dir", "keep_workdir", "timeout_s",
                                                                   "build_timeout_s", "require_sandbox",
                                                                   "stored_reference_max_age_s",
                                                                   "clean_reference_reuse_s"}).items(),
                              key=lambda kv: kv[0]))
        self.cache_key = TaskKey.of(source, f"{self.backend}:{model}", runtime, tuple(map(str, policy)))
        return self.cache_key

    def cached(self, name, compute, size=lambda _v: 0, wait_stage: str | None = None):
        """`compute()`, or the task's shared value of it (`TaskCache.get`). The verdict is `reference_reused` when
        the first entry it asked for was another candidate's (computed, or being computed, for an earlier candidate
        of the task): one candidate per task and cache generation does the work, the others reuse it. `wait_stage`:
        where the entry was another candidate's, the seconds this call took (the wait for it) are timed under that
        name."""
        if self.cache is None or self.cache_key is None:
            return compute()
        t0 = time.monotonic()
        value, reused = self.cache.get(self.cache_key, name, compute, size)
        if reused and wait_stage:
            stage_s = self.verdict.stage_s
            stage_s[wait_stage] = round(stage_s.get(wait_stage, 0.0) + time.monotonic() - t0, 4)
        if self.shared_asked == 0:
            self.verdict.reference_reused = reused
        self.shared_asked += 1
        return value

    @property
    def large(self) -> bool:
        return is_large(self.fp)

    @property
    def flush_bytes(self) -> int:
        """The L2 flush before each timed call on this verification's device (`musacoder.judge.timing.l2_flush_bytes`):
        sized from the GPU's L2 cache, none where the task's inputs and outputs dwarf it."""
        from musacoder.judge.messages import L2_FLUSH_BYTES
        from musacoder.judge.timing import l2_flush_bytes

        l2 = None
        if self.device.startswith("cuda") and torch.cuda.is_available():
            l2 = getattr(torch.cuda.get_device_properties(torch.device(self.device)), "L2_cache_size", None)
        data = self.fp.inputs + self.fp.outputs if self.fp is not None else None
        return l2_flush_bytes(l2, data, L2_FLUSH_BYTES)

    @property
    def compare_device(self) -> str:
        """Outputs are compared on the verification's GPU when it has one (within its slot), else on the CPU."""
        return self.device if self.device.startswith("cuda") and torch.cuda.is_available() else "cpu"

    @contextlib.contextmanager
    def stage(self, name: str, slot: str | None = None):
        """Time a stage into `verdict.stage_s` (and the wait for its device slot into `<name>_wait`); with `slot`
        ("shared" or "exclusive") the stage holds the verification's device that way. Times add up over the
        verification; a dotted name (`correctness.calls`) times a part of a stage, inside that stage's own figure."""
        v, t0 = self.verdict, time.monotonic()
        hold = DEVICE_SLOTS.hold(self.device, exclusive=slot == "exclusive") if slot else contextlib.nullcontext()
        with hold:
            t1 = time.monotonic()
            if slot:
                v.stage_s[f"{name}_wait"] = round(v.stage_s.get(f"{name}_wait", 0.0) + t1 - t0, 4)
            try:
                yield
            finally:
                v.stage_s[name] = round(v.stage_s.get(name, 0.0) + time.monotonic() - t1, 4)
