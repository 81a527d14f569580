"""Benchmark metrics: pure functions over per-sample outcomes. No I/O.

Notation for one task: n evaluated samples, c of them passing (MooreEval status `ok`: compiled, correct on every
trial, legal). A sample's speedup s is MooreEval's `speedup_vs_eager` (or `speedup_vs_compile`); a sample without a
timing counts as not faster.

- Pass@k  = mean over tasks of 1 − C(n−c, k) / C(n, k)   (the unbiased estimator; = 1 if n − c < k)
- Avg@k   = mean over tasks of c / n                     (share of passing samples)
- Faster rate (vs eager, vs torch.compile) at threshold τ (1.1 by default)
          = mean over tasks of |{samples passing with s > τ}| / n
- fast_p  = mean over tasks of |{samples passing with s > p}| / n, for p ∈ {0, 0.5, 0.8, 1, 1.2, 1.5, 2}
            (speedups vs eager; fast_0 counts every passing sample, so fast_0 = Avg@k)
- Geomean speedup = exp(mean(log s)) over all passing samples that have a timing (vs eager)
- Turns to success = mean over passing samples of the first passing turn (1-based)

Every task weighs the same ("overall" is over all tasks, not a mean of level means). A multi-turn sample is scored
at its best turn (the passing turn with the largest speedup vs eager, the earliest on ties; the last turn if none
passes) and, separately, at its first turn. A task listed without any sample counts as failed (n = 0 → 0).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

FAST_P_THRESHOLDS: tuple[float, ...] = (0.0, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0)
FASTER_THRESHOLD = 1.1


@dataclass(frozen=True)
class TurnScore:
    """What the metrics need from one verdict."""

    passed: bool
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None


@dataclass(frozen=True)
class SampleOutcome:
    """One sample (a trajectory of ≥ 1 turns) of one task."""

    task: str
    group: str  # "level1", "level2", … or the suite name for tasks without a level
    turns: tuple[TurnScore, ...]

    @property
    def first(self) -> TurnScore:
        return self.turns[0]

    @property
    def best(self) -> TurnScore:
        return self.turns[best_turn_index(self.turns)]

    @property
    def turns_to_success(self) -> int | None:
        return next((i + 1 for i, t in enumerate(self.turns) if t.passed), None)


def best_turn_index(turns: Sequence[TurnScore]) -> int:
    """Index of the passing turn with the largest eager speedup (earliest on ties); the last turn if none passes."""
    passing = [i for i, t in enumerate(turns) if t.passed]
    if not passing:
        return len(turns) - 1
    return max(passing, key=lambda i: (turns[i].speedup_vs_eager or 0.0, -i))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased Pass@k: 1 − C(n−c, k)/C(n, k). Needs 0 ≤ c ≤ n; for n < k it is the plain Pass@n (1 if c > 0)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n == 0:
        return 0.0
    if n < k:
        return 1.0 if c > 0 else 0.0
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def share_faster(scores: Sequence[TurnScore], threshold: float, vs: str = "eager") -> float:
    """Share of samples that pass and whose speedup (vs `eager` or `compile`) is above `threshold`.
    With threshold 0 every passing sample counts, timed or not."""
    if not scores:
        return 0.0
    hits = 0
    for s in scores:
        speedup = s.speedup_vs_eager if vs == "eager" else s.speedup_vs_compile
        if s.passed and (threshold <= 0 or (speedup is not None and speedup > threshold)):
            hits += 1
    return hits / len(scores)


def geomean(values: Iterable[float]) -> float | None:
    """exp(mean(log v)) over positive values; None when there are none."""
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def score_block(per_task: Sequence[Sequence[TurnScore]], k: int, threshold: float = FASTER_THRESHOLD,
                ps: Sequence[float] = FAST_P_THRESHOLDS, compile_timed: bool | None = None) -> dict:
    """The leaderboard metrics over tasks, each given as the list of its samples' scores (one turn per sample).

    `faster_rate_compile` is None when the torch.compile baseline was not timed (`compile_timed` False; None =
    infer: timed if any sample has a compile speedup)."""
    n_c = [(len(s), sum(t.passed for t in s)) for s in per_task]
    if compile_timed is None:
        compile_timed = any(t.speedup_vs_compile is not None for s in per_task for t in s)
    compile_rate = _mean([share_faster(s, threshold, "compile") for s in per_task]) if compile_timed else None
    passing_speedups = [t.speedup_vs_eager for s in per_task for t in s if t.passed and t.speedup_vs_eager]
    return {
        "pass_at_k": _mean([pass_at_k(n, c, k) for n, c in n_c]),
        "avg_at_k": _mean([c / n if n else 0.0 for n, c in n_c]),
        "faster_rate_eager": _mean([share_faster(s, threshold, "eager") for s in per_task]),
        "faster_rate_compile": compile_rate,
        "fast_p": {_p_key(p): _mean([share_faster(s, p, "eager") for s in per_task]) for p in ps},
        "geomean_speedup": geomean(passing_speedups),
    }


def _p_key(p: float) -> str:
    """JSON key of fast_p: "0.0", "0.5", …, "2.0"."""
    return str(float(p))


def summarize(outcomes: Iterable[SampleOutcome], k: int, *, tasks: dict[str, str] | None = None,
              threshold: float = FASTER_THRESHOLD, ps: Sequence[float] = FAST_P_THRESHOLDS,
              compile_timed: bool | None = None) -> dict:
    """Metrics per group and `overall`. `tasks` maps every task of the suite to its group, so tasks without any
    sample count as failures. Each block: the best-turn metrics at the top level (see `score_block`), `first_turn`
    (the same metrics on first-turn responses), sample/task counts and turns-to-success statistics."""
    by_task: dict[str, list[SampleOutcome]] = defaultdict(list)
    group_of: dict[str, str] = dict(tasks or {})
    for o in outcomes:
        by_task[o.task].append(o)
        group_of.setdefault(o.task, o.group)
    groups: dict[str, list[str]] = defaultdict(list)
    for task, group in group_of.items():
        groups[group].append(task)

    def block(task_names: list[str]) -> dict:
        samples = [by_task.get(t, []) for t in task_names]
        flat = [o for s in samples for o in s]
        best = score_block([[o.best for o in s] for s in samples], k, threshold, ps, compile_timed)
        first = score_block([[o.first for o in s] for s in samples], k, threshold, ps, compile_timed)
        tts = [o.turns_to_success for o in flat if o.turns_to_success is not None]
        hist: dict[str, int] = {}
        for t in sorted(tts):
            hist[str(t)] = hist.get(str(t), 0) + 1
        return {
            **best,
            "first_turn": first,
            "n_tasks": len(task_names),
            "n_samples": len(flat),
            "tasks_short_of_k": sum(1 for s in samples if len(s) < k),
            "mean_turns_to_success": _mean(tts) if tts else None,
            "turns_to_success_hist": hist,
        }

    out = {g: block(sorted(names)) for g, names in sorted(groups.items(), key=lambda kv: _group_order(kv[0]))}
    out["overall"] = block(sorted(group_of))
    return out


def _group_order(group: str) -> tuple[int, str]:
    if group.startswith("level") and group[5:].isdigit():
        return (int(group[5:]), group)
    return (1 << 30, group)
