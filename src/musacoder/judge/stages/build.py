"""Stage 2, in the candidate's worker: probe CUDA IPC (before any candidate code is there), then build and import the
candidate beside the task's source (`load`), its `load_inline` builds served by the build broker."""

from __future__ import annotations

from musacoder.judge import ipc
from musacoder.judge.baseline import load_request
from musacoder.judge.messages import Fault, IpcProbeRequest, LoadReply, MalformedReply, ProbeReply, exchange
from musacoder.judge.sandbox import Sandbox
from musacoder.judge.stages.context import RunContext, Stop
from musacoder.judge.stages.rpc import fault
from musacoder.records import Task


def build(ctx: RunContext) -> LoadReply:
    """Build and import the candidate in the context's worker; fills the verdict's build fields. On the CPU backend
    the host's cores are the device, so a build holds it shared: no other verification's timing runs beside a
    compiler (`build_wait` is the wait for that)."""
    v = ctx.verdict
    with ctx.stage("ipc_probe"):
        ctx.ipc = ctx.device.startswith("cuda") and ipc.available() and probe_ipc(ctx)
    with ctx.stage("build", "shared" if ctx.device == "cpu" else None):
        load = load_candidate(ctx, ctx.sandbox, ctx.task)
    v.build_s = load.seconds
    v.build_cached = bool(load.builds) and all(b.get("cached") is True for b in load.builds)
    v.compiled = True
    v.stages["build"] = "ok"
    return load


def load_candidate(ctx: RunContext, sb: Sandbox, task: Task) -> LoadReply:
    """Build and import the candidate in `sb` beside `task`'s source. An error while importing is the candidate's
    (stage `build` failed, `runtime_error`); a compile error is `compile_error`; other faults as `rpc.fault`."""
    v = ctx.verdict
    try:
        got = exchange(sb, load_request(ctx.code, ctx.backend, ctx.device, ctx.cfg, task), ctx.cfg.build_timeout_s,
                       LoadReply)
    except MalformedReply as e:
        v.stages["build"] = "error"
        v.error = f"the candidate's worker sent a malformed reply to `load` ({e})"
        raise Stop("crashed") from None
    if isinstance(got, Fault):
        v.build_s = sum(x for b in got.builds if isinstance(x := b.get("seconds"), (int, float)))
        if got.kind == "runtime_error" and got.where == "import":
            v.stages["build"], v.error = "failed", got.error
            raise Stop("runtime_error")
        fault(ctx, got, "build")
    return got


def probe_ipc(ctx: RunContext) -> bool:
    """Whether this worker's CUDA IPC exports read back here (asked before any candidate code is imported); when
    not, outputs travel through the pipe, flagged."""
    try:
        got = exchange(ctx.sandbox, IpcProbeRequest(device=ctx.device), ctx.cfg.timeout_s, ProbeReply)
        if isinstance(got, ProbeReply) and ipc.probe_check(got.probe, ctx.device):
            return True
        note = got.error[-200:] if isinstance(got, Fault) else "the pattern read back wrong"
    except (ipc.IpcError, MalformedReply) as e:
        note = str(e)
    except Exception as e:  # noqa: BLE001 - whatever this host's driver or torch does wrong, the pipe still works
        note = f"{type(e).__name__}: {e}"[:200]
    ctx.verdict.flags.append(f"outputs travel through the pipe: CUDA IPC probe failed ({note})")
    return False
