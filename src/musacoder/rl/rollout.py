"""Rollouts: sample responses with their log-probs, and drive batches of multi-turn episodes.

Generation runs in chunks; each chunk's verifications are submitted to the environment's pool as soon as the chunk
is decoded, so builds overlap with generating the next chunk. Log-probs are those of softmax(logits / T) at the
sampled token — the same quantity the trainer recomputes, so their difference is pure policy drift.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from musacoder.rl.records import Turn


def render_context(tokenizer, messages: Sequence[dict]) -> list[int]:
    """Token ids of the conversation so far, ready for the next assistant turn.

    With a chat template: `apply_chat_template(..., add_generation_prompt=True)`. Without one (CharTokenizer):
    the plain concatenation of the messages, each assistant message followed by a newline.
    """
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):  # a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]
    text = "".join(m["content"] + ("\n" if m["role"] == "assistant" else "") for m in messages)
    return tokenizer.encode(text, add_special_tokens=False)


def _cut_at_eos(ids: list[int], logps: list[float], eos_ids: set[int]) -> tuple[list[int], list[float]]:
    for i, t in enumerate(ids):
        if t in eos_ids:
            return ids[: i + 1], logps[: i + 1]
    return ids, logps


def _eos_set(tokenizer, model) -> set[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return ids


class _TokenLogProbs:
    """A logits processor placed before every sampling warper: it sees each step's raw logits z and, one step later
    (when the sampled token has joined `input_ids`), records log softmax(z / T) at that token. Holds one step's
    [batch, vocab] log-probs at a time, never the whole response's logits; `finish` adds the last token's."""

    def __init__(self, temperature: float):
        self.temperature = temperature
        self.prev: torch.Tensor | None = None
        self.picked: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.prev is not None:
            self.picked.append(self.prev.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self.prev = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, new_tokens: torch.Tensor) -> torch.Tensor:
        """[batch, new tokens] log-probs of `new_tokens` (the generated part of the sequences)."""
        if self.prev is not None and len(self.picked) < new_tokens.shape[1]:
            self.picked.append(self.prev.gather(-1, new_tokens[:, len(self.picked):len(self.picked) + 1]).squeeze(-1))
        self.prev = None
        if not self.picked:
            return torch.zeros(new_tokens.shape, dtype=torch.float32)
        return torch.stack(self.picked, dim=1)[:, : new_tokens.shape[1]]


class HFGenerator:
    """Sampling with `transformers` `generate` on the policy being trained; `temperature` 0 decodes greedily
    (evaluation), and its log-probs are then those of softmax(logits).

    The sampling chain is passed explicitly — record the log-prob (`_TokenLogProbs`), then temperature, then top-p
    — and `generate` is given temperature 1, top-p 1 and top-k 0 so it adds no warper of its own: the recorded
    log-probs are of softmax(raw logits / T), whatever the model's generation config says, and no step's logits are
    kept beyond the next step."""

    def __init__(self, model, tokenizer, temperature: float, top_p: float, max_new_tokens: int):
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos_ids = _eos_set(tokenizer, model)

    def _processors(self, recorder: _TokenLogProbs):
        from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

        chain = [recorder]
        if self.temperature > 0:
            chain.append(TemperatureLogitsWarper(self.temperature))
            if self.top_p < 1.0:
                chain.append(TopPLogitsWarper(self.top_p))
        return LogitsProcessorList(chain)

    @torch.no_grad()
    def generate(self, contexts: Sequence[list[int]]) -> list[tuple[list[int], list[float]]]:
        """For each context: (response ids, EOS included when emitted; rollout log-prob of each)."""
        device = next(self.model.parameters()).device
        width = max(len(c) for c in contexts)
        input_ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(contexts), width), dtype=torch.long)
        for i, c in enumerate(contexts):  # left padding: every row ends where generation starts
            input_ids[i, width - len(c):] = torch.tensor(c, dtype=torch.long)
            attention[i, width - len(c):] = 1
        was_training = self.model.training
        self.model.eval()
        greedy = self.temperature == 0
        recorder = _TokenLogProbs(self.temperature or 1.0)
        sampling = {"do_sample": False} if greedy else {"do_sample": True, "temperature": 1.0, "top_p": 1.0,
                                                        "top_k": 0}
        out = self.model.generate(
            input_ids=input_ids.to(device), attention_mask=attention.to(device), max_new_tokens=self.max_new_tokens,
            pad_token_id=self.pad_id, eos_token_id=sorted(self.eos_ids), return_dict_in_generate=True,
            logits_processor=self._processors(recorder), **sampling,
        )
        self.model.train(was_training)
        seq = out.sequences[:, width:]
        logps = recorder.finish(seq)
        return [_cut_at_eos(s.tolist(), lp.tolist(), self.eos_ids) for s, lp in zip(seq.cpu(), logps.cpu())]


class VLLMGenerator:
    """Sampling with vLLM (imported lazily), for GPU runs. Weights are pushed into the engine by `sync(model)`.

    Untested on CPU-only machines; needs a vLLM whose `LLM` has `apply_model` (vLLM >= 0.9)."""

    def __init__(self, model_path: str, tokenizer, temperature: float, top_p: float, max_new_tokens: int,
                 gpu_memory_utilization: float = 0.3):
        from vllm import LLM, SamplingParams

        self.llm = LLM(model=model_path, gpu_memory_utilization=gpu_memory_utilization, enable_prefix_caching=True)
        self.params = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_new_tokens, logprobs=0)
        self.temperature = temperature
        self.tokenizer = tokenizer

    def sync(self, model) -> None:
        state = {k.removeprefix("base_model.model."): v for k, v in model.state_dict().items()}
        self.llm.apply_model(lambda m: m.load_weights(weights=list(state.items())))

    def generate(self, contexts: Sequence[list[int]]) -> list[tuple[list[int], list[float]]]:
        prompts = [{"prompt_token_ids": list(c)} for c in contexts]
        results = []
        for r in self.llm.generate(prompts, self.params, use_tqdm=False):
            o = r.outputs[0]
            ids = list(o.token_ids)
            lps = [o.logprobs[i][t].logprob for i, t in enumerate(ids)] if o.logprobs else [0.0] * len(ids)
            results.append((ids, lps))
        return results


def run_episodes(generator, tokenizer, envs: Sequence, chunk_size: int) -> list[list[Turn]]:
    """Play already-reset episodes to the end; returns each episode's turns (outcome and feedback filled in).

    Each round generates the next response of every unfinished episode, chunk by chunk, submitting a chunk's
    verifications before generating the next chunk, then records the outcomes (which ends episodes that passed or
    used up their turns).
    """
    turns: list[list[Turn]] = [[] for _ in envs]
    while True:
        active = [i for i, e in enumerate(envs) if not e.done]
        if not active:
            return turns
        pending = []
        for start in range(0, len(active), chunk_size):
            chunk = active[start: start + chunk_size]
            contexts = [render_context(tokenizer, envs[i].messages) for i in chunk]
            for i, ctx, (ids, lps) in zip(chunk, contexts, generator.generate(contexts)):
                text = tokenizer.decode(ids, skip_special_tokens=True)
                turn = Turn(context_ids=ctx, response_ids=ids, rollout_log_probs=lps, response_text=text)
                turns[i].append(turn)
                pending.append((i, turn, envs[i].submit(text)))
        for i, turn, future in pending:
            turn.outcome = future.result()
            feedback, _, done = envs[i].record(turn.response_text, turn.outcome)
            if not done:
                turn.feedback_ids = tokenizer.encode(feedback, add_special_tokens=False)
