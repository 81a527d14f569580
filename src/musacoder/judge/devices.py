"""GPU device families MooreEval runs on: CUDA (`torch.cuda`) and MUSA (torch_musa's `torch.musa`).

One place answers, for a device string, which runtime module holds its events, synchronisation and memory statistics
and which profiler activity records its kernels; and, for the `musa` backend, whether it can run here at all.

MUSA names come from torch_musa (MooreThreads/torch_musa): `import torch_musa` registers `torch.musa` and renames
PyTorch's PrivateUse1 device to `musa` (`musa:N`); `torch.musa` re-exports `synchronize`, `set_device`, `Event`,
`memory_allocated`, `max_memory_reserved`, `reset_peak_memory_stats`, `empty_cache`, `mem_get_info`,
`get_device_name` (torch_musa/__init__.py, core/memory.py, core/stream.py), and the profiler records MUSA kernels
under `ProfilerActivity.PrivateUse1` (aliased `ProfilerActivity.MUSA`). None of this has run on MUSA hardware here.

The musa shim (`MUSACODER_MUSA_SHIM=cuda`, `musacoder.port.shim.torch_shim`) runs the `musa` backend on a CUDA GPU:
`torch_musa`, `torch.musa` and the `musa` device stand in for the real ones, so ported candidates go through the
whole pipeline (legality for MUSA sources, torch_musa's builder, the shim header) on CUDA. It checks the port, not
MUSA.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from musacoder.config import UnusableArgument

SHIM_ENV = "MUSACODER_MUSA_SHIM"
GPU_PREFIXES = ("cuda", "musa")


class BackendUnavailable(UnusableArgument):
    """The backend's runtime is not installed or sees no device (a usage error: the CLI exits 2)."""


def shim_target() -> str | None:
    """'cuda' or 'cpu' when the musa shim is selected ($MUSACODER_MUSA_SHIM), else None."""
    value = os.environ.get(SHIM_ENV, "").strip().lower()
    if not value:
        return None
    if value not in ("cuda", "cpu"):
        raise BackendUnavailable(f"${SHIM_ENV} must be 'cuda' or 'cpu', got {value!r}")
    return value


def require_backend(backend: str, load_shim: bool = True) -> None:
    """Raise BackendUnavailable when `backend` cannot run in this process. Only `musa` has a precondition:
    torch_musa importable with a MUSA device visible, or the shim selected (installed here when `load_shim`: the
    candidate's worker needs it, the trusted process does not)."""
    if backend != "musa":
        return
    target = shim_target()
    if target is not None:
        if load_shim:
            from musacoder.port.shim.torch_shim import install

            install(target)
        return
    try:
        import torch_musa  # noqa: F401 - registers torch.musa and the musa device
    except Exception as e:  # noqa: BLE001 - ImportError, or a broken install raising anything
        raise BackendUnavailable(
            "backend musa needs torch_musa (Moore Threads' PyTorch backend), which cannot be imported here "
            f"({type(e).__name__}: {e}). Run on a machine with MUSA and torch_musa installed, or pick --backend "
            "cuda, triton or cpu.") from None
    import torch

    if not torch.musa.is_available():
        raise BackendUnavailable("backend musa: torch_musa is installed but sees no MUSA device")


def default_device(backend: str) -> str:
    """The device a backend runs on when none is configured: `musa` for the musa backend (`cuda` under the CUDA
    shim, `cpu` under the CPU shim)."""
    if backend == "musa":
        target = shim_target()
        return "musa" if target is None else target
    return "cuda" if backend == "cuda" else "cpu"


def is_gpu(device: str) -> bool:
    return device.startswith(GPU_PREFIXES)


@dataclass(frozen=True)
class DeviceRuntime:
    """The runtime module of one GPU family and what MooreEval takes from it."""

    family: str  # "cuda" or "musa"
    module: Any  # torch.cuda or torch.musa

    def synchronize(self, device: Any = None) -> None:
        self.module.synchronize(device)

    def set_device(self, device: Any) -> None:
        self.module.set_device(device)

    def event(self, enable_timing: bool = True) -> Any:
        return self.module.Event(enable_timing=enable_timing)

    def max_memory_reserved(self, device: Any) -> int:
        return int(self.module.max_memory_reserved(device))

    def memory_allocated(self, device: Any) -> int:
        return int(self.module.memory_allocated(device))

    def reset_peak_memory_stats(self, device: Any) -> None:
        self.module.reset_peak_memory_stats(device)

    def empty_cache(self) -> None:
        self.module.empty_cache()

    def mem_get_info(self, device: Any) -> tuple[int, int]:
        return self.module.mem_get_info(device)

    def device_name(self, device: Any) -> str:
        return self.module.get_device_name(device)

    @property
    def profiler_activity(self) -> Any:
        from torch.profiler import ProfilerActivity

        return ProfilerActivity.CUDA if self.family == "cuda" else ProfilerActivity.PrivateUse1


def runtime_for(device: str) -> DeviceRuntime | None:
    """The runtime of a GPU device string (`cuda[:N]`, `musa[:N]`); None for the CPU."""
    import torch

    if device.startswith("cuda"):
        return DeviceRuntime("cuda", torch.cuda)
    if device.startswith("musa"):
        if not hasattr(torch, "musa"):
            raise BackendUnavailable(f"device {device}: torch.musa is missing (import torch_musa first)")
        return DeviceRuntime("musa", torch.musa)
    return None


def check_musa_config(backend: str, baseline: str, time_compile_baseline: bool) -> None:
    """The musa backend reports against eager PyTorch only: there is no torch.compile baseline on MUSA."""
    if backend != "musa":
        return
    if baseline == "compile" or time_compile_baseline:
        raise UnusableArgument("backend musa: no torch.compile baseline on MUSA; use the eager baseline "
                         "(--baseline eager, time_compile_baseline=False)")
