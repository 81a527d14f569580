"""The worker's RPC loop: one request at a time from the trusted side, parsed into its record
(`musacoder.judge.messages.from_wire`) and served by its handler from the op table `HANDLERS`.

Every reply carries the request's reply key (`protocol.REPLY_KEY`), which candidate code cannot know. What a handler
raises is the harness's fault (`infra_error`); handlers turn what the candidate's own code raised into
`runtime_error` or `compile_error` themselves (`musacoder.judge.worker.errors`).
"""

from __future__ import annotations

import os
import time

from musacoder.judge import messages
from musacoder.judge.worker import calls, load, setup, timing_ops
from musacoder.judge.worker.core import Worker
from musacoder.judge.worker.errors import harness_error, trim_tb

HANDLERS = {
    "load": load.handle_load,
    "build": load.handle_build,
    "init": calls.handle_init,
    "trial": calls.handle_trial,
    "resend": calls.handle_resend,
    "ipc_probe": calls.handle_ipc_probe,
    "time": timing_ops.handle_time,
    "reserve_host": timing_ops.handle_reserve_host,
    "take_outputs": timing_ops.handle_take_outputs,
    "time_reference": timing_ops.handle_time_reference,
    "compile_reference": timing_ops.handle_compile_reference,
    "time_compile": timing_ops.handle_time_compile,
}


def main(fd_in: int | None = None, fd_out: int | None = None) -> None:
    """Serve one candidate over the protocol pipes (from argv, or given by the fork server's child)."""
    import sys

    t0 = time.perf_counter()
    from musacoder.judge import isolation

    isolation.enter_worker()  # namespaces, read-only files, seccomp, limits: before any candidate code exists
    setup.drop_writable_import_paths()
    if fd_in is None or fd_out is None:
        fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
    os.dup2(2, 1)  # candidate prints go to the log, never into the protocol
    setup.limit_resources()
    from musacoder.judge import protocol

    try:
        worker = start(fd_in, fd_out, t0)
    except BaseException as e:  # noqa: BLE001 - e.g. no device memory left for a CUDA context
        protocol.send(fd_out, {"ok": False, "ready": False, "kind": "infra_error", "error": trim_tb(e), "where": "start"})
        return
    protocol.send(fd_out, {"ok": True, "ready": True, "start_s": worker.start_s})
    serve(worker, fd_in, fd_out)


def start(fd_in: int, fd_out: int, t0: float) -> Worker:
    """The worker, set up before any candidate code: the harness's imports (`setup.prepare`), the timers captured,
    the thread pool started and, for a worker started ahead for a known GPU, its CUDA context."""
    setup.prepare()
    from musacoder.judge import timing

    worker = Worker()
    worker.channel = (fd_in, fd_out)
    timing.capture(worker.torch)  # timers as they are before any candidate code runs
    worker.torch.ones(1 << 16).sum()  # start the intra-op thread pool before any candidate code runs
    worker.start_s["python_torch"] = time.perf_counter() - t0
    prewarm = os.environ.get("MUSACODER_PREWARM_DEVICE")
    if prewarm:  # a worker started ahead for a known GPU: make its CUDA context while it waits for work
        worker.device = prewarm
        worker.warm_device()
        worker.device = "cpu"
    return worker


def serve(worker: Worker, fd_in: int, fd_out: int) -> None:
    """Answer requests until `exit` or the trusted side closes the pipe."""
    from musacoder.judge import protocol

    while True:
        try:
            wire = protocol.recv(fd_in)
        except protocol.ChannelClosed:
            return
        worker.reply_key = wire.pop(protocol.REPLY_KEY, None) if type(wire) is dict else None  # echoed in every
        # message of this request
        _release_exports(worker)
        op = wire.get("op") if type(wire) is dict else None
        if op == "exit":
            protocol.send(fd_out, {"ok": True, protocol.REPLY_KEY: worker.reply_key})
            return
        try:
            reply = handle(worker, wire)
        except BaseException as e:  # noqa: BLE001 - harness code: a verifier fault, never the candidate's
            reply = harness_error(e, str(op), worker.memory_facts())
        try:
            worker.give_back()
        except BaseException:  # noqa: BLE001 - a device the candidate broke: the reply says what happened
            pass
        protocol.send(fd_out, {**reply, protocol.REPLY_KEY: worker.reply_key})


def handle(worker: Worker, wire: dict) -> dict:
    """One request, parsed into its record, served by its handler (`ValueError` for a request that fits none)."""
    req = messages.from_wire(wire)
    handler = HANDLERS.get(req.op)
    if handler is None:
        raise ValueError(f"the worker serves no {req.op!r} request")
    return handler(worker, req)


def _release_exports(worker: Worker) -> None:
    """The trusted side copied the last CUDA IPC exports before it sent this request: let them go."""
    if not worker.exports:
        return
    from musacoder.judge import ipc as cuda_ipc

    try:
        cuda_ipc.release(worker.exports)
        worker.give_back()  # the released exports' memory; the rest went back after the last request
    except BaseException:  # noqa: BLE001 - a device the candidate broke: the next request reports it
        worker.exports.clear()
