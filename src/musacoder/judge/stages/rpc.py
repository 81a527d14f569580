"""The trusted side's calls into the candidate's worker: start one, send a typed request, read its reply as the
record of that request, and say whose fault a failed reply is.

Whose fault an error is: only what the candidate's own code raised (`runtime_error`, `compile_error`) is charged to
it, and a reply that does not fit its record (candidate code runs in the worker and can write the pipe) is `crashed`.
The harness's own error is `infra_error`; the harness running out of device memory is `RetryAlone`, unless the
worker held far more than its estimated part (the candidate hoarding memory: `runtime_error`).
"""

from __future__ import annotations

import math

from musacoder.judge import ipc, isolation
from musacoder.judge.messages import (Fault, MalformedReply, OutputsReply, Request, ResendRequest, exchange)
from musacoder.judge.sandbox import Sandbox
from musacoder.judge.slots import GiB
from musacoder.judge.stages.context import RetryAlone, RunContext, Stop

# A worker that ran out of memory in harness code (the candidate's call had returned, its temporaries with it) while
# holding more than the harness's own part (`Footprint.harness`) plus one input set, one output and this much, with
# the device to itself, was hoarding memory of its own: the candidate's fault, not the verifier's. (Against the whole
# worker estimate, whose room for a call's temporaries is 4x the task's data, a 6 GB task's hoarder could never reach
# it on an 80 GB GPU.) While other verifications share the device their memory may be why it ran out, so there the
# bound is the whole estimate and anything less is retried alone, where the tighter bound applies. (2.75 GiB: the
# bound as it was when the harness's fixed part, `slots.WORKER_FIXED`, was 2 GiB rather than 1.25.)
HOARD_SLACK = int(2.75 * GiB)


def open_worker(ctx: RunContext, device: str, fresh: bool = False) -> Sandbox:
    """A candidate worker for `device` with the toolchain variables the backend needs (`fresh`: started for this
    verification, not taken from the prestarted ones)."""
    sb = _worker(ctx, device, use_prestarted=not fresh)
    reap_within(ctx, sb)
    return sb


def reference_worker(ctx: RunContext) -> Sandbox:
    """A reference-only worker (the clean reference, the compile baseline) made as this verification's candidate
    worker is: from the same fork server and, on a GPU, from the same workers started ahead, its CUDA context made
    while it waited. No candidate code ever runs in it, and it is timed in the conditions the candidate was. (Made
    otherwise, the first one of a process started a fork server of its own, which every candidate of the task waited
    for: docs/benchmarks.md.)"""
    return _worker(ctx, ctx.device, use_prestarted=True)


def worker_env(backend: str, device: str) -> dict[str, str]:
    """The extra environment of a `backend` worker on `device`: the toolchain variables the backend needs, and on a
    concrete GPU the device whose CUDA context a worker started ahead makes while it waits."""
    from musacoder.build.cache import toolchain_env

    env = toolchain_env(device) if backend == "cuda" or (backend == "musa" and device.startswith("cuda")) else {}
    if backend == "triton" and device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    if device.startswith("cuda") and ":" in device:
        env["MUSACODER_PREWARM_DEVICE"] = device
    return env


def start_servers_early(cfg, backends: set[str]) -> None:
    """Start, without waiting, the fork servers the workers of these backends will fork from (`sandbox.
    start_fork_server`), so that their imports (Python, torch, the harness) run while a batch's first verifications do
    their static checks, the trusted side's CUDA start and the footprints; the sandbox waits only for what is left.
    A server nobody asks for costs its start and is closed at exit; the verdicts are the same."""
    from musacoder.judge.sandbox import start_fork_server
    from musacoder.judge.stages.extract import device_pool

    for backend in sorted(backends):
        pool = device_pool(backend, cfg)
        device = f"{pool}:0" if pool == "cuda" else pool  # the server's part of the environment is the same per GPU
        try:
            start_fork_server(cfg.cache_dir, worker_env(backend, device), cfg.isolate_network)
        except OSError:  # the sandbox starts it (and reports a failure) when it asks for it
            pass


