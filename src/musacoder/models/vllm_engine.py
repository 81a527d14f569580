"""The offline vLLM engine (`vllm:PATH_OR_NAME`), imported lazily; needs `pip install 'musacoder[vllm]'` and a GPU.

Untested in this repository's CI (no GPU, no vLLM); it uses only `vllm.LLM(...)`, `LLM.chat(...)` and
`SamplingParams(...)`. Model-level options (`tensor_parallel_size`, `max_model_len`, …) come from `--model-arg`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from musacoder.models.base import ChatRequest, Completion, Sampling, join_reasoning


class VLLMEngineClient:
    def __init__(self, model: str, **engine_kwargs: Any):
        try:
            from vllm import LLM
        except ImportError as e:
            raise ImportError("vllm: models need the vLLM engine: pip install 'musacoder[vllm]' "
                              "(or serve the model and use openai:http://HOST:PORT/v1#MODEL)") from e
        self.name = f"vllm:{model}"
        self.llm = LLM(model=model, **engine_kwargs)

    def generate(self, requests: Sequence[ChatRequest], sampling: Sampling) -> Iterator[tuple[ChatRequest, Completion]]:
        from vllm import SamplingParams

        if not requests:
            return
        params = [SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p,
                                 max_tokens=sampling.max_tokens, seed=r.seed) for r in requests]
        outputs = self.llm.chat([list(r.messages) for r in requests], params, use_tqdm=False)
        for req, out in zip(requests, outputs):
            o = out.outputs[0]
            text = join_reasoning(o.text, getattr(o, "reasoning_content", None))
            yield req, Completion(text=text, finish_reason=o.finish_reason,
                                  usage={"completion_tokens": len(o.token_ids)})

    def close(self) -> None:
        pass
