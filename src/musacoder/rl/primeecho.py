"""PrimeEcho: the first-turn-anchored reward of a multi-turn episode. Pure function."""

from __future__ import annotations

from collections.abc import Sequence


def primeecho_reward(
    scores: Sequence[float],
    passed: Sequence[bool],
    alpha: float = 0.75,
    bonus: Sequence[float] = (0.2, 0.1),
) -> float:
    """Reward of one multi-turn episode, anchored on its first turn.

        R = α · s_1 + (1 − α) · max_k s_k + b_early

    `scores` are MooreEval scores s_k of the turns in order, `passed` whether each turn passed. `b_early` is
    `bonus[k-1]` when the first passing turn is turn k and k ≤ len(bonus) (defaults: b₁ = 0.2 for a pass at turn 1,
    b₂ = 0.1 at turn 2), else 0. The policy-gradient loss then uses the first-turn response only: later turns only
    shape R.
    """
    if len(scores) == 0:
        raise ValueError("primeecho_reward needs the score of at least one turn")
    if len(passed) != len(scores):
        raise ValueError(f"scores and passed differ in length: {len(scores)} vs {len(passed)}")
    early = 0.0
    for k, ok in enumerate(passed):
        if ok:
            early = float(bonus[k]) if k < len(bonus) else 0.0
            break
    return alpha * float(scores[0]) + (1.0 - alpha) * max(float(s) for s in scores) + early
