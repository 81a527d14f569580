"""Run ported (torch_musa) Python code where there is no MUSA: `torch.musa` → `torch.cuda` (or the CPU), the
`musa` device → `cuda:N` (or `cpu`), and torch_musa's extension builder → `torch.utils.cpp_extension`.

`install(target)` is process-wide and cannot be undone (it renames PyTorch's PrivateUse1 backend to `musa`, as
torch_musa itself does, so `torch.device("musa:0")` parses). Use it in a process of its own:

- `sys.modules["torch_musa"]`, `torch_musa.utils.musa_extension` (`load_inline`, `load`): the builder calls are
  translated back (`musa_sources` → `cuda_sources`, `extra_musa_cflags` → `extra_cuda_cflags`, `with_musa` →
  `with_cuda`) and get the shim include directory, so ported C++ compiles with nvcc;
- `torch.musa`: forwards to `torch.cuda` (target cuda) or gives CPU stand-ins (target cpu: no-op synchronize, a
  wall-clock `Event`, zero memory statistics, `manual_seed` → `torch.manual_seed`);
- `Tensor.musa()` / `Module.musa()` move to the target; a `TorchFunctionMode` (`MusaDeviceMode`, entered by
  `install`) rewrites every `device=` / `.to()` argument naming the `musa` device to the target device.
"""

from __future__ import annotations

import re
import sys
import time
import types
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from musacoder.port.shim import INCLUDE_DIR

_MUSA_DEVICE = re.compile(r"^musa(?::(\d+))?$")
_KWARGS_BACK = {"musa_sources": "cuda_sources", "extra_musa_cflags": "extra_cuda_cflags", "with_musa": "with_cuda"}

_state: dict[str, Any] = {}


def target_device(device: Any, target: str) -> Any:
    """`device` with the musa device replaced by the target (`cpu`, or `cuda:N` keeping the index)."""
    index = None
    if isinstance(device, str):
        m = _MUSA_DEVICE.match(device)
        if not m:
            return device
        index = int(m.group(1)) if m.group(1) else None
    elif isinstance(device, torch.device) and device.type in ("musa", "privateuseone"):
        index = device.index
    else:
        return device
    if target == "cpu":
        return torch.device("cpu")
    return torch.device("cuda", index) if index is not None else torch.device("cuda")


def to_cuda_kwargs(kwargs: dict) -> dict:
    """torch_musa `load_inline`/`load` keyword arguments as `torch.utils.cpp_extension` takes them, with the shim
    include directory added."""
    out = {_KWARGS_BACK.get(k, k): v for k, v in kwargs.items()}
    out["extra_include_paths"] = [str(INCLUDE_DIR)] + list(out.get("extra_include_paths") or [])
    return out


class MusaDeviceMode(TorchFunctionMode):
    """Maps the `musa` device in `device=` keywords and in the positional arguments of `.to()` to the target."""

    def __init__(self, target: str):
        super().__init__()
        self.target = target

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = target_device(kwargs["device"], self.target)
        if getattr(func, "__name__", "") in ("to", "_to_copy", "new_empty", "new_zeros", "new_ones", "new_full"):
            args = tuple(target_device(a, self.target) for a in args)
        return func(*args, **kwargs)


class _CpuEvent:
    """Stand-in for `torch.musa.Event` on the CPU: wall-clock timestamps, `elapsed_time` in milliseconds."""

    def __init__(self, enable_timing: bool = False, **_: Any):
        self.t: float | None = None

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: "_CpuEvent") -> float:
        return (end.t - self.t) * 1e3


def _cpu_namespace() -> types.ModuleType:
    ns = types.ModuleType("torch.musa")
    ns.__doc__ = "CPU stand-in for torch.musa (musacoder.port.shim.torch_shim)."
    zero = lambda *a, **k: 0  # noqa: E731
    none = lambda *a, **k: None  # noqa: E731
    ns.is_available = lambda: True
    ns.device_count = lambda: 1
    ns.current_device = lambda: 0
    ns.get_device_name = lambda *a, **k: "cpu (musa shim)"
    for name in ("set_device", "synchronize", "empty_cache", "reset_peak_memory_stats", "reset_max_memory_allocated"):
        setattr(ns, name, none)
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        setattr(ns, name, zero)
    # torch.manual_seed also seeds the PrivateUse1 device module through these two; the CPU generator is the one
    ns.manual_seed = lambda seed: torch.manual_seed(seed)
    ns.manual_seed_all = none
    ns._is_in_bad_fork = lambda: False
    ns.Event = _CpuEvent

    def missing(name: str):
        raise AttributeError(f"torch.musa.{name} has no CPU stand-in in the musa shim; run with target 'cuda'")

    ns.__getattr__ = missing  # type: ignore[attr-defined]
    return ns


def _cuda_namespace() -> types.ModuleType:
    ns = types.ModuleType("torch.musa")
    ns.__doc__ = "torch.musa forwarding to torch.cuda (musacoder.port.shim.torch_shim)."
    ns.__getattr__ = lambda name: getattr(torch.cuda, name)  # type: ignore[attr-defined]
    return ns


def _builder_module() -> types.ModuleType:
    from torch.utils import cpp_extension

    mod = types.ModuleType("torch_musa.utils.musa_extension")
    mod.__doc__ = "torch_musa's extension builder mapped to torch.utils.cpp_extension (musa shim)."
    mod.load_inline = lambda *a, **k: cpp_extension.load_inline(*a, **to_cuda_kwargs(k))
    mod.load = lambda *a, **k: cpp_extension.load(*a, **to_cuda_kwargs(k))
    mod.include_paths = lambda musa=False: [str(INCLUDE_DIR)] + cpp_extension.include_paths(device_type="cuda")
    return mod


def install(target: str = "cuda") -> str:
    """Install the shim for this process (idempotent for one target); returns the target. See the module docstring."""
    if target not in ("cuda", "cpu"):
        raise ValueError(f"musa shim target must be 'cuda' or 'cpu', got {target!r}")
    if _state.get("target"):
        if _state["target"] != target:
            raise RuntimeError(f"musa shim already installed for {_state['target']!r}")
        return target
    if torch._C._get_privateuse1_backend_name() == "privateuseone":
        torch.utils.rename_privateuse1_backend("musa")
    ns = _cuda_namespace() if target == "cuda" else _cpu_namespace()
    torch.musa = ns  # type: ignore[attr-defined]
    sys.modules["torch.musa"] = ns
    pkg = types.ModuleType("torch_musa")
    pkg.__doc__ = "musa shim (musacoder.port.shim.torch_shim): no MUSA here."
    utils = types.ModuleType("torch_musa.utils")
    builder = _builder_module()
    utils.musa_extension = builder
    pkg.utils = utils
    sys.modules.update({"torch_musa": pkg, "torch_musa.utils": utils, "torch_musa.utils.musa_extension": builder})
    dev = "cpu" if target == "cpu" else "cuda"
    torch.Tensor.musa = lambda self, device=None, non_blocking=False, **k: self.to(  # type: ignore[attr-defined]
        target_device(device, target) if device is not None else dev, non_blocking=non_blocking)
    torch.nn.Module.musa = lambda self, device=None: self.to(  # type: ignore[attr-defined]
        target_device(device, target) if device is not None else dev)
    mode = MusaDeviceMode(target)
    mode.__enter__()
    _state.update(target=target, mode=mode)
    return target
