"""Records of the RL data path: turns, episodes and the verl-shaped training sample.

The per-sample contract mirrors verl's agent loop output: `prompt_ids`, `response_ids`, `response_mask`
(1 = model token, 0 = feedback token), `rollout_log_probs` (0 on feedback tokens) and a reward record.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Outcome:
    """What the environment's verifier said about one response."""

    score: float  # MooreEval score s in [-1, 3] (or the toy task's score)
    passed: bool  # correct and legal
    feedback: str  # the user message for the next turn
    status: str = "ok"
    speedup: float | None = None  # over the PyTorch baseline, for a passing kernel MooreEval timed


@dataclass
class Turn:
    """One model response inside an episode, with the exact context it was sampled from."""

    context_ids: list[int]  # prompt tokens as the model saw them (earlier thinking stripped)
    response_ids: list[int]  # generated tokens, EOS included when emitted
    rollout_log_probs: list[float]  # log π_rollout of each generated token
    response_text: str
    outcome: Outcome | None = None
    feedback_ids: list[int] = field(default_factory=list)  # tokens of the feedback message that follows


@dataclass
class RewardRecord:
    """The reward of one episode and what it was made of."""

    reward: float  # R: the score for single-turn, PrimeEcho for multi-turn
    scores: list[float]
    passed: list[bool]
    statuses: list[str]
    num_turns: int
    first_pass_turn: int | None  # 1-based, None when no turn passed


@dataclass
class Sample:
    """One episode in verl's shape. `response_ids` concatenates every turn's response and the feedback between
    them; `turns` keeps each response with its own context, which the trainer uses to recompute log-probs."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    rollout_log_probs: list[float]
    reward: RewardRecord
    group: int  # index of the GRPO group inside its batch
    replay: bool = False  # built from a Buffered Dynamic Retry entry
    turns: list[Turn] = field(default_factory=list)

    def to_verl(self) -> dict:
        """The verl agent-loop fields of this sample."""
        return {
            "prompt_ids": self.prompt_ids,
            "response_ids": self.response_ids,
            "response_mask": self.response_mask,
            "response_logprobs": self.rollout_log_probs,
            "reward_score": self.reward.reward,
            "num_turns": self.reward.num_turns,
            "reward_extra_info": asdict(self.reward),
        }


def assemble_sample(turns: list[Turn], reward: RewardRecord, group: int, replay: bool = False) -> Sample:
    """Concatenate the turns of an episode into one verl-shaped sample (feedback tokens masked 0)."""
    response_ids: list[int] = []
    mask: list[int] = []
    logps: list[float] = []
    for i, t in enumerate(turns):
        response_ids += t.response_ids
        mask += [1] * len(t.response_ids)
        logps += t.rollout_log_probs
        if i + 1 < len(turns):  # feedback only between model turns
            response_ids += t.feedback_ids
            mask += [0] * len(t.feedback_ids)
            logps += [0.0] * len(t.feedback_ids)
    return Sample(
        prompt_ids=list(turns[0].context_ids), response_ids=response_ids, response_mask=mask,
        rollout_log_probs=logps, reward=reward, group=group, replay=replay, turns=turns,
    )
