"""When a timing run may stop: once the speedup it measures is known to the precision asked for.

The timing rounds are paired: round i times the candidate (c_i ms) and then the eager reference (r_i ms) on the same
inputs. The reported speedup is a ratio of medians, median(r) / median(c); the rule below stops on the precision of
the paired log-ratios d_i = ln(r_i / c_i), whose median estimates ln(speedup) and, unlike each side's mean, is not
moved by the occasional round a busy host stretches.

Distribution-free interval for the median of d (order statistics; the binomial's normal approximation):

    j = ⌊n/2 − z·√n/2⌋,  k = ⌈n/2 + z·√n/2⌉,   CI = [d_(j), d_(k)]   (1-based order statistics, clamped to 1..n)

with z = 1.96 for 95 %. The run may stop after `min_rounds` rounds once

    exp(d_(k) − d_(j)) − 1  ≤  2 · rel_halfwidth          (the interval's width as a fraction of the speedup)

and must stop at `cap_rounds` (KernelBench's 100) unless the interval is still wider than `wide` times the target
there, in which case it goes on to `max_rounds`. Every bound is in rounds, so the time spent scales with the kernel's
own run time; a wall-clock budget stays as a last resort in the caller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.96


@dataclass(frozen=True)
class StoppingRule:
    """The stopping rule's parameters (module docstring)."""

    min_rounds: int = 10
    cap_rounds: int = 100
    max_rounds: int = 200
    rel_halfwidth: float = 0.02
    wide: float = 2.0
    z: float = Z95

    def __post_init__(self):
        if not 2 <= self.min_rounds <= self.cap_rounds <= self.max_rounds:
            raise ValueError(f"need 2 <= min_rounds <= cap_rounds <= max_rounds, got {self.min_rounds}, "
                             f"{self.cap_rounds}, {self.max_rounds}")
        if not self.rel_halfwidth > 0 or not self.wide >= 1:
            raise ValueError("rel_halfwidth must be > 0 and wide >= 1")


def log_ratios(candidate_ms: list[float], reference_ms: list[float]) -> list[float]:
    """d_i = ln(r_i / c_i) over the rounds both sides timed (a non-positive time is skipped: it cannot be a ratio)."""
    return [math.log(r / c) for c, r in zip(candidate_ms, reference_ms) if c > 0 and r > 0]


def median_interval(xs: list[float], z: float = Z95) -> tuple[float, float]:
    """Distribution-free interval [x_(j), x_(k)] for the median of `xs` (module docstring); (-inf, inf) when empty."""
    n = len(xs)
    if n == 0:
        return -math.inf, math.inf
    s = sorted(xs)
    half = z * math.sqrt(n) / 2
    j = min(max(math.floor(n / 2 - half), 1), n)
    k = min(max(math.ceil(n / 2 + half), 1), n)
    return s[j - 1], s[k - 1]


def speedup_interval(candidate_ms: list[float], reference_ms: list[float], z: float = Z95) -> tuple[float, float]:
    """The interval for the speedup: exp of the median log-ratio's interval."""
    lo, hi = median_interval(log_ratios(candidate_ms, reference_ms), z)
    return math.exp(lo), math.exp(hi)


def relative_width(candidate_ms: list[float], reference_ms: list[float], z: float = Z95) -> float:
    """exp(d_(k) − d_(j)) − 1: the interval's width as a fraction of the speedup (inf with no paired rounds)."""
    lo, hi = median_interval(log_ratios(candidate_ms, reference_ms), z)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return math.inf
    return math.expm1(hi - lo)


def should_stop(candidate_ms: list[float], reference_ms: list[float], rule: StoppingRule = StoppingRule()) -> bool:
    """Whether a timing run with these paired rounds may stop (module docstring)."""
    n = min(len(candidate_ms), len(reference_ms))
    if n < rule.min_rounds:
        return False
    if n >= rule.max_rounds:
        return True
    width = relative_width(candidate_ms[:n], reference_ms[:n], rule.z)
    if width <= 2 * rule.rel_halfwidth:
        return True
    return n >= rule.cap_rounds and width <= 2 * rule.rel_halfwidth * rule.wide
