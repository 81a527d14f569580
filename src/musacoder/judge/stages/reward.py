"""The last stage, whatever stopped the others: the verdict's status, the stages never reached marked skipped, the
reward (`musacoder.reward.kernel_reward`) and the feedback text for the model (`musacoder.feedback`)."""

from __future__ import annotations

from musacoder.feedback import render_feedback
from musacoder.judge.stages.context import RunContext
from musacoder.records import Verdict
from musacoder.reward import kernel_reward

STAGES = ("extract", "static_legality", "build", "binary_legality", "correctness", "runtime_legality", "timing")


def finish(ctx: RunContext, status: str) -> Verdict:
    """Give the verdict `status`, its reward and feedback; returns it."""
    v, cfg = ctx.verdict, ctx.cfg
    v.status = status
    for stage in STAGES:
        v.stages.setdefault(stage, "skipped")
    if status != "ok":
        v.correct = v.correct and status not in ("incorrect",)
    if status in ("illegal",):
        v.legal = False
    v.reward = kernel_reward(status, v.pass_fraction, v.legal, v.speedup, cfg.reward_lambda, cfg.reward_nu_max,
                             systematic=v.systematic_defect is not None)
    v.stages["reward"] = "ok" if v.reward is not None else "skipped"
    v.feedback = render_feedback(v)
    return v
