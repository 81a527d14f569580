"""MirrorPop: off-policy sequence filtering by the mean absolute token log-ratio. Pure functions over tensors."""

from __future__ import annotations

from typing import Literal

import torch


def sequence_log_ratio_stats(
    train_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, response_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sequence, over its response tokens (mask 1), with log ρ_t = log π_train − log π_rollout:

        abs_mean_i    = Σ_t |log ρ_{i,t}| m_{i,t} / Σ_t m_{i,t}
        signed_mean_i = Σ_t  log ρ_{i,t}  m_{i,t} / Σ_t m_{i,t}

    Both are 0 for a sequence without response tokens. Returns (abs_mean [B], signed_mean [B]).
    """
    m = response_mask.to(train_logprobs.dtype)
    log_rho = (train_logprobs - rollout_logprobs) * m
    n = m.sum(dim=-1).clamp_min(1.0)
    return log_rho.abs().sum(dim=-1) / n, log_rho.sum(dim=-1) / n


def mirrorpop_keep(
    train_logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    delta: float,
    mode: Literal["abs", "signed"] = "abs",
) -> torch.Tensor:
    """Which sequences stay in the loss (bool [B]); tensors are [B, T].

    With log ρ_{i,t} = log π_train − log π_rollout over the response tokens of sequence i,

        mode="abs"    (MirrorPop):  keep_i ⇔ mean_t |log ρ_{i,t}| ≤ δ
                      equivalently  mean_t log m_{i,t} ≤ δ with m = max(ρ, 1/ρ) = exp(|log ρ|)
        mode="signed" (the signed-mean sequence mask MirrorPop replaces):  keep_i ⇔ |mean_t log ρ_{i,t}| ≤ δ

    The signed rule lets positive and negative drift cancel (a sequence with log ρ = +1, −1 has signed mean 0 and
    is kept); the absolute rule pops it. A sequence without response tokens is kept (it carries no loss anyway).
    """
    abs_mean, signed_mean = sequence_log_ratio_stats(train_logprobs, rollout_logprobs, response_mask)
    if mode == "abs":
        return abs_mean <= delta
    if mode == "signed":
        return signed_mean.abs() <= delta
    raise ValueError(f"mirrorpop mode must be 'abs' or 'signed', got {mode!r}")
