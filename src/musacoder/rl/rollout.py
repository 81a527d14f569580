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


class HFGenerator:
    """Sampling with `transformers` `generate` on the policy being trained; `temperature` 0 decodes greedily
    (evaluation), and its log-probs are then those of softmax(logits)."""

    def __init__(self, model, tokenizer, temperature: float, top_p: float, max_new_tokens: int):
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos_ids = _eos_set(tokenizer, model)

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
        sampling = {} if greedy else {"temperature": self.temperature, "top_p": self.top_p, "top_k": 0}
        out = self.model.generate(
            input_ids=input_ids.to(device), attention_mask=attention.to(device), do_sample=not greedy,
            max_new_tokens=self.max_new_tokens, pad_token_id=self.pad_id, eos_token_id=sorted(self.eos_ids),
            return_dict_in_generate=True, output_logits=True, **sampling,
        )
        self.model.train(was_training)
        seq = out.sequences[:, width:]
        logits = torch.stack(out.logits, dim=1)[:, : seq.shape[1]].float()
        logps = torch.log_softmax(logits / (self.temperature or 1.0), dim=-1).gather(-1, seq.unsqueeze(-1)).squeeze(-1)
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
