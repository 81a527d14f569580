"""MooreEval's reward: a pure function of the verdict's outcome.

    s = −1                              extraction, build or execution failed, illegal fallback, or q = 0
    s = −0.5 + 0.5·q                    0 < q < 1 (partially correct)
    s = 1 + λ·min(max(ν − 1, 0), ν_max) q = 1 and legal

q is the fraction of correctness trials passed, except that q = 0 when a failed trial was one built to expose a
systematic defect (`systematic`: the precision witness, the structured zero-mean and offset-slice trials, an extra
size): such a failure is the same on every input of its kind, so the passed trials are luck of the draw, not partial
correctness (docs/reward.md). ν is the speedup over the chosen PyTorch baseline (eager by default).
A correct, legal candidate that was not timed (ν unknown) gets s = 1. An `infra_error` (the verifier failed, not the
candidate) has no score: None, so no consumer can mistake it for a failed candidate.
"""

from __future__ import annotations

import math

FAILED_STATUSES = frozenset({"extract_error", "illegal", "compile_error", "runtime_error", "timeout", "crashed"})


def kernel_reward(status: str, pass_fraction: float, legal: bool, speedup: float | None,
                  lam: float = 0.5, nu_max: float = 4.0, systematic: bool = False) -> float | None:
    """The MusaCoder score s ∈ [−1, 1 + λ·ν_max] for one verdict (formula in the module docstring); None for
    `infra_error`. `systematic`: a decisive trial failed, so q counts as 0."""
    if status == "infra_error":
        return None
    if status in FAILED_STATUSES or not legal:
        return -1.0
    q = float(pass_fraction)
    if not 0.0 <= q <= 1.0 or math.isnan(q):
        raise ValueError(f"pass_fraction must be in [0, 1], got {pass_fraction}")
    if q == 0.0 or (systematic and q < 1.0):
        return -1.0
    if q < 1.0:
        return -0.5 + 0.5 * q
    if speedup is None or not math.isfinite(speedup):
        return 1.0
    return 1.0 + lam * min(max(speedup - 1.0, 0.0), nu_max)
