"""The toy task's harder options: ascending answers, prefix and binary credit, positional feedback, reward noise."""

import pytest
import torch

from musacoder.rl.config import EnvConfig
from musacoder.rl.retry import RetryEntry
from musacoder.rl.toy import ToyEnv, ToyTask, noisy_score, toy_feedback, toy_score, toy_tasks, toy_tasks_from_config


def test_defaults_keep_the_repeat_task():
    task = ToyTask("c")
    assert task.answer == "ccc" and not task.noisy
    assert toy_score(task, "cxc") == (2 / 3, False)
    assert toy_feedback(task, "cxc") == "|c="
    assert toy_tasks_from_config(EnvConfig(kind="toy")) == toy_tasks()


def test_ascend_cycles_through_the_letters():
    assert ToyTask("c", 6, pattern="ascend").answer == "cdefgh"
    assert ToyTask("g", 4, pattern="ascend").answer == "ghab"
    assert [t.answer for t in toy_tasks("xyz", 4, pattern="ascend")] == ["xyzx", "yzxy", "zxyz"]


@pytest.mark.parametrize("credit, response, expected", [
    ("share", "cdxf", (0.75, False)),
    ("prefix", "cdxf", (0.5, False)),
    ("prefix", "xdef", (0.0, False)),
    ("binary", "cdxf", (0.0, False)),
    ("binary", "cdef", (1.0, True)),
    ("prefix", "cdef", (1.0, True)),
    ("share", "cd", (0.5, False)),
    ("prefix", "<think>x</think> cdefab", (1.0, True)),  # thinking stripped, the tail ignored
])
def test_credit(credit, response, expected):
    assert toy_score(ToyTask("c", 4, pattern="ascend", credit=credit), response) == expected


def test_positions_feedback_shows_the_right_letter_at_each_wrong_position():
    task = ToyTask("c", 6, pattern="ascend", feedback="positions")
    assert toy_feedback(task, "cdxfgy") == "|  e  h|c="
    assert toy_feedback(task, "cd") == "|  efgh|c="
    env = ToyEnv(max_turns=3)
    env.reset(task)
    feedback, score, done = env.step("cdxfgy")
    assert (feedback, done) == ("|  e  h|c=", False)
    assert env.messages[-1]["content"] == "|  e  h|c="
    # a second turn that applies the hint passes
    assert env.step("cdefgh")[1:] == (1.0, True)
    entry = RetryEntry(task=task, prompt="c=", failed_response="cdxfgy", feedback="|  e  h|c=")
    assert env.repair_prompt(entry) == "cdxfgy|  e  h|c="


def test_noisy_score_formula():
    assert noisy_score(0.25, 0.1, 0.0, u=0.05, z=0.0) == 0.75  # flipped: 1 − s
    assert noisy_score(0.25, 0.1, 0.0, u=0.5, z=0.0) == 0.25
    assert noisy_score(0.25, 0.0, 0.2, u=0.0, z=-1.5) == pytest.approx(-0.05)  # flip_prob 0 never flips


def test_noise_changes_the_reward_but_not_the_pass():
    task = ToyTask("c", 3, flip_prob=1.0)
    outcome = ToyEnv().evaluate(task, "ccc")
    assert (outcome.score, outcome.passed, outcome.status) == (0.0, True, "ok")
    torch.manual_seed(0)
    noisy = ToyTask("c", 3, flip_prob=0.3, score_noise=0.1)
    scores = [ToyEnv().evaluate(noisy, "cxc").score for _ in range(400)]
    flipped = sum(s < 0.5 for s in scores) / len(scores)
    assert 0.2 < flipped < 0.4, flipped  # about flip_prob of 2/3 → 1/3
    assert len(set(scores)) > 100  # Gaussian noise on top
    torch.manual_seed(0)
    assert [ToyEnv().evaluate(noisy, "cxc").score for _ in range(400)] == scores  # repeatable under a seed


def test_noise_free_tasks_draw_no_random_numbers():
    torch.manual_seed(0)
    expected = torch.rand(()).item()
    torch.manual_seed(0)
    ToyEnv().evaluate(ToyTask("c"), "cxc")  # the default task must not shift the trainer's random stream
    assert torch.rand(()).item() == expected


def test_config_fields_reach_the_tasks():
    env = EnvConfig(kind="toy", toy_letters="ab", toy_length=5, toy_pattern="ascend", toy_credit="prefix",
                    toy_feedback="positions", toy_flip_prob=0.1, toy_score_noise=0.05)
    tasks = toy_tasks_from_config(env)
    assert [t.answer for t in tasks] == ["ababa", "babab"]
    assert {(t.credit, t.feedback, t.flip_prob, t.score_noise) for t in tasks} == {("prefix", "positions", 0.1, 0.05)}


@pytest.mark.parametrize("bad", [{"pattern": "zigzag"}, {"credit": "half"}, {"feedback": "all"},
                                 {"flip_prob": 1.5}, {"score_noise": -1.0}])
def test_bad_options_are_refused(bad):
    with pytest.raises(ValueError):
        ToyTask("c", **bad)
