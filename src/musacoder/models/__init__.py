"""Model clients behind one interface (`ModelClient.generate`), chosen by a spec string:

    openai:BASE_URL#MODEL   any OpenAI-compatible chat endpoint (vLLM/SGLang servers, hosted APIs)
    vllm:PATH_OR_NAME       the offline vLLM engine (optional extra, imported lazily)
    hf:PATH                 a local transformers model
    dir:PATH                pre-generated responses, PATH/<task-name>/<sample>.txt (see `pregenerated`)

`options` (from `--model-arg KEY=VALUE`) go to the client: for `openai` the fields of `OpenAIClientConfig`
(`concurrency`, `timeout_s`, `max_retries`, `api_key_env`, …), for `hf` `batch_size`, `device`, `dtype`, for `vllm`
the `vllm.LLM` keyword arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from musacoder.models.base import ChatRequest, Completion, ModelClient, Sampling

__all__ = ["ChatRequest", "Completion", "ModelClient", "Sampling", "ModelSpec", "parse_model_spec", "make_client"]

KINDS = ("openai", "vllm", "hf", "dir")


@dataclass(frozen=True)
class ModelSpec:
    kind: str
    target: str  # base URL, model name or path
    model: str | None = None  # the served model name (openai only)


def parse_model_spec(spec: str) -> ModelSpec:
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in KINDS or not rest:
        raise ValueError(f"bad model spec {spec!r}: expected one of openai:BASE_URL#MODEL, vllm:PATH_OR_NAME, "
                         "hf:PATH, dir:PATH")
    if kind == "openai":
        base, hsep, model = rest.rpartition("#")
        if not hsep or not base or not model:
            raise ValueError(f"bad model spec {spec!r}: openai specs are openai:BASE_URL#MODEL, "
                             "e.g. openai:http://127.0.0.1:8000/v1#Qwen/Qwen3-8B")
        return ModelSpec(kind, base, model)
    return ModelSpec(kind, rest)


def make_client(spec: str, options: dict[str, Any] | None = None) -> ModelClient:
    """Build the client a spec names. Heavy libraries are imported only for the kind used."""
    s = parse_model_spec(spec)
    options = dict(options or {})
    if s.kind == "openai":
        from musacoder.models.openai_http import OpenAIChatClient, OpenAIClientConfig

        known = {f.name for f in fields(OpenAIClientConfig)} - {"base_url", "model"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown --model-arg for openai: {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(known))})")
        return OpenAIChatClient(OpenAIClientConfig(base_url=s.target, model=s.model or "", **options))
    if s.kind == "dir":
        from musacoder.models.pregenerated import PregeneratedClient

        if options:
            raise ValueError(f"dir: models take no --model-arg (got {', '.join(sorted(options))})")
        return PregeneratedClient(s.target)
    if s.kind == "hf":
        from musacoder.models.hf_local import HFLocalClient

        return HFLocalClient.from_path(s.target, **options)
    from musacoder.models.vllm_engine import VLLMEngineClient

    return VLLMEngineClient(s.target, **options)