def _worker(ctx: RunContext, device: str, use_prestarted: bool) -> Sandbox:
    cfg = ctx.cfg
    return Sandbox(cfg.cache_dir, env=worker_env(ctx.backend, device), keep_workdir=cfg.keep_workdir,
                   memory_limit_gb=cfg.memory_limit_gb, isolate_network=cfg.isolate_network,
                   use_prestarted=use_prestarted)


def reap_within(ctx: RunContext, sb: Sandbox) -> None:
    """Once killed, `sb`'s worker is reaped in the background while the verification goes on; the attempt's lease
    holds its device memory until it is gone (`DeviceLease.end_after`)."""
    if ctx.lease is not None:
        sb.reap_later = True
        ctx.lease.end_after(sb.gone)


def check_worker(ctx: RunContext, sb: Sandbox) -> None:
    """Record the worker's start in the verdict (the wait for a ready worker and, for diagnosis, what the worker says
    its start cost, part by part) and its isolation layers; `Stop("infra_error")` when `cfg.require_sandbox` and a
    layer is missing on this host."""
    v = ctx.verdict
    v.stage_s["worker_start"] = round(sb.ready_wait_s, 4)
    v.sandbox = list(sb.layers)
    if ctx.cfg.require_sandbox and (lacking := isolation.missing(sb.layers)):
        v.error = f"the sandbox lacks {', '.join(lacking)} on this host; see `musacoder doctor`"
        raise Stop("infra_error")
    v.stage_s.update({f"worker.{k}": round(x, 4) for k, x in sb.start_report.items() if math.isfinite(x)})


def ask(ctx: RunContext, request: Request, timeout_s: float, record: type, stage: str, sb: Sandbox | None = None):
    """Send `request` to the worker (`sb`, else the context's) and return its reply as `record`; a `Fault` goes to
    `fault` (which raises), a reply that fits neither is the candidate's doing (`crashed`)."""
    try:
        got = exchange(sb or ctx.sandbox, request, timeout_s, record)
    except MalformedReply as e:
        ctx.verdict.stages[stage] = "error"
        ctx.verdict.error = f"the candidate's worker sent a malformed reply to `{request.op}` ({e})"
        raise Stop("crashed") from None
    if isinstance(got, Fault):
        fault(ctx, got, stage)
    return got


def fault(ctx: RunContext, got: Fault, stage: str) -> None:
    """A reply with `ok` false: the candidate's own error, or the harness's (module docstring). Always raises."""
    v = ctx.verdict
    v.stages[stage] = "error"
    v.error = got.error
    if got.kind == "runtime_error":
        if got.oom and ctx.device.startswith("cuda") and not ctx.alone:
            raise RetryAlone("the candidate ran out of device memory while other verifications shared the device")
        raise Stop("runtime_error")
    if got.kind == "compile_error":
        v.stages[stage] = "failed"
        v.compile_log = got.log
        raise Stop("compile_error")
    if got.oom:
        held, fp = got.mem_allocated, ctx.fp
        own = (fp.harness if ctx.alone else fp.worker) if fp is not None else None
        if own is not None and held > own + fp.inputs + fp.outputs + HOARD_SLACK:
            v.error = (f"the candidate's worker held {held / GiB:.1f} GiB of device memory when the verifier needed "
                       f"more in it (the verifier's own part is ~{own / GiB:.1f} GiB): forward must not keep "
                       f"large allocations alive\n{got.error[-1500:]}")
            raise Stop("runtime_error")
        raise RetryAlone(f"the verifier ran out of device memory in the worker ({got.where}; "
                         f"{held / GiB:.1f} GiB held there, {got.mem_free / GiB:.1f} GiB free)")
    raise Stop("infra_error")


def received(ctx: RunContext, outputs, sb: Sandbox | None = None):
    """The outputs of the last reply, with CUDA IPC exports replaced by copies in this process. An export that
    cannot be read is asked for again through the pipe (and IPC is off for the rest of the verification)."""
    if not ctx.ipc:
        return outputs
    try:
        return ipc.import_outputs(outputs, ctx.device)
    except ipc.IpcError as e:
        ctx.ipc = False
        ctx.verdict.flags.append(
            f"an output export could not be read ({str(e)[:160]}); outputs resent through the pipe")
        return ask(ctx, ResendRequest(), ctx.cfg.timeout_s, OutputsReply, "correctness", sb).outputs
