"""Output comparison, run in the trusted process only. Pure functions over tensors.

A candidate output passes a trial when, for every leaf of the reference output structure:
  * the structure (tensor / tuple / list nesting, lengths) is identical, each tensor is exactly `torch.Tensor`
    (no subclass), with the same shape and dtype;
  * NaN positions agree and ±Inf agree exactly;
  * |out − ref| ≤ atol + rtol·|ref| elementwise (atol = rtol: 1e-4 for fp32/fp64, 1e-2 for fp16/bf16, exact for
    integers and bools), **and**
  * ‖out − ref‖₂ / ‖ref‖₂ ≤ rel_l2_tol[dtype] over finite entries (skipped when ‖ref‖₂ = 0), so that answering zeros
    to a task whose outputs are all below atol fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

ATOL_RTOL = {torch.float32: 1e-4, torch.float64: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}
DEFAULT_REL_L2 = {"float32": 1e-2, "float64": 1e-2, "float16": 5e-2, "bfloat16": 5e-2}


@dataclass
class Comparison:
    passed: bool
    max_abs_error: float | None = None
    rel_l2_error: float | None = None
    message: str = ""


def _leaves(obj, path="output"):
    if isinstance(obj, (tuple, list)):
        yield path, type(obj).__name__, len(obj)
        for i, x in enumerate(obj):
            yield from _leaves(x, f"{path}[{i}]")
    else:
        yield path, obj, None


def compare_tensor(ref: torch.Tensor, out, where: str = "output", rel_l2_tol: dict[str, float] | None = None,
                   device: str | torch.device = "cpu") -> Comparison:
    """Compare one tensor; the arithmetic runs on `device` (the verification's GPU where there is one: the same
    float64 arithmetic, in milliseconds instead of seconds for large outputs)."""
    if type(out) is not torch.Tensor:  # noqa: E721 - subclasses are rejected on purpose
        return Comparison(False, message=f"{where}: expected a plain torch.Tensor, got {type(out).__module__}.{type(out).__name__}")
    if out.shape != ref.shape:
        return Comparison(False, message=f"{where}: shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Comparison(False, message=f"{where}: dtype {out.dtype} != expected {ref.dtype}")
    out = out.detach().to(device)
    ref = ref.detach().to(device)
    if out.numel() == 0:
        return Comparison(True, 0.0, 0.0)
    if not ref.is_floating_point() and not ref.is_complex():
        eq = torch.equal(out, ref)
        diff = (out.to(torch.float64) - ref.to(torch.float64)).abs().max().item()
        return Comparison(eq, diff, 0.0 if eq else None, "" if eq else f"{where}: integer/bool values differ (max |Δ| {diff:g})")
    o = out.to(torch.float64)
    r = ref.to(torch.float64)
    nan_o, nan_r = torch.isnan(o), torch.isnan(r)
    if not torch.equal(nan_o, nan_r):
        n = int((nan_o ^ nan_r).sum())
        return Comparison(False, message=f"{where}: NaN positions differ at {n} element(s)")
    inf_r = torch.isinf(r)
    inf_o = torch.isinf(o)
    if not torch.equal(inf_o, inf_r) or not torch.equal(o[inf_r], r[inf_r]):
        return Comparison(False, message=f"{where}: ±Inf positions or signs differ")
    finite = ~(nan_r | inf_r)
    of, rf = (o, r) if bool(finite.all()) else (o[finite], r[finite])
    tol = ATOL_RTOL.get(ref.dtype, 1e-4)
    err = (of - rf).abs()
    max_abs = float(err.max()) if err.numel() else 0.0
    bad = int((err > rf.abs().mul_(tol).add_(tol)).sum())
    ref_norm = float(torch.linalg.vector_norm(rf)) if rf.numel() else 0.0
    diff_norm = float(torch.linalg.vector_norm(err)) if rf.numel() else 0.0
    rel = diff_norm / ref_norm if ref_norm > 0 else (0.0 if diff_norm == 0 else math.inf)
    rel_tol = (rel_l2_tol or DEFAULT_REL_L2).get(str(ref.dtype).removeprefix("torch."), 1e-2)
    if bad:
        return Comparison(False, max_abs, rel, f"{where}: {bad}/{rf.numel()} elements outside atol=rtol={tol:g} "
                                               f"(max |Δ| {max_abs:.3g}, rel L2 {rel:.3g})")
    if ref_norm > 0 and rel > rel_tol:
        return Comparison(False, max_abs, rel, f"{where}: relative L2 error {rel:.3g} > {rel_tol:g} although every element "
                                               f"is within atol (tiny outputs: compute them, do not approximate)")
    return Comparison(True, max_abs, rel if ref_norm > 0 else 0.0)


def compare_outputs(ref, out, rel_l2_tol: dict[str, float] | None = None,
                    device: str | torch.device = "cpu") -> Comparison:
    """Compare a whole output structure (tensor arithmetic on `device`); the first failing leaf decides the message."""
    ref_leaves = list(_leaves(ref))
    out_leaves = list(_leaves(out))
    if len(ref_leaves) != len(out_leaves):
        return Comparison(False, message=f"output structure differs: expected {_describe(ref)}, got {_describe(out)}")
    worst_abs, worst_rel = 0.0, 0.0
    for (rp, rv, rn), (op, ov, on) in zip(ref_leaves, out_leaves):
        if rn is not None or on is not None:
            if rn != on or type(rv) is not type(ov) and not isinstance(rv, str):
                return Comparison(False, message=f"output structure differs at {rp}: expected {_describe(ref)}, got {_describe(out)}")
            if rv != ov:
                return Comparison(False, message=f"output structure differs at {rp}: expected {rv} of {rn}, got {ov} of {on}")
            continue
        if isinstance(rv, torch.Tensor):
            c = compare_tensor(rv, ov, rp, rel_l2_tol, device)
            if not c.passed:
                return c
            worst_abs = max(worst_abs, c.max_abs_error or 0.0)
            worst_rel = max(worst_rel, c.rel_l2_error or 0.0)
        else:
            if type(ov) is not type(rv):
                return Comparison(False, message=f"{rp}: expected {type(rv).__name__}, got {type(ov).__name__}")
            if isinstance(rv, float):
                if not math.isclose(rv, ov, rel_tol=1e-4, abs_tol=1e-4) and not (math.isnan(rv) and math.isnan(ov)):
                    return Comparison(False, message=f"{rp}: {ov!r} != expected {rv!r}")
            elif rv != ov:
                return Comparison(False, message=f"{rp}: {ov!r} != expected {rv!r}")
    return Comparison(True, worst_abs, worst_rel)


def _describe(obj) -> str:
    if isinstance(obj, torch.Tensor):
        return "Tensor"
    if isinstance(obj, (tuple, list)):
        return f"{type(obj).__name__}({', '.join(_describe(x) for x in obj)})"
    return type(obj).__name__
