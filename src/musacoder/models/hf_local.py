"""A local `transformers` causal LM (`hf:PATH`): chat template, left-padded batches, sampling via `generate`. PATH is
a model folder, a hub id, or the output folder of `musacoder train sft|rft|rl` (the model its manifest names).

Fine for small models and tests; use a vLLM server or the offline vLLM engine for real evaluations.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from musacoder.models.base import ChatRequest, Completion, Sampling


def model_folder(path: str) -> str:
    """What `from_pretrained` loads for `hf:PATH`: a training stage's output folder (`train sft|rft|rl`) becomes the
    model its musacoder.json names (`musacoder.manifest.resolve_model`); a model folder or a hub id stays."""
    from pathlib import Path

    if not Path(path).is_dir():
        return path  # a hub id, or a missing path transformers reports itself
    from musacoder.manifest import resolve_model

    return str(resolve_model(path))


class HFLocalClient:
    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 8, name: str = "hf:<in-memory>"):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = max(1, int(batch_size))
        self.name = name
        if getattr(self.tokenizer, "pad_token_id", None) is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"  # decoder-only generation continues from the right end

    @classmethod
    def from_path(cls, path: str, *, batch_size: int = 8, device: str | None = None, dtype: str | None = None,
                  **model_kwargs: Any) -> HFLocalClient:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:  # pragma: no cover - depends on extras
            raise ImportError("hf: models need transformers: pip install 'musacoder[data]'") from e
        path = model_folder(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
        if dtype:
            model_kwargs["dtype"] = getattr(torch, dtype)
        model = AutoModelForCausalLM.from_pretrained(path, **model_kwargs)
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        model.to(device).eval()
        return cls(model, tokenizer, batch_size=batch_size, name=f"hf:{path}")

    def _prompt(self, req: ChatRequest) -> str:
        return self.tokenizer.apply_chat_template(list(req.messages), tokenize=False, add_generation_prompt=True)

    def generate(self, requests: Sequence[ChatRequest], sampling: Sampling) -> Iterator[tuple[ChatRequest, Completion]]:
        import torch

        device = next(self.model.parameters()).device
        for start in range(0, len(requests), self.batch_size):
            batch = list(requests[start:start + self.batch_size])
            if batch[0].seed is not None:  # one seed per batch: transformers samples a batch from one generator
                torch.manual_seed(batch[0].seed)
            enc = self.tokenizer([self._prompt(r) for r in batch], return_tensors="pt", padding=True,
                                 add_special_tokens=False).to(device)
            do_sample = sampling.temperature > 0
            kwargs: dict[str, Any] = {"max_new_tokens": sampling.max_tokens, "do_sample": do_sample,
                                      "pad_token_id": self.tokenizer.pad_token_id}
            if do_sample:
                kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p)
            with torch.no_grad():
                out = self.model.generate(**enc, **kwargs)
            new_tokens = out[:, enc["input_ids"].shape[1]:]
            eos = self.tokenizer.eos_token_id
            for req, row in zip(batch, new_tokens):
                text = self.tokenizer.decode(row, skip_special_tokens=True)
                finished = eos is not None and bool((row == eos).any())
                yield req, Completion(text=text, finish_reason="stop" if finished else "length",
                                      usage={"completion_tokens": int((row != self.tokenizer.pad_token_id).sum())})

    def close(self) -> None:
        pass
