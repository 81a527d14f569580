"""MooreEval's orchestrator: one verification, its stages in order (`musacoder.judge.stages`).

    extract + static legality    stages/extract.py      trusted process, no worker
    -- in the candidate's worker (a Sandbox) --
    build                        stages/build.py        the worker imports the candidate, the broker builds it
    binary legality              stages/binary.py       the built libraries, read here
    runtime legality (import)    stages/runtime.py
    admission                    judge/slots.py         the attempt's device memory reserved
    correctness                  stages/correctness.py  trials in the worker, references and comparison here
    runtime legality (trials)    stages/runtime.py
    extra shapes                 stages/correctness.py  a fresh worker per shape
    timing + re-check            stages/timing.py
    -- after the candidate's worker is gone --
    clean reference              stages/timing.py       a reference-only worker
    reward + feedback            stages/reward.py       whatever stopped the stages

Each stage fills the verdict and returns what the next needs, or raises `Stop` with the verdict's status. The
candidate runs only in its worker, which never sees a reference output (`stages/rpc.py` says whose fault a failed
reply is). A fault of the verifier (its own out-of-memory, a worker that could not start, anything unexpected on the
trusted side) is `infra_error`, which carries no reward. A verification whose harness ran out of device memory, or
whose candidate did while sharing the device, is redone once with the device to itself (`RetryAlone`); a worker that
failed to start is started once more, for this verification alone.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import torch

from musacoder.config import UnusableArgument, VerifyConfig
from musacoder.judge import isolation, slots
from musacoder.judge.baseline import source_with_overrides
from musacoder.judge.sandbox import WorkerDied, WorkerStartFailed, WorkerTimeout
from musacoder.judge.stages import rpc
from musacoder.judge.stages.binary import check_binaries
from musacoder.judge.stages.build import build
from musacoder.judge.stages.context import RetryAlone, RunContext, Stop, task_with_overrides
from musacoder.judge.stages.correctness import extra_shapes, require_correct, run_trials
from musacoder.judge.stages.extract import extract_and_check
from musacoder.judge.stages.reward import finish
from musacoder.judge.stages.runtime import check_import, check_trials
from musacoder.judge.stages.timing import clean_reference, host_reserved_ahead, time_candidate
from musacoder.judge.task_cache import TaskCache, shared_cache
from musacoder.records import Task, Verdict
from musacoder.tasks import load_module, load_task


def run(ctx: RunContext) -> Verdict:
    """The stages of one verification, with the retries the verifier owes the candidate (module docstring)."""
    try:
        with ctx.stage("static"):
            ctx.static = extract_and_check(ctx)
    except Stop as stop:
        return finish(ctx, stop.status)
    with ctx.stage("task_key"):  # the first verification of a process starts its CUDA state here
        ctx.share_with_task()
    with ctx.task_in_use():  # the task's kept reference cases stay kept while it is verified
        return _stages(ctx)


def _stages(ctx: RunContext) -> Verdict:
    """The stages from the reference's load on, with the retries (`run`)."""
    v = ctx.verdict
    with ctx.stage("reference_load"):
        ctx.module = load_module(ctx.task)  # the trusted reference
    snapshot, start_failures = v.model_copy(deep=True), 0
    while True:
        try:
            _attempt(ctx, fresh=start_failures > 0)
            return finish(ctx, "ok")
        except Stop as stop:
            return finish(ctx, stop.status)
        except WorkerStartFailed as e:  # no candidate code had reached the worker: not the candidate's doing
            start_failures += 1
            _restore(v, snapshot, keep=("flags",))
            v.flags.append(f"a worker failed to start ({str(e).splitlines()[0][:200]})")
            if start_failures > 1:
                v.error = f"{e}\n{e.log_tail[-1500:]}"
                return finish(ctx, "infra_error")
        except RetryAlone as e:
            if ctx.alone:
                advice = slots.memory_advice(ctx.fp, slots.DEVICE_SLOTS.capacity(ctx.device), ctx.device)
                v.error = f"{e} (with the device to itself). {advice}"
                return finish(ctx, "infra_error")
            _restore(v, snapshot, keep=("flags", "stage_s"))
            v.flags.append(f"re-run with the device to itself: {e}")
            ctx.alone = True


