"""One conversation → token ids and loss labels: the loss is on exactly one assistant turn.

The turn is `loss_turn` (an index into `messages`) or, by default, the last assistant message. With t that index:

    prompt = chat_template(messages[:t], add_generation_prompt=True)      → labels −100 (no loss)
    target = chat_template(messages[:t+1])[len(prompt):]                  → labels = input ids
    input_ids = tokens(prompt) + tokens(target)

so system and user messages, earlier assistant turns and the feedback between them are context only, and the target
is the assistant's text with the template's end-of-turn marker (the model learns to stop). Messages after t are
dropped: under causal attention they cannot change the loss on turn t. Prompt and target are tokenized apart,
exactly as at inference, where the prompt is tokenized and the model continues it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

IGNORE_INDEX = -100  # the label `transformers` losses skip


class PromptTooLong(ValueError):
    """The prompt alone fills max_len: no target token would be trained on."""


@dataclass(frozen=True)
class TokenizedExample:
    input_ids: list[int]
    labels: list[int]  # IGNORE_INDEX outside the target turn
    prompt_len: int  # tokens before the target
    truncated: bool = False  # the target lost its end to max_len


def resolve_loss_turn(messages: Sequence[dict], loss_turn: int | None = None) -> int:
    """Index of the message that carries the loss: `loss_turn` (negative counts from the end), else the last
    assistant message. Raises ValueError when it is missing or not an assistant message."""
    if not messages:
        raise ValueError("the conversation has no messages")
    if loss_turn is None:
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].get("role") == "assistant":
                return i
        raise ValueError("the conversation has no assistant message to train on")
    t = loss_turn + len(messages) if loss_turn < 0 else loss_turn
    if not 0 <= t < len(messages):
        raise ValueError(f"loss_turn {loss_turn} is outside the conversation's {len(messages)} messages")
    if messages[t].get("role") != "assistant":
        raise ValueError(f"loss_turn {loss_turn} points at a {messages[t].get('role')!r} message; it must point at "
                         "an assistant message")
    return t


def _ids(tokenizer, text: str) -> list[int]:
    return [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]


def tokenize_example(tokenizer, messages: Sequence[dict], loss_turn: int | None = None,
                     max_len: int | None = None) -> TokenizedExample:
    """Input ids and labels of one conversation (see the module docstring). With `max_len`, the sequence keeps its
    first `max_len` tokens; PromptTooLong if the prompt alone leaves no target token."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the tokenizer has no chat template; SFT renders conversations with it. Use a chat model's "
                         "tokenizer (model.tokenizer) or set tokenizer.chat_template")
    t = resolve_loss_turn(messages, loss_turn)
    msgs = [{"role": m["role"], "content": m["content"]} for m in messages[: t + 1]]
    prompt = tokenizer.apply_chat_template(msgs[:t], tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(msgs, tokenize=False)
    if not full.startswith(prompt):
        raise ValueError("the chat template renders the conversation differently with and without its last turn "
                         "(the prompt is not a prefix), so the target turn cannot be cut out; use a template "
                         "whose rendering of earlier turns does not depend on later ones")
    prompt_ids, target_ids = _ids(tokenizer, prompt), _ids(tokenizer, full[len(prompt):])
    if not target_ids:
        raise ValueError("the target assistant turn renders to no tokens")
    input_ids = prompt_ids + target_ids
    labels = [IGNORE_INDEX] * len(prompt_ids) + target_ids
    truncated = False
    if max_len is not None and len(input_ids) > max_len:
        if len(prompt_ids) >= max_len:
            raise PromptTooLong(f"the prompt alone is {len(prompt_ids)} tokens, which leaves no target token within "
                             f"max_seq_len {max_len}")
        input_ids, labels, truncated = input_ids[:max_len], labels[:max_len], True
    return TokenizedExample(input_ids, labels, len(prompt_ids), truncated)
