"""Shape/stride/dtype metadata of a task, for the prompt (the paper's stage-2 "explicit metadata").

The reference runs on PyTorch's `meta` device at the evaluated sizes (the task's overrides applied): shapes, strides
and dtypes without computing or allocating anything. If an op has no meta kernel (data-dependent shapes), the
reference runs for real on the CPU, but only when its inputs are small (≤ `max_real_elements`; use `--set` to shrink
the task); otherwise the outputs are left out.
"""

from __future__ import annotations

import inspect
from typing import Any

from musacoder.records import Task


def _describe(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        contiguous = "contiguous" if value.is_contiguous() else "non-contiguous"
        dtype = str(value.dtype).removeprefix("torch.")
        return f"tensor {dtype}, shape {tuple(value.shape)}, stride {tuple(value.stride())}, {contiguous}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    return f"{type(value).__name__} {value!r}"


def _forward_arg_names(model_cls: Any, count: int) -> list[str]:
    try:
        params = [p for p in inspect.signature(model_cls.forward).parameters.values() if p.name != "self"]
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"arg{i}" for i in range(count)]


def _numel(values: Any) -> int:
    import torch

    if isinstance(values, torch.Tensor):
        return values.numel()
    if isinstance(values, (list, tuple)):
        return sum(_numel(v) for v in values)
    return 0


def _run(module: Any, device: str) -> tuple[list, Any, Any, list]:
    import torch

    torch.manual_seed(0)
    with torch.device(device):
        init = list(module.get_init_inputs())
        model = module.Model(*init)
        inputs = list(module.get_inputs())
    with torch.no_grad():
        out = model(*inputs)
    return init, model, out, inputs


def task_metadata(task: Task, max_real_elements: int = 1 << 24) -> str:
    """A short text block describing init inputs, forward inputs, parameters and outputs of the reference."""
    from musacoder.tasks import load_module

    module = load_module(task, module_name=f"musacoder_meta_{abs(hash(task.name))}")
    lines: list[str] = []
    try:
        init, model, out, inputs = _run(module, "meta")
        how = "evaluated sizes"
    except Exception:  # noqa: BLE001 - an op without a meta kernel; try the inputs alone, then a real run
        import torch

        try:
            with torch.device("meta"):
                init, inputs = list(module.get_init_inputs()), list(module.get_inputs())
        except Exception:  # noqa: BLE001
            return ""
        model, out, how = None, None, "evaluated sizes; outputs unknown"
        if _numel(inputs) <= max_real_elements:
            try:
                init, model, out, inputs = _run(module, "cpu")
                how = "evaluated sizes, run on CPU"
            except Exception:  # noqa: BLE001
                pass
    lines.append(f"Shapes, strides and dtypes ({how}):")
    if init:
        lines.append(f"- Model(*init inputs): {', '.join(_describe(v) for v in init)}")
    for name, value in zip(_forward_arg_names(module.Model, len(inputs)), inputs):
        lines.append(f"- input `{name}`: {_describe(value)}")
    if model is not None:
        for pname, p in list(model.named_parameters())[:16]:
            lines.append(f"- parameter `{pname}`: {_describe(p.detach())}")
        for bname, b in list(model.named_buffers())[:8]:
            lines.append(f"- buffer `{bname}`: {_describe(b)}")
    if out is not None:
        lines.append(f"- output: {_describe(out)}")
    return "\n".join(lines)