def _attempt(ctx: RunContext, fresh: bool) -> None:
    """One attempt on a device: pinned, a worker started, the candidate's stages run in it; the clean reference after
    the worker is gone, within the attempt's reservation, which ends only after that."""
    v, cuda = ctx.verdict, ctx.device_pool.startswith("cuda")
    ctx.sandbox = None  # this attempt's worker, once started
    ctx.host_reserved = None  # what it page-locked while waiting for memory (`timing.host_reserved_ahead`)
    with ctx.stage("footprint"):
        # once per task in this process (`slots.FOOTPRINTS`): on meta tensors a recurrent task's takes tens of seconds
        ctx.fp = slots.FOOTPRINTS.get(source_with_overrides(ctx.task), ctx.module, ctx.cfg.input_sets) \
            if cuda else None
    if ctx.fp:
        v.memory_estimate_gb = {"worker": round(ctx.fp.worker / slots.GiB, 3),
                                "trusted": round(ctx.fp.trusted / slots.GiB, 3)}
    t0 = time.monotonic()
    with slots.lease(ctx.device_pool, slots.trusted_need(ctx.fp, cuda), alone=ctx.alone) as ctx.lease:
        _add_wait(v, time.monotonic() - t0)
        ctx.device = v.device = ctx.lease.device
        try:
            with own_stream(ctx.device), rpc.open_worker(ctx, ctx.device, fresh=fresh) as ctx.sandbox, \
                    _worker_failures(ctx):
                ctx.loaded = build(ctx)
                with ctx.stage("binary_legality"):
                    check_binaries(ctx, ctx.loaded.builds, ctx.sandbox)
                with ctx.stage("load"):
                    check_import(ctx)
                _admit(ctx)
                ctx.correctness = run_trials(ctx)
                check_trials(ctx)
                require_correct(ctx)
                extra_shapes(ctx)
                time_candidate(ctx)
                _learn_worker_peak(ctx)
            clean_reference(ctx)  # runs in a reference-only worker: no device work in this process
        except (torch.OutOfMemoryError, RuntimeError) as e:
            if not slots.is_oom(e):
                raise
            raise RetryAlone(f"the verifier ran out of device memory on the trusted side "
                             f"({str(e).splitlines()[0][:700]})") from None
        finally:
            ctx.precision_models = None
            if ctx.sandbox is not None:  # the worker's kill and teardown, where no stage had timed them
                v.stage_s["worker_stop"] = round(v.stage_s.get("worker_stop", 0.0) + ctx.sandbox.stop_s, 4)
            with ctx.stage("release"):
                if (peak := slots.release_trusted(ctx.device, ctx.large)) is not None:
                    v.trusted_mem_gb = peak


@contextlib.contextmanager
def own_stream(device: str):
    """The verification's device work on a CUDA stream of its own (torch's current stream is per thread). The
    verifications of a batch run in threads of one process; on the default stream each one's synchronising reads
    (a comparison's counts, an output's copy) waited for the work every other one had queued."""
    if not (device.startswith("cuda") and torch.cuda.is_available()):
        yield
        return
    with torch.cuda.stream(torch.cuda.Stream(device=torch.device(device))):
        yield


@contextlib.contextmanager
def _worker_failures(ctx: RunContext):
    """The started worker's start recorded (`rpc.check_worker`); a worker that stopped answering is `timeout`, one
    that died `crashed`, unless its memory cap was too small for the task's own data (the verifier's: `infra_error`)."""
    v, cfg = ctx.verdict, ctx.cfg
    rpc.check_worker(ctx, ctx.sandbox)
    try:
        yield
    except WorkerTimeout as e:
        run = ctx.call_limit_s if ctx.call_limit_s is not None else cfg.timeout_s
        v.error = (f"{e} (limit: build {cfg.build_timeout_s:.0f} s; this request {run:.0f} s: a call may take "
                   f"{cfg.call_limit_factor:g}x the reference's own, with a floor for the first call and for the "
                   f"task's data size, at most timeout_s {cfg.timeout_s:.0f} s)")
        raise Stop("timeout") from None
    except WorkerDied as e:
        v.error = f"worker died (exit {e.returncode}); last output:\n{e.log_tail[-1500:]}"
        fp = ctx.fp or slots.FOOTPRINTS.get(source_with_overrides(ctx.task), ctx.module, cfg.input_sets)
        if e.oom_killed and slots.worker_cap_too_small(fp, isolation.worker_memory_mb()):
            v.error += ("\nThis task's own data alone needs about half that cap or more: raise "
                        "MUSACODER_WORKER_MEMORY_MB (not the candidate's doing).")
            raise Stop("infra_error") from None
        raise Stop("crashed") from None


