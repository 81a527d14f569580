"""GRPO math: group-normalised advantages and the clipped, token-mean policy loss. Pure functions over tensors."""

from __future__ import annotations

import torch


def grpo_advantages(rewards, eps: float = 1e-6) -> torch.Tensor:
    """Group-normalised advantages.

    `rewards` is shaped [num_groups, group_size]; for group g and sample i:

        A_{g,i} = (r_{g,i} − mean_g(r)) / (std_g(r) + eps)

    with `std` the unbiased (Bessel-corrected) standard deviation, as `torch.std`. A group whose rewards are all
    equal gives zeros (its numerator is zero); so does a group of size 1 (its std is undefined).
    """
    r = torch.as_tensor(rewards, dtype=torch.float32)
    if r.dim() != 2:
        raise ValueError(f"rewards must be shaped [num_groups, group_size], got {tuple(r.shape)}")
    centred = r - r.mean(dim=1, keepdim=True)
    if r.shape[1] < 2:
        return torch.zeros_like(r)
    return centred / (r.std(dim=1, keepdim=True) + eps)


def group_has_signal(rewards, tol: float = 0.0) -> torch.Tensor:
    """bool [num_groups]: True where a group's rewards are not all equal (max − min > tol).

    Groups without signal have zero advantage everywhere and are dropped from the loss."""
    r = torch.as_tensor(rewards, dtype=torch.float32)
    return (r.max(dim=1).values - r.min(dim=1).values) > tol


def masked_token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Σ values·mask / Σ mask over every token of the batch (token-mean); 0 when the mask is empty."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp_min(1.0)


def kl_k3(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """Per-token estimate of KL(π_θ ‖ π_ref) from samples of π_θ (the "k3" estimator):

        k3 = exp(log π_ref − log π_θ) − (log π_ref − log π_θ) − 1   (≥ 0, unbiased)
    """
    d = ref_log_probs - log_probs
    return torch.exp(d) - d - 1.0


def clipped_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    ref_log_probs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    normaliser: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-mean GRPO loss with asymmetric clipping.

    Tensors are [B, T]; `advantages` is [B] (one value per sequence) or [B, T]. With ρ_t = exp(log π_θ − log π_old):

        ℓ_t = max(−A·ρ_t, −A·clip(ρ_t, 1 − clip_low, 1 + clip_high)) + kl_coef · k3_t
        loss = Σ_t ℓ_t·m_t / N      (m = loss_mask, summed over the whole batch; N = Σ_t m_t, or `normaliser`)

    `normaliser` lets a micro batch of a larger minibatch divide by the minibatch's token count, so the micro
    batches' gradients add up to the minibatch's.

    Returns the loss and detached statistics: `clip_frac` (share of masked tokens where the clipped branch is the
    active one), `kl` (token-mean k3, 0 without a reference) and `ratio_mean`.
    """
    adv = advantages if advantages.dim() == 2 else advantages[:, None]
    log_ratio = log_probs - old_log_probs
    ratio = torch.exp(log_ratio)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    kl_value = torch.zeros((), dtype=log_probs.dtype)
    if ref_log_probs is not None and kl_coef != 0.0:
        kl = kl_k3(log_probs, ref_log_probs)
        per_token = per_token + kl_coef * kl
        kl_value = masked_token_mean(kl.detach(), loss_mask)
    if normaliser is None:
        loss = masked_token_mean(per_token, loss_mask)
    else:
        loss = (per_token * loss_mask.to(per_token.dtype)).sum() / normaliser
    with torch.no_grad():
        clip_frac = masked_token_mean((clipped > unclipped).to(log_probs.dtype), loss_mask)
        ratio_mean = masked_token_mean(ratio, loss_mask)
    return loss, {"clip_frac": float(clip_frac), "kl": float(kl_value), "ratio_mean": float(ratio_mean)}
