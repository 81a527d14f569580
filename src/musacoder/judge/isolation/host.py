"""What this host permits, found once per process: the probe (a throw-away process that enters every worker layer
and, on a GPU host, uses the GPU inside them), the layers workers get from it (`layers`, `worker_env`), and the
report behind `musacoder doctor`."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from musacoder.build.permissions import open_cache
from musacoder.judge.isolation import checks, prefix
from musacoder.judge.isolation.cgroups import release_cgroups
from musacoder.judge.isolation.filters import landlock_abi
from musacoder.judge.isolation.prefix import prefix_layers, server_prefix, worker_prefix
from musacoder.judge.isolation.settings import (ALL_LAYERS, PREFIX_LAYERS, WORKER_LAYERS, enabled, hidden_folders,
                                                read_report, worker_memory_mb, workers_base)


def probe_layers(layers, gpu: bool) -> tuple[dict, str | None, str]:
    """Start a throw-away process the way a `python -m` worker starts (its prefix), let it enter `layers` and, with
    `gpu`, use the GPU inside them: (its report, the GPU check's result or None, the end of its stderr). GPU checks
    are remembered across processes (`checks.gpu_memo`): each creates a CUDA context, and a host that refuses some
    layers needs a dozen before its first worker starts."""
    if not gpu:
        return _enter_layers(layers, gpu)

    def checked():  # what a later process may reuse: the layers entered and skipped, not this run's cgroup
        report, gpu_result, err = _enter_layers(layers, gpu)
        return {k: report[k] for k in ("layers", "skipped") if k in report}, gpu_result, err

    return checks.gpu_memo(["layers", *layers], checked, lambda r: r[1] if r[0] else None)


def _enter_layers(layers, gpu: bool) -> tuple[dict, str | None, str]:
    """A throw-away process entering `layers` (or its stand-in, `checks.ProbeProcesses.enter_layers`)."""
    stand_in = checks.replaced()
    if stand_in is not None and stand_in.enter_layers is not None:
        return stand_in.enter_layers(list(layers), gpu)
    scratch = Path(tempfile.mkdtemp(prefix="probe-", dir=workers_base()))
    env = checks.probe_env(scratch, layers)
    code = "from musacoder.judge import isolation; isolation.enter_worker()"
    if gpu:
        code += "; isolation.gpu_selfcheck()"
    err, gpu_result = "", None
    try:
        run = subprocess.run([*worker_prefix(), sys.executable, "-c", code], cwd=scratch, env=env,
                             capture_output=True, text=True, timeout=60)
        err = run.stderr[-500:]
        report = read_report(scratch)
        release_cgroups(report.get("cgroups"))
        if gpu:
            try:
                gpu_result = json.loads((scratch / checks.GPU_REPORT).read_text())
            except (OSError, ValueError):
                gpu_result = f"the check wrote no result: {err[-200:]}"
    except (OSError, subprocess.SubprocessError) as e:
        report, err = {}, str(e)
        gpu_result = None if not gpu else f"the check did not run: {e}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return report, gpu_result, err


def _layers_the_gpu_survives(entered: list[str], why: str = "") -> tuple[list[str], dict[str, str]]:
    """The largest part of `entered` inside which the GPU still works, found layer by layer, with the reason each
    left-out layer was left out (some hosts, e.g. gVisor's GPU proxy, refuse the driver inside a layer)."""
    # one layer at fault, perhaps only in the absence of another (a read-only host /dev/shm is replaced by the `dev`
    # layer's own, say): the whole set less each layer, side by side; the first that works, from the end, is kept
    less_one = checks.in_parallel(lambda layer: probe_layers([x for x in entered if x != layer], gpu=True)[1], entered)
    for layer, got in reversed(list(zip(entered, less_one))):
        if got == "ok":
            return ([x for x in entered if x != layer],
                    {layer: f"left out: the GPU does not work inside it with the other layers on this host ({why})"})
    left_out: dict[str, str] = {}
    alone = checks.in_parallel(lambda layer: probe_layers([layer], gpu=True)[1], entered)  # each layer alone
    for layer, got in zip(entered, alone):
        if got != "ok":
            left_out[layer] = f"left out: the GPU does not work inside it on this host ({got})"
    keep = [layer for layer in entered if layer not in left_out]
    while keep:  # and together: drop from the end until the rest works
        _, got, _ = probe_layers(keep, gpu=True)
        if got == "ok":
            break
        layer = keep.pop()
        left_out[layer] = f"left out: the GPU does not work inside it with the others on this host ({got})"
    return keep, left_out


_PROBE_LOCK = threading.Lock()


def probe() -> dict:
    """What this host permits, found once per process (callers on other threads wait for the first):
    {"prefix_layers", "worker_layers", "skipped", "gpu"}. A throw-away process enters every worker layer; on a host
    with an NVIDIA GPU it must also use the GPU inside them, and layers the GPU does not survive are left out (and
    reported) rather than leave every verification an `infra_error`. "gpu" is the check's result inside the layers
    kept (None without a GPU). The checks that do not depend on each other run side by side."""
    with _PROBE_LOCK:
        return _probe_host()


@functools.lru_cache(maxsize=None)
def _probe_host() -> dict:
    gpu = checks.has_nvidia_gpu()
    server_prefix(), worker_prefix()  # the prefixes first: every probe process starts under worker_prefix()
    if gpu:  # the whole set and the bare process side by side: the bare result is needed when the set fails
        (report, gpu_result, err), (_, bare, _) = checks.in_parallel(
            lambda layers: probe_layers(layers, gpu=True), [WORKER_LAYERS, []])
    else:
        report, gpu_result, err = probe_layers(WORKER_LAYERS, gpu)
    skipped = dict(report.get("skipped", {}))
    if not report:
        skipped = {layer: f"the probe wrote no report: {err}" for layer in WORKER_LAYERS}
    if "pid" in skipped and "pid" in prefix.PREFIX_GPU_NOTES:
        skipped["pid"] = prefix.PREFIX_GPU_NOTES["pid"]
    entered = list(report.get("layers", []))
    if gpu and gpu_result != "ok" and entered:
        if bare == "ok":  # the layers are what breaks it
            entered, left_out = _layers_the_gpu_survives(entered, gpu_result)
            skipped.update(left_out)
            gpu_result = "ok"
        else:
            gpu_result = f"the GPU does not work even outside the layers ({bare})"
    for flag, layer in PREFIX_LAYERS.items():
        if flag not in server_prefix():
            skipped[layer] = prefix.PREFIX_GPU_NOTES.get(layer, "unshare is missing or not permitted here")
    return {"prefix_layers": prefix_layers(server_prefix()), "worker_layers": entered, "skipped": skipped,
            "gpu": gpu_result if gpu else None}


@contextlib.contextmanager
def probing_with(processes: checks.ProbeProcesses):
    """Within the block, the host probe (`probe`, `server_prefix`, `worker_prefix`) asks `processes` instead of the
    machine and starts from nothing; afterwards it asks the machine again, also from nothing."""
    def forget():
        _probe_host.cache_clear()
        for f in (server_prefix, worker_prefix, prefix.gpu_check_under):
            f.cache_clear()
        prefix.PREFIX_GPU_NOTES.clear()

    forget()
    checks.replace_processes(processes)
    try:
        yield
    finally:
        checks.replace_processes(None)
        forget()


def layers() -> list[str]:
    """The layers workers on this host will run in (the fork server's path; a verdict's `sandbox` field lists those
    a given worker actually entered)."""
    if not enabled():
        return []
    p = probe()
    return p["prefix_layers"] + p["worker_layers"]


def worker_env(workdir: Path, cache_dir: Path) -> dict[str, str]:
    """The variables that tell a worker which layers to enter (those the probe found this host permits)."""
    if not enabled():
        return {"MUSACODER_SANDBOX": ""}
    from musacoder.build import broker

    layers = probe()["worker_layers"]
    if "uid" in layers:
        open_cache(cache_dir)
    # under the build broker only the trusted side writes the build cache: workers read it
    writable = [str(workdir)] if broker.enabled() else [str(workdir), str(cache_dir)]
    return {"MUSACODER_SANDBOX": ",".join(layers),
            "MUSACODER_SANDBOX_WRITABLE": os.pathsep.join(writable),
            "MUSACODER_SANDBOX_READABLE": str(cache_dir) if broker.enabled() else "",
            "MUSACODER_SANDBOX_HIDE": os.pathsep.join(hidden_folders())}


def doctor() -> str:
    """A report of what this host permits and which layers workers will use, looked at afresh (not from the GPU
    checks' memo, which it refreshes)."""
    checks.look_afresh()
    p = probe() if enabled() else {"prefix_layers": [], "worker_layers": [], "skipped": {}, "gpu": None}
    active = set(p["prefix_layers"] + p["worker_layers"])
    try:
        import pyseccomp  # noqa: F401

        seccomp_lib = "pyseccomp and libseccomp found"
    except Exception as e:  # noqa: BLE001 - a missing libseccomp raises RuntimeError at import
        seccomp_lib = f"not usable ({type(e).__name__}: {e})"
    cgroup = "v2" if Path("/sys/fs/cgroup/cgroup.controllers").exists() else (
        "v1" if Path("/sys/fs/cgroup/pids").is_dir() else "none found")
    lines = [
        "musacoder sandbox doctor",
        f"  host: Linux {platform.release()} {platform.machine()}, uid {os.getuid()}, "
        f"unshare {'found' if shutil.which('unshare') else 'missing'}, cgroup {cgroup}, seccomp: {seccomp_lib}, "
        f"Landlock ABI {landlock_abi() or 'not enabled'}",
    ]
    if not enabled():
        lines.append("  MUSACODER_SANDBOX=0: the sandbox is turned off; workers get only their folder, scrubbed "
                     "environment and process group")
    for layer in ALL_LAYERS:
        mark = "yes" if layer in active else "no "
        why = "" if layer in active else f"  ({p['skipped'].get(layer, 'off')})"
        lines.append(f"  [{mark}] {layer}{why}")
    if os.getuid() == 0 and "pids-cgroup" not in active:
        if "uid" not in active:
            lines.append("  note: workers keep uid 0, which is exempt from RLIMIT_NPROC; without a pids cgroup a fork "
                         "bomb there is bounded only by the deadline and the PID namespace's kill")
    if "memory-cgroup" in active:
        lines.append(f"  each worker's host memory is capped at {worker_memory_mb()} MB (MUSACODER_WORKER_MEMORY_MB)")
    if p.get("gpu") is not None:
        lines.append(f"  GPU inside the layers: {p['gpu']}")
    lines.append(f"  layers: {', '.join(layer for layer in ALL_LAYERS if layer in active) or 'none'}")
    return "\n".join(lines)
