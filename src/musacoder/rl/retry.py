"""Buffered Dynamic Retry: a bounded FIFO of prompts whose whole group failed, replayed as feedback-repair tasks."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Any


@dataclass
class RetryEntry:
    """One failed group, kept for a later repair attempt."""

    task: Any  # the task object the environment resets on (a `Task` for KernelEnv)
    prompt: str  # the prompt the group was given
    failed_response: str  # the failed answer shown back to the model (the group's best-scoring one)
    feedback: str  # the verifier's feedback on that answer
    score: float = -1.0  # its score
    replays: int = 0  # how often this prompt has already been replayed


class RetryBuffer:
    """Bounded FIFO of `RetryEntry`s.

    `push` appends; when the buffer is full the oldest entry is dropped (counted in `dropped`). `draw(n, rng)` fills
    each of n batch slots, independently with probability `replay_prob`, by the oldest entry still buffered, and
    returns those entries (removed from the buffer): at most n, fewer when the coin says no or the buffer runs dry.
    """

    def __init__(self, capacity: int, replay_prob: float):
        if capacity < 1:
            raise ValueError(f"RetryBuffer capacity must be >= 1, got {capacity}")
        if not 0.0 <= replay_prob <= 1.0:
            raise ValueError(f"RetryBuffer replay_prob must be in [0, 1], got {replay_prob}")
        self.capacity = capacity
        self.replay_prob = replay_prob
        self._entries: deque = deque()
        self.pushed = 0
        self.dropped = 0
        self.drawn = 0

    def push(self, entry) -> None:
        if len(self._entries) >= self.capacity:
            self._entries.popleft()
            self.dropped += 1
        self._entries.append(entry)
        self.pushed += 1

    def draw(self, n: int, rng: random.Random) -> list:
        out = []
        for _ in range(n):
            if not self._entries:
                break
            if rng.random() < self.replay_prob:
                out.append(self._entries.popleft())
        self.drawn += len(out)
        return out

    def __len__(self) -> int:
        return len(self._entries)

    def state_dict(self) -> dict:
        return {"entries": list(self._entries), "pushed": self.pushed, "dropped": self.dropped, "drawn": self.drawn}

    def load_state_dict(self, state: dict) -> None:
        self._entries = deque(state["entries"][-self.capacity:])
        self.pushed, self.dropped, self.drawn = state["pushed"], state["dropped"], state["drawn"]


def repair_prompt(entry: RetryEntry) -> str:
    """The feedback-repair prompt for a replayed entry: the original prompt, the failed answer, its feedback."""
    return (
        f"{entry.prompt}\n\nA previous answer to this task failed:\n\n{entry.failed_response.strip()}\n\n"
        f"{entry.feedback.strip()}\n\nWrite a corrected answer.\n"
    )
