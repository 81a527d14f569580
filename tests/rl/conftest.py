"""Shared fixtures of the RL tests: a small kernel task and a fake MooreEval verifier (no builds)."""

import threading

import pytest

from musacoder.records import Task, Verdict

RELU_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


n = 64


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
'''


class FakeVerifier:
    """Scores by keyword: a response containing "PASS" passes (score 1.5), "HALF" is half-correct (−0.25),
    anything else fails to extract (−1). Records every call; thread-safe."""

    def __init__(self, always_fail: set[str] = frozenset()):
        self.calls: list[tuple[str, str, dict]] = []
        self.always_fail = set(always_fail)
        self._lock = threading.Lock()

    def __call__(self, task, candidate, backend=None, overrides=None, config=None) -> Verdict:
        with self._lock:
            self.calls.append((task.name, candidate, {"backend": backend, "overrides": overrides}))
        if task.name not in self.always_fail and "PASS" in candidate:
            return Verdict(status="ok", compiled=True, legal=True, correct=True, pass_fraction=1.0, speedup=1.0,
                           reward=1.5, feedback="all trials passed")
        if task.name not in self.always_fail and "HALF" in candidate:
            return Verdict(status="incorrect", compiled=True, legal=True, pass_fraction=0.5, reward=-0.25,
                           feedback="2/4 trials passed")
        return Verdict(status="extract_error", reward=-1.0, feedback="no code found")


@pytest.fixture
def relu_task() -> Task:
    return Task(name="1_ReLU", level=1, problem_id=1, source=RELU_SOURCE)


@pytest.fixture
def fake_verifier() -> FakeVerifier:
    return FakeVerifier()
