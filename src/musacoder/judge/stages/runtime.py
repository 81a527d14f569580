"""Stage 5, runtime legality: what the worker saw the candidate do, judged in the trusted process. Importing it must
not change global state; every profiled call must run the candidate's own kernels and no PyTorch compute, vendor
kernels (strict policy), clock reads, lingering threads or more device memory than the task's budget."""

from __future__ import annotations

from musacoder.judge.messages import CallReport
from musacoder.judge.slots import memory_budget, memory_violations
from musacoder.judge.stages.context import RunContext, Stop
from musacoder.legality.runtime import VENDOR_KERNEL, own_kernels, python_compute_violations


def check_import(ctx: RunContext) -> None:
    """`Stop("illegal")` when importing the candidate changed global state (the `load` reply says what)."""
    v = ctx.verdict
    if ctx.loaded is not None and ctx.loaded.global_state:
        v.stages["runtime_legality"] = "failed"
        v.violations = [f"importing the candidate changed global state: {c}" for c in ctx.loaded.global_state]
        raise Stop("illegal")


def check_trials(ctx: RunContext) -> None:
    """Judge the correctness trials' runtime evidence (`ctx.correctness`): `Stop("illegal")` with every violation
    seen, or when none of the candidate's kernels ran at all (a decoy kernel or a fallback)."""
    v, got = ctx.verdict, ctx.correctness
    illegal = got.illegal
    if got.launches == 0:
        illegal.append("none of the candidate's own kernels ran during forward (decoy kernel or fallback)")
    v.violations = list(dict.fromkeys(illegal))
    if illegal:
        v.stages["runtime_legality"] = "failed"
        v.legal = False
        raise Stop("illegal")
    v.legal = True
    v.stages["runtime_legality"] = "ok"


def call_violations(ctx: RunContext, rep: CallReport, where) -> list[str]:
    """The violations in the worker's report of one profiled call (`where`: the trial or round; native threads
    started in the first trial are the runtime's own pools)."""
    out = [f"illegal PyTorch op {op}" for op in rep.illegal_ops]
    out += memory_violations_of(ctx, rep.device_mem_peak)
    out += python_compute_violations(rep.python_op_counts)
    out += [f"forward changed global state: {c}" for c in rep.global_state]
    out += rep.device_clocks
    kernels = rep.device_kernels
    if ctx.device.startswith("cuda") and ctx.backend in ("cuda", "triton"):
        own = own_kernels(kernels, ctx.static.kernel_defs)
        if not own:
            out.append("none of the candidate's own GPU kernels (" + ", ".join(ctx.static.kernel_defs[:5]) +
                       ") appeared in the profiler's CUDA kernel list")
        if not ctx.cfg.allow_vendor_libs:
            vendor = sorted({k for k in kernels if VENDOR_KERNEL.search(k) and k not in own})
            if vendor:
                out.append("vendor library kernels ran (strict policy): " + ", ".join(x[:60] for x in vendor[:3]))
    if rep.py_threads_added > 0:
        out.append("forward left a Python thread running (background computation is not allowed)")
    if rep.native_threads_added > 0 and where != 0:
        out.append("forward started new native threads that outlived the call")
    return out


def memory_violations_of(ctx: RunContext, peak) -> list[str]:
    """The violation a worker's peak reserved device memory makes against the task's budget (`slots.memory_budget`)."""
    return memory_violations(peak, memory_budget(ctx.cfg.max_device_memory_gb, ctx.task_bytes))
