"""The worker's first request, `load`: hooks installed, the task's source and the candidate's code imported; and
`build`, the one request of a builder worker (a fresh worker that never sees candidate Python).

The candidate's `cpp_extension.load_inline` and `cpp_extension.load` build through the cache (`musacoder.build.cache`),
under the build broker by asking the trusted side mid-request (`request_build`), so every library it imports is one
the binary rule reads. The harness guard's snapshot is taken right before the candidate's code runs.
"""

from __future__ import annotations

import os
import sys
import time
import types
from pathlib import Path

from musacoder.judge import messages
from musacoder.judge.worker import triton_hook
from musacoder.judge.worker.errors import trim_tb
from musacoder.judge.worker.guard import native_threads, seal_array_exits


def handle_load(worker, req: messages.LoadRequest) -> dict:
    """Install hooks and import the candidate (its builds go through the cache)."""
    from musacoder.build.cache import BuildRecord
    from musacoder.records import Task
    from musacoder.tasks import load_module

    worker.device, worker.backend = req.device, req.backend
    if worker.backend == "musa":  # torch_musa (or its stand-in under $MUSACODER_MUSA_SHIM) before the candidate
        from musacoder.judge.devices import require_backend

        require_backend("musa")
        if worker.device.startswith("musa"):  # torch.musa's timers, as they are before candidate code runs
            from musacoder.judge import timing

            timing.capture(worker.torch, "musa")
    worker.warm_device()
    worker.record = BuildRecord()
    _hook_builders(worker, req.cache_dir)
    if worker.backend == "triton":
        triton_hook.install(worker)
    if req.task_source is not None:
        worker.task_module = load_module(Task(name="task", source=req.task_source, overrides={}), "musacoder_task")
    if req.code is None:  # a reference-only worker (trusted baselines): no candidate at all
        worker.candidate = None
        return {"ok": True, "builds": [], "seconds": 0.0}
    return _import_candidate(worker, req.code)


def _hook_builders(worker, cache_dir: str) -> None:
    """torch's `load_inline` and `load` replaced by the cache's (torch_musa's builder counted, on MUSA hardware)."""
    import torch.utils.cpp_extension as cpp_ext

    from musacoder.build.cache import make_cached_load, make_cached_load_inline

    broker = request_build if os.environ.get("MUSACODER_BUILD_BROKER") == "1" and worker.channel else None
    cached = make_cached_load_inline(cpp_ext.load_inline, cache_dir, worker.backend, worker.record,
                                     request_build=None if broker is None else lambda msg: broker(worker, msg))
    cpp_ext.load_inline = cached
    cpp_ext.load = make_cached_load(cached, Path(os.getcwd()))
    if worker.backend == "musa" and worker.device.startswith("musa"):  # torch_musa's builder: recorded and counted
        import torch_musa.utils.musa_extension as musa_ext

        from musacoder.build.cache import make_counted_load_inline

        musa_ext.load_inline = make_counted_load_inline(musa_ext.load_inline, worker.record)


def _import_candidate(worker, code: str) -> dict:
    """Run the candidate's module (after the guard's snapshot) and say what it built and changed."""
    from musacoder.build.cache import BuildError

    record = worker.record
    module = types.ModuleType("candidate")
    module.__file__ = os.path.join(os.getcwd(), "candidate.py")
    with open(module.__file__, "w") as f:
        f.write(code)
    sys.modules["candidate"] = module
    if not (worker.backend == "triton" and worker.device == "cpu"):  # Triton's CPU interpreter works in NumPy itself
        seal_array_exits(worker.torch)
    worker.guard.snapshot()
    threads0 = native_threads()
    t0 = time.perf_counter()
    try:
        exec(compile(code, module.__file__, "exec"), module.__dict__)  # noqa: S102 - sandboxed worker
    except BuildError as e:
        return {"ok": False, "kind": "compile_error", "log": e.log, "builds": record.builds}
    except BaseException as e:  # noqa: BLE001
        if record.error_log is not None:
            return {"ok": False, "kind": "compile_error", "log": record.error_log, "builds": record.builds}
        return {"ok": False, "kind": "runtime_error", "error": trim_tb(e), "where": "import"}
    if record.error_log is not None:
        return {"ok": False, "kind": "compile_error", "log": record.error_log, "builds": record.builds}
    if not hasattr(module, "ModelNew"):
        return {"ok": False, "kind": "runtime_error", "error": "the candidate defines no ModelNew", "where": "import"}
    worker.candidate = module
    changes = worker.guard.changes()
    started = native_threads() - threads0
    if started > 0:  # a thread started at import is not counted by any call's check (it did work after the clock)
        changes.append(f"importing the candidate started {started} thread(s) (a kernel may use OpenMP inside its "
                       "call; no thread of its own)")
    return {"ok": True, "builds": record.builds, "seconds": time.perf_counter() - t0, "global_state": changes}


def request_build(worker, request: dict) -> dict:
    """Ask the trusted side to build (`musacoder.build.broker`) in the middle of a request: it answers this
    message, then waits for the request's own reply."""
    from musacoder.judge import protocol

    fd_in, fd_out = worker.channel
    protocol.send(fd_out, {"build_request": request, protocol.REPLY_KEY: worker.reply_key})
    return protocol.recv(fd_in)


def handle_build(worker, req: messages.BuildRequest) -> dict:
    """The builder's one request: build `kwargs` in `stage/` of this worker's folder with torch's own `load_inline`;
    the trusted side installs the result in the cache."""
    import torch.utils.cpp_extension as cpp_ext

    from musacoder.build.cache import BuildRecord, build_into, deterministic_failure

    key, record = str(req.key), BuildRecord()
    stage = os.path.join(os.getcwd(), "stage")
    t0 = time.perf_counter()
    try:
        module = build_into(cpp_ext.load_inline, dict(req.kwargs), Path(stage), f"mc_ext_{key[:20]}", record)
    except Exception as e:  # noqa: BLE001 - the compiler's failure is the reply
        log = str(e) or f"{type(e).__name__} while building"
        return {"ok": False, "log": log, "deterministic": deterministic_failure(log),
                "seconds": time.perf_counter() - t0}
    where = os.path.dirname(module.__file__) if getattr(module, "__file__", None) else stage
    return {"ok": True, "rel": os.path.relpath(where, stage), "fast": record.fast_build,
            "seconds": time.perf_counter() - t0}
