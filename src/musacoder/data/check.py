"""Executing a candidate task before it is kept (stage 1): `check_task` runs in-process and is what the worker
(`musacoder.data.worker`) calls in its own process.

A task is kept when, under its seed:
* the source is a KernelBench-format problem importing only torch (and math): no files, processes or other state;
* the reference runs and returns a tensor or a tuple/list of tensors;
* two runs from freshly executed modules (weights and inputs drawn from the same seed) are bit-identical;
* every floating output is finite and not degenerate (`musacoder.judge.compare.task_audit`: not all zeros, not
  below atol everywhere);
* the output depends on the inputs (other inputs give another output);
* the forward leaves its inputs unchanged;
* one forward takes at most `max_forward_s`, and inputs + outputs + parameters hold at most `max_footprint_bytes`.
"""

from __future__ import annotations

import ast
import time

from pydantic import BaseModel

from musacoder.data.records import TaskCheck

ALLOWED_IMPORTS = frozenset({"torch", "torch.nn", "torch.nn.functional", "math"})


class CheckLimits(BaseModel):
    """Bounds for one candidate. The worker's wall-clock timeout covers a forward that never returns."""

    max_forward_s: float = 2.0  # one forward pass on the CPU, at the task's own sizes
    max_footprint_bytes: int = 512 * 2**20  # inputs + outputs + parameters and buffers
    timeout_s: float = 60.0  # the whole check (build, 4 forwards); the worker is killed and restarted past it
    memory_limit_bytes: int = 4 * 2**30  # the worker's RLIMIT_DATA: a runaway allocation fails instead of swapping


def static_problems(source: str) -> str:
    """Why the source may not be kept before running it ("" when fine): imports outside torch/math, file access."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return f"syntax error line {e.lineno}: {e.msg}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad = [a.name for a in node.names if a.name not in ALLOWED_IMPORTS]
        elif isinstance(node, ast.ImportFrom):
            bad = [node.module or "."] if node.module not in ALLOWED_IMPORTS else []
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("open", "exec", "eval"):
            bad = [node.func.id]
        else:
            continue
        if bad:
            return f"external state: uses {', '.join(bad)}"
    return ""


def _tensors(out):
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)) and out and all(isinstance(t, torch.Tensor) for t in out):
        return list(out)
    return None


def _run(source: str, seed: int, input_seed: int):
    """Execute the task afresh: module, init inputs, model and inputs from the seeds; one timed forward."""
    import torch

    from musacoder.judge.inputs import make_init_inputs, make_inputs, seeded
    from musacoder.tasks import load_module, task_from_source

    module = load_module(task_from_source(source, "candidate"), "musacoder_candidate_task")
    init = make_init_inputs(module, seed)
    with seeded(seed):
        model = module.Model(*init)
    inputs = make_inputs(module, input_seed)
    before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model(*inputs)
    elapsed = time.perf_counter() - t0
    mutated = any(isinstance(x, torch.Tensor) and not torch.equal(x, b) for x, b in zip(inputs, before))
    return model, inputs, out, elapsed, mutated


def _same(a: list, b: list) -> bool:
    import torch

    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y) for x, y in zip(a, b))


def check_task(source: str, seed: int = 0, limits: CheckLimits | None = None) -> TaskCheck:
    """Run the checks above in this process; a failing check is the `reason` of a rejected `TaskCheck`."""
    import torch

    from musacoder.judge.compare import task_audit
    from musacoder.judge.inputs import nbytes

    limits = limits or CheckLimits()
    problem = static_problems(source)
    if problem:
        return TaskCheck(kept=False, reason=problem)
    try:
        model, inputs, out, elapsed, mutated = _run(source, seed, seed)
    except MemoryError:
        return TaskCheck(kept=False, reason="memory: allocation over the worker's memory limit")
    except Exception as e:  # noqa: BLE001 - any failure of a generated task is a reason to drop it
        msg = str(e).splitlines()[0][:200] if str(e) else ""
        reason = "memory" if "allocate" in msg.lower() else "runtime error"
        return TaskCheck(kept=False, reason=f"{reason}: {type(e).__name__}: {msg}")
    outs = _tensors(out)
    in_shapes = [list(x.shape) for x in inputs if isinstance(x, torch.Tensor)]
    if outs is None:
        return TaskCheck(kept=False, reason=f"output is {type(out).__name__}, not a tensor or a tuple of tensors",
                         input_shapes=in_shapes)
    params = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    record = dict(input_shapes=in_shapes, output_shapes=[list(t.shape) for t in outs],
                  forward_ms=round(elapsed * 1e3, 3), footprint_bytes=nbytes(inputs) + nbytes(outs) + params)

    def reject(reason: str) -> TaskCheck:
        return TaskCheck(kept=False, reason=reason, **record)

    if record["footprint_bytes"] > limits.max_footprint_bytes:
        return reject(f"memory: footprint {record['footprint_bytes'] / 2**20:.1f} MiB over "
                      f"{limits.max_footprint_bytes / 2**20:.0f} MiB")
    if elapsed > limits.max_forward_s:
        return reject(f"time: forward took {elapsed:.2f} s, over {limits.max_forward_s} s")
    if mutated:
        return reject("forward modifies its inputs")
    if any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in outs):
        return reject("non-finite output")
    audit = task_audit(outs)
    if audit:
        return reject(f"degenerate: {audit[0].removeprefix('task audit: ')}")
    try:
        _, _, again, _, _ = _run(source, seed, seed)
        _, _, other, _, _ = _run(source, seed, seed + 1)
    except Exception as e:  # noqa: BLE001
        return reject(f"runtime error on a rerun: {type(e).__name__}: {str(e)[:200]}")
    if not _same(outs, _tensors(again) or []):
        return reject("nondeterministic: two runs under the same seed differ")
    if _same(outs, _tensors(other) or []):
        return reject("degenerate: output does not depend on the inputs")
    return TaskCheck(kept=True, **record)