def _admit(ctx: RunContext) -> None:
    """Before anything of the candidate runs on the device: a GPU must be visible, and the attempt's memory is
    reserved (`slots.DeviceLease.admit`, its wait added to `admission_wait`)."""
    if ctx.device.startswith("cuda") and not torch.cuda.is_available():
        ctx.verdict.error = "compiled; running needs a CUDA GPU and none is visible on this machine"
        ctx.verdict.legal = True
        raise Stop("infra_error")
    key, static = ctx.task_key(), ctx.lease.need
    cuda = ctx.device_pool.startswith("cuda")

    def need() -> int:  # asked again while it waits: a candidate of the task that ends meanwhile may teach its peak
        return slots.trusted_need(ctx.fp, cuda, slots.WORKER_PEAKS.get(key))

    with host_reserved_ahead(ctx) as while_waiting:
        _add_wait(ctx.verdict, ctx.lease.admit(need, while_waiting))
    if ctx.fp is not None and ctx.lease.need < static:  # the worker's side as reserved, learned
        ctx.verdict.memory_estimate_gb = {**(ctx.verdict.memory_estimate_gb or {}),
                                          "worker": round((ctx.lease.need - ctx.fp.trusted) / slots.GiB, 3)}


def _learn_worker_peak(ctx: RunContext) -> None:
    """The worker's allocator peak over this verification, for the task's later candidates' reservations
    (`slots.WORKER_PEAKS`)."""
    if ctx.fp is not None and ctx.verdict.device_mem_gb:
        slots.WORKER_PEAKS.record(ctx.task_key(), int(ctx.verdict.device_mem_gb * slots.GiB))


def _add_wait(v: Verdict, seconds: float) -> None:
    v.stage_s["admission_wait"] = round(v.stage_s.get("admission_wait", 0.0) + seconds, 4)


def _restore(v: Verdict, snapshot: Verdict, keep: tuple[str, ...] = ()) -> None:
    """Reset the verdict to `snapshot` (a fresh copy of it each time), except the fields in `keep`; in place, since
    the context holds the verdict."""
    fresh = snapshot.model_copy(deep=True)
    for name in Verdict.model_fields:
        if name not in keep:
            setattr(v, name, getattr(fresh, name))


_FP32_LOCK = threading.Lock()
_fp32_users = 0
_fp32_saved: tuple[bool, bool] | None = None


@contextlib.contextmanager
def exact_fp32():
    """References in this process are computed in true fp32 while any verification runs: TF32 off for cuBLAS and
    cuDNN (PyTorch enables it for cuDNN convolutions by default, and a TF32 reference would make an honest fp32
    kernel look wrong and a TF32 one look right). The previous settings come back when the last one ends. The
    candidate's worker times the eager reference with PyTorch's defaults, as its users run it."""
    global _fp32_users, _fp32_saved
    with _FP32_LOCK:
        if _fp32_users == 0:
            _fp32_saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        _fp32_users += 1
    try:
        yield
    finally:
        with _FP32_LOCK:
            _fp32_users -= 1
            if _fp32_users == 0 and _fp32_saved is not None:
                torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = _fp32_saved


def verify(task: Task | str | Path, candidate: str | Path, backend: str | None = None, overrides: dict | None = None,
           config: VerifyConfig | None = None, cache: TaskCache | None = None) -> Verdict:
    """Run MooreEval on one candidate (raw model response or plain code, or a Path to a file holding it).

    `backend` defaults to what the candidate's code shows (`cpu` when it shows nothing). `cache`: the per-task cache
    shared with the other candidates of the batch (`musacoder.judge.task_cache`); None uses the process's own, which
    rotates on a timer (`VerifyConfig.share_reference` off: none). Always returns a Verdict; raises only for unusable
    arguments, before anything runs (missing or unreadable task or candidate file, unknown override) or as
    `UnusableArgument` from a stage (unknown backend, a backend whose runtime is missing, a compile baseline on
    MUSA). Any other exception inside the stages, a `ValueError` of the verifier's own code included, is the
    verifier's fault: an `infra_error` verdict.
    """
    cfg = config or VerifyConfig()
    t = task_with_overrides(task, overrides) if isinstance(task, Task) else load_task(task, overrides)
    text = candidate.read_text() if isinstance(candidate, Path) else candidate
    t0 = time.monotonic()
    ctx = RunContext.new(t, text, backend, cfg, cache if cache is not None else shared_cache())
    try:
        with exact_fp32():
            verdict = run(ctx)
    except UnusableArgument:
        raise
    except Exception as e:  # noqa: BLE001 - anything unexpected on the trusted side is an infrastructure error
        ctx.verdict.error = f"{type(e).__name__}: {e}"
        verdict = finish(ctx, "infra_error")
    verdict.wall_s = time.monotonic() - t0
    return verdict
