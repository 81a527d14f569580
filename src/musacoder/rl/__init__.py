"""RL for kernel-writing policies: GRPO with PrimeEcho, Buffered Dynamic Retry and MirrorPop.

Pure math (`grpo`, `primeecho`, `mirrorpop`), the retry buffer, episode environments (`env`: KernelEnv over
MooreEval; `toy`: a tiny verifiable task), rollouts, and an embedded single-machine trainer (`trainer`, imported
lazily: it needs transformers). See docs/rl.md.
"""

from musacoder.rl.env import KernelEnv
from musacoder.rl.grpo import clipped_policy_loss, group_has_signal, grpo_advantages
from musacoder.rl.mirrorpop import mirrorpop_keep
from musacoder.rl.primeecho import primeecho_reward
from musacoder.rl.records import Outcome, RewardRecord, Sample, Turn
from musacoder.rl.retry import RetryBuffer, RetryEntry

__all__ = [
    "grpo_advantages",
    "group_has_signal",
    "clipped_policy_loss",
    "primeecho_reward",
    "mirrorpop_keep",
    "RetryBuffer",
    "RetryEntry",
    "KernelEnv",
    "Outcome",
    "RewardRecord",
    "Sample",
    "Turn",
]
