"""Hand-computed values for the RL formulas: GRPO advantages and loss, PrimeEcho, MirrorPop."""

import math

import pytest
import torch

from musacoder.rl import clipped_policy_loss, group_has_signal, grpo_advantages, mirrorpop_keep, primeecho_reward
from musacoder.rl.grpo import kl_k3


# --- GRPO advantages ----------------------------------------------------------------------------------------------

def test_advantages_hand_computed():
    # group 1: mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = sqrt(1/3); group 2: mean 1, std 1
    a = grpo_advantages([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 2.0, 1.0]], eps=0.0)
    s = 0.5 / math.sqrt(1 / 3)  # 0.8660254
    assert a[0].tolist() == pytest.approx([s, -s, -s, s], abs=1e-6)
    std2 = math.sqrt((1 + 0 + 1 + 0) / 3)
    assert a[1].tolist() == pytest.approx([-1 / std2, 0.0, 1 / std2, 0.0], abs=1e-6)


def test_advantages_eps_and_torch_std():
    r = torch.tensor([[0.0, 1.0, 2.0]])  # std = 1 (unbiased)
    assert grpo_advantages(r).tolist()[0] == pytest.approx([-1 / (1 + 1e-6), 0.0, 1 / (1 + 1e-6)])
    r = torch.randn(5, 8)
    expected = (r - r.mean(1, keepdim=True)) / (torch.std(r, dim=1, keepdim=True) + 1e-6)
    torch.testing.assert_close(grpo_advantages(r), expected)


def test_all_equal_groups_give_zeros_and_no_signal():
    r = [[-1.0, -1.0, -1.0], [0.5, 0.5, 0.5], [1.0, -1.0, 1.0]]
    a = grpo_advantages(r)
    assert a[0].tolist() == [0.0, 0.0, 0.0] and a[1].tolist() == [0.0, 0.0, 0.0]
    assert group_has_signal(r).tolist() == [False, False, True]


def test_advantages_shape_checked():
    with pytest.raises(ValueError):
        grpo_advantages([1.0, 2.0])


# --- GRPO loss ----------------------------------------------------------------------------------------------------

def test_clipped_loss_asymmetric_clip_hand_computed():
    # sequence 0: A = +1, ratio 1.5 -> clipped at 1 + 0.28: -1.28.  sequence 1: A = -1, ratio 0.5 -> clipped at
    # 1 - 0.2: +0.8.  A third token of sequence 1 is masked out.  token-mean: (-1.28 + 0.8) / 2 = -0.24
    logp = torch.log(torch.tensor([[1.5, 1.0], [0.5, 3.0]]))
    old = torch.zeros(2, 2)
    mask = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    loss, stats = clipped_policy_loss(logp, old, torch.tensor([1.0, -1.0]), mask, 0.2, 0.28)
    assert float(loss) == pytest.approx(-0.24, abs=1e-6)
    assert stats["clip_frac"] == pytest.approx(1.0)


def test_clipped_loss_inside_the_trust_region_is_plain_pg():
    # ratio 1.1 with A = 2: -2.2 and ratio 0.9 with A = -1: +0.9 -> mean -0.65, nothing clipped
    logp = torch.log(torch.tensor([[1.1, 0.9]]))
    loss, stats = clipped_policy_loss(logp, torch.zeros(1, 2), torch.tensor([[2.0, -1.0]]), torch.ones(1, 2))
    assert float(loss) == pytest.approx(-0.65, abs=1e-6)
    assert stats["clip_frac"] == 0.0


def test_kl_k3_hand_computed_and_in_loss():
    # log π = log 0.5, log π_ref = log 0.25: d = log 0.5; exp(d) - d - 1 = 0.5 + ln 2 - 1 = 0.1931472
    lp, ref = torch.log(torch.tensor([[0.5]])), torch.log(torch.tensor([[0.25]]))
    assert float(kl_k3(lp, ref)) == pytest.approx(0.5 + math.log(2) - 1, abs=1e-6)
    loss, stats = clipped_policy_loss(lp, lp.clone(), torch.tensor([0.0]), torch.ones(1, 1), ref_log_probs=ref,
                                      kl_coef=0.1)
    assert float(loss) == pytest.approx(0.1 * (0.5 + math.log(2) - 1), abs=1e-6)
    assert stats["kl"] == pytest.approx(0.5 + math.log(2) - 1, abs=1e-6)


# --- PrimeEcho ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "scores, passed, expected",
    [
        ([1.5], [True], 0.75 * 1.5 + 0.25 * 1.5 + 0.2),  # pass at turn 1: 1.7
        ([-1.0, 2.0], [False, True], 0.75 * -1 + 0.25 * 2 + 0.1),  # first pass at turn 2: -0.15
        ([-1.0, -0.5, 1.2], [False, False, True], 0.75 * -1 + 0.25 * 1.2),  # turn 3: no bonus, -0.45
        ([-1.0, -1.0, -1.0], [False, False, False], -1.0),
        ([-0.5, 0.25, -1.0], [False, False, False], 0.75 * -0.5 + 0.25 * 0.25),  # max over all turns: -0.3125
    ],
)
def test_primeecho_hand_computed(scores, passed, expected):
    assert primeecho_reward(scores, passed) == pytest.approx(expected)


def test_primeecho_configurable():
    assert primeecho_reward([0.0, 2.0], [False, True], alpha=0.5, bonus=(1.0, 0.5)) == pytest.approx(1.0 + 0.5)
    assert primeecho_reward([2.0], [True], alpha=1.0, bonus=()) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        primeecho_reward([], [])


# --- MirrorPop ----------------------------------------------------------------------------------------------------

def test_mirrorpop_pops_cancelling_drift_that_the_signed_rule_keeps():
    rollout = torch.zeros(4, 4)
    train = torch.tensor([
        [0.5, -0.5, 0.5, -0.5],  # signed mean 0, |mean| 0.5: abs pops, signed keeps
        [0.05, -0.05, 0.1, 0.0],  # |mean| 0.05 ≤ 0.1: both keep
        [0.3, 0.3, 9.0, 9.0],  # masked drift (last two) ignored; mean 0.3: both pop
        [7.0, -7.0, 7.0, -7.0],  # no response tokens: kept
    ])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]])
    assert mirrorpop_keep(train, rollout, mask, 0.1).tolist() == [False, True, False, True]
    assert mirrorpop_keep(train, rollout, mask, 0.1, mode="signed").tolist() == [True, True, False, True]


def test_mirrorpop_threshold_is_inclusive_and_uses_rollout_logprobs():
    rollout = torch.tensor([[-1.0, -2.0]])
    train = torch.tensor([[-1.25, -1.75]])  # log ρ = -0.25, +0.25: abs mean 0.25
    mask = torch.ones(1, 2)
    assert mirrorpop_keep(train, rollout, mask, 0.25).tolist() == [True]
    assert mirrorpop_keep(train, rollout, mask, 0.2499).tolist() == [False]
    assert mirrorpop_keep(train, rollout, mask, 0.0, mode="signed").tolist() == [True]
    with pytest.raises(ValueError):
        mirrorpop_keep(train, rollout, mask, 0.1, mode="max")
