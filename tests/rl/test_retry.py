"""Buffered Dynamic Retry: capacity, FIFO order, replay rate."""

import random

import pytest

from musacoder.rl import RetryBuffer, RetryEntry
from musacoder.rl.retry import repair_prompt


def test_capacity_drops_the_oldest():
    buf = RetryBuffer(capacity=3, replay_prob=1.0)
    for i in range(5):
        buf.push(i)
    assert len(buf) == 3 and buf.dropped == 2
    assert buf.draw(10, random.Random(0)) == [2, 3, 4]  # at most what is there, oldest first
    assert len(buf) == 0


def test_draw_is_fifo_and_removes():
    buf = RetryBuffer(capacity=10, replay_prob=1.0)
    for i in range(6):
        buf.push(i)
    rng = random.Random(1)
    assert buf.draw(2, rng) == [0, 1]
    buf.push(6)
    assert buf.draw(3, rng) == [2, 3, 4]
    assert len(buf) == 2
    assert buf.draw(0, rng) == []


def test_replay_rate_matches_probability():
    buf = RetryBuffer(capacity=100_000, replay_prob=0.25)
    for i in range(100_000):
        buf.push(i)
    rng = random.Random(0)
    drawn = []
    for _ in range(1000):
        got = buf.draw(8, rng)
        assert len(got) <= 8
        drawn += got
    assert drawn == list(range(len(drawn)))  # still FIFO
    assert len(drawn) / 8000 == pytest.approx(0.25, abs=0.02)


def test_replay_prob_zero_never_draws_and_empty_buffer_draws_nothing():
    buf = RetryBuffer(capacity=4, replay_prob=0.0)
    buf.push("x")
    assert buf.draw(100, random.Random(0)) == []
    assert RetryBuffer(4, 1.0).draw(5, random.Random(0)) == []


def test_invalid_arguments():
    with pytest.raises(ValueError):
        RetryBuffer(0, 0.1)
    with pytest.raises(ValueError):
        RetryBuffer(4, 1.5)


def test_state_roundtrip_and_repair_prompt():
    buf = RetryBuffer(capacity=4, replay_prob=1.0)
    entry = RetryEntry(task="t", prompt="Write ReLU.", failed_response="```python\nbad\n```", feedback="wrong output")
    buf.push(entry)
    other = RetryBuffer(capacity=4, replay_prob=1.0)
    other.load_state_dict(buf.state_dict())
    assert other.draw(1, random.Random(0)) == [entry]
    text = repair_prompt(entry)
    assert text.startswith("Write ReLU.") and "bad" in text and "wrong output" in text
