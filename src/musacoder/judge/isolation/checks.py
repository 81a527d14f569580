"""The throw-away processes the host probe starts to see what works here, and what their answers are worth keeping:
the GPU self-check a probe process runs inside the layers, the environment it starts in, and the memo that keeps the
GPU checks' answers across verifier processes."""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import json
import os
import platform
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from musacoder.judge.isolation.settings import WORKER_LAYERS, hidden_folders, workers_base


def has_nvidia_gpu() -> bool:
    """Whether this host has an NVIDIA GPU's device nodes (then the probe checks that the GPU works in the layers)."""
    if _replaced is not None and _replaced.has_gpu is not None:
        return _replaced.has_gpu()
    return os.path.exists("/dev/nvidiactl")


@dataclasses.dataclass(frozen=True)
class ProbeProcesses:
    """Stand-ins for what the host probe asks of the machine, so its decisions (which layers and namespaces to keep,
    what to remember) can run on answers chosen in advance: tests, or a host whose answers are known. Each field left
    None asks the machine. Installed with `musacoder.judge.isolation.host.probing_with`.

    - `enter_layers(layers, gpu)`: what a throw-away process that enters `layers` (and, with `gpu`, uses the GPU
      inside them) reports: (its report {"layers", "skipped"}, the GPU check's result or None, its stderr's end);
    - `gpu_under(prefix)`: the GPU check's result in a process started under the `unshare` prefix `prefix`;
    - `has_gpu()`: whether the host has an NVIDIA GPU;
    - `remember`: whether the GPU checks' answers go through the memo across processes (`gpu_memo`); off by
      default, so answers made up for one probe are never read back by another."""

    enter_layers: Callable[[list[str], bool], tuple[dict, str | None, str]] | None = None
    gpu_under: Callable[[tuple[str, ...]], str] | None = None
    has_gpu: Callable[[], bool] | None = None
    remember: bool = False


_replaced: ProbeProcesses | None = None


def replaced() -> ProbeProcesses | None:
    """The stand-ins in use (`ProbeProcesses`), or None: the probe asks the machine."""
    return _replaced


def replace_processes(processes: ProbeProcesses | None) -> None:
    """Use `processes` from now on (None: the machine again). `host.probing_with` wraps it with the caches' reset."""
    global _replaced
    _replaced = processes


GPU_REPORT = ".musacoder-gpu.json"


def gpu_selfcheck() -> str:
    """Whether this process can use NVIDIA GPU 0 through the driver API: init, a context, a 1 MiB allocation; "ok" or
    the first call that failed. Written to `GPU_REPORT` in the working folder (the probe runs it inside the layers)."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
        n, dev, ctx, ptr = ctypes.c_int(), ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
        steps = (("cuInit", lambda: cu.cuInit(0)), ("cuDeviceGetCount", lambda: cu.cuDeviceGetCount(ctypes.byref(n))),
                 ("cuDeviceGet", lambda: cu.cuDeviceGet(ctypes.byref(dev), 0)),
                 ("cuDevicePrimaryCtxRetain", lambda: cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)),
                 ("cuCtxSetCurrent", lambda: cu.cuCtxSetCurrent(ctx)),
                 ("cuMemAlloc", lambda: cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20))),
                 ("cuMemFree", lambda: cu.cuMemFree_v2(ptr)))
        result = "ok"
        for name, call in steps:
            err = call()
            if err != 0:
                result = f"{name} returned CUDA error {err}"
                break
            if name == "cuDeviceGetCount" and n.value < 1:
                result = "no device visible"
                break
    except (OSError, AttributeError) as e:
        result = f"libcuda: {e}"
    Path(GPU_REPORT).write_text(json.dumps(result))
    return result


def probe_env(scratch: Path, layers=WORKER_LAYERS) -> dict[str, str]:
    """The probe's environment: a worker's sandbox settings, and this package's folder ahead of the host's own import
    path (packages installed with `pip --target` under /tmp must be found behind the private /tmp, as in a worker)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LD_LIBRARY_PATH", "LANG")}
    src = str(Path(__file__).resolve().parents[3])  # the folder holding this package: src/musacoder/judge/isolation
    env.update(MUSACODER_SANDBOX=",".join(layers), MUSACODER_SANDBOX_WRITABLE=str(scratch),
               MUSACODER_SANDBOX_HIDE=os.pathsep.join(hidden_folders()), HOME=str(scratch), TMPDIR=str(scratch),
               PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p))
    return env


