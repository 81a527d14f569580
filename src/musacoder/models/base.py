"""The one interface every model client implements, and the records it exchanges.

A client turns a batch of chat requests into completions and yields each `(request, completion)` pair as soon as
it is ready (any order), so the runner can write responses as they arrive. A completion whose `text` is None means
"no response" (an endpoint that kept failing, a missing pre-generated file); `error` says why.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Sampling:
    """Decoding settings shared by all clients."""

    temperature: float = 0.7  # the paper's evaluation temperature
    top_p: float = 1.0
    max_tokens: int = 16384  # new tokens per response


@dataclass(frozen=True)
class ChatRequest:
    """One generation: a conversation plus where its answer belongs (task, sample, 1-based turn)."""

    id: str
    messages: tuple[dict[str, str], ...]  # [{"role": "system"|"user"|"assistant", "content": ...}, ...]
    task: str  # task name, e.g. "19_ReLU"
    level: int | None = None
    sample: int = 0
    turn: int = 1
    seed: int | None = None  # per-request seed where the backend supports one


@dataclass
class Completion:
    text: str | None
    error: str | None = None
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


class ModelClient(Protocol):
    """A source of responses. `generate` yields every request exactly once."""

    name: str

    def generate(self, requests: Sequence[ChatRequest], sampling: Sampling) -> Iterator[tuple[ChatRequest, Completion]]:
        ...

    def close(self) -> None:
        ...


def join_reasoning(content: str | None, reasoning: str | None) -> str | None:
    """Keep a separately returned reasoning trace in the raw response as a `<think>` block (stripped later)."""
    if reasoning and content is not None and "<think>" not in content:
        return f"<think>\n{reasoning}\n</think>\n{content}"
    return content