def in_parallel(fn, items) -> list:
    """`[fn(x) for x in items]`, the calls run side by side: each GPU check is a process that creates a CUDA context
    (about a second), and a host that refuses some layers needs a dozen of them before the first worker starts."""
    items = list(items)
    if len(items) < 2:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        return list(pool.map(fn, items))


# The GPU checks' results, remembered across verifier processes for `MUSACODER_PROBE_MEMO_S` seconds (0: never): each
# check is a process creating a CUDA context, and every `verify`, `verify-batch` or `serve` process would otherwise
# pay for them again before its first worker starts. An entry holds only for the same boot, kernel, driver, cgroup,
# uid, Python, environment and this package's judge code (`_host_key`); it lives in the workers' base folder, which
# only the verifier's user may write, and is trusted only if that user owns it and no one else may write it.
PROBE_MEMO_S = float(os.environ.get("MUSACODER_PROBE_MEMO_S", str(6 * 3600)))
_memo_lock = threading.Lock()
_memo_reads = True  # `doctor` looks afresh (and records what it found)


def look_afresh(on: bool = True) -> None:
    """From now on in this process, ask every GPU check again (and record its answer) instead of reading the memo:
    what `doctor` reports is what the host does now. `on=False` reads the memo again."""
    global _memo_reads
    _memo_reads = not on


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


@functools.lru_cache(maxsize=None)
def _host_key() -> str:
    h = hashlib.sha256()
    for f in ("/proc/sys/kernel/random/boot_id", "/proc/driver/nvidia/version", "/proc/self/cgroup",
              "/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces"):
        h.update(f.encode() + b"\0" + _read_text(f).encode() + b"\0")
    env = sorted((k, v) for k, v in os.environ.items() if k != "MUSACODER_PROBE_MEMO_S" and (
        k.startswith(("MUSACODER_", "CUDA_", "NVIDIA_")) or k in ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH")))
    h.update(repr((platform.release(), os.getuid(), sys.executable, sys.version, env)).encode())
    judge = Path(__file__).resolve().parents[1]
    for src in sorted(judge.rglob("*.py")):
        h.update(str(src.relative_to(judge)).encode() + src.read_bytes())
    return h.hexdigest()[:32]


def _memo_file() -> Path:
    return workers_base() / f"gpu-checks-{_host_key()}.json"


def _memo_load(path: Path) -> dict:
    """The memo's entries, or {} unless the verifier's user owns the file and its folder and no one else may write
    either (a worker that could plant entries could switch layers off for the next verifier)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    try:
        for st in (os.fstat(fd), os.stat(path.parent)):
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                return {}
        with os.fdopen(os.dup(fd), encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)


def gpu_memo(key: list[str], compute, result_of):
    """`compute()`, or what it gave within `PROBE_MEMO_S` in an earlier process with the same `_host_key`. Only
    answers the check gave itself are kept (`result_of(value)` not None); a check that did not run is asked again."""
    if PROBE_MEMO_S <= 0 or (_replaced is not None and not _replaced.remember):
        return compute()
    name, path = "\x1f".join(key), _memo_file()
    if _memo_reads:
        entry = _memo_load(path).get(name)
        if isinstance(entry, dict) and 0 <= time.time() - entry.get("t", -1e18) <= PROBE_MEMO_S:
            value = entry.get("v")
            return tuple(value) if isinstance(value, list) else value
    value = compute()
    if result_of(value) is not None and not str(result_of(value)).startswith(("the check wrote no result",
                                                                             "the check did not run")):
        with _memo_lock:
            entries = _memo_load(path)
            entries[name] = {"t": time.time(), "v": value}
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(entries, f)
                os.replace(tmp, path)
            except OSError:
                tmp.unlink(missing_ok=True)
    return value
