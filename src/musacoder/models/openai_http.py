"""Client for any OpenAI-compatible chat endpoint (vLLM and SGLang servers, hosted APIs), standard library only.

`POST {base_url}/chat/completions` with bounded concurrency (a thread pool), a per-request timeout, and retries with
exponential backoff and jitter on connection errors, timeouts, HTTP 408/409/429 and 5xx (honouring `Retry-After`).
Other HTTP errors (bad request, auth) fail the request at once. The API key comes from an environment variable
(default `OPENAI_API_KEY`); without one no `Authorization` header is sent, which is what local servers expect.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from musacoder.models.base import ChatRequest, Completion, Sampling, join_reasoning

_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


@dataclass
class OpenAIClientConfig:
    base_url: str  # including the API prefix, e.g. http://127.0.0.1:8000/v1
    model: str
    api_key_env: str = "OPENAI_API_KEY"  # environment variable holding the key; unset = no auth header
    concurrency: int = 16  # requests in flight
    timeout_s: float = 600.0  # per HTTP request
    max_retries: int = 5  # retries after the first attempt
    backoff_s: float = 1.0  # first retry delay; doubles each retry (plus up to 50 % jitter)
    max_backoff_s: float = 60.0
    send_seed: bool = True  # pass a per-request `seed` (vLLM/SGLang honour it; some hosted APIs reject it)
    extra_body: dict | None = None  # merged into every request body (e.g. {"chat_template_kwargs": {...}})


class OpenAIChatClient:
    def __init__(self, config: OpenAIClientConfig):
        self.config = config
        self.name = f"openai:{config.base_url}#{config.model}"
        self._url = config.base_url.rstrip("/") + "/chat/completions"

    def _body(self, req: ChatRequest, sampling: Sampling) -> dict:
        body = {
            "model": self.config.model,
            "messages": list(req.messages),
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
            "n": 1,
        }
        if self.config.send_seed and req.seed is not None:
            body["seed"] = req.seed
        body.update(self.config.extra_body or {})
        return body

    def _post(self, body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.config.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self._url, data=json.dumps(body).encode(), headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.config.timeout_s) as resp:  # noqa: S310 - user-given URL
            return json.loads(resp.read().decode())

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.config.max_backoff_s)
            except ValueError:
                pass
        base = min(self.config.backoff_s * 2**attempt, self.config.max_backoff_s)
        return base * (1 + 0.5 * random.random())

    def complete(self, req: ChatRequest, sampling: Sampling) -> Completion:
        """One request with retries; never raises for endpoint trouble (returns `text=None`, `error`)."""
        body = self._body(req, sampling)
        last_error = ""
        for attempt in range(self.config.max_retries + 1):
            retry_after = None
            try:
                data = self._post(body)
                choice = data["choices"][0]
                msg = choice.get("message") or {}
                reasoning = msg.get("reasoning_content") or msg.get("reasoning")
                text = join_reasoning(msg.get("content") or "", reasoning)
                usage = {k: v for k, v in (data.get("usage") or {}).items() if isinstance(v, int)}
                return Completion(text=text, finish_reason=choice.get("finish_reason"), usage=usage)
            except urllib.error.HTTPError as e:
                detail = e.read().decode(errors="replace")[:500] if e.fp else ""
                last_error = f"HTTP {e.code} from {self._url}: {detail}"
                if e.code not in _RETRY_STATUS:
                    return Completion(text=None, error=last_error)
                retry_after = e.headers.get("Retry-After") if e.headers else None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
                last_error = f"cannot reach {self._url}: {e}"
            except (KeyError, IndexError, TypeError, ValueError) as e:
                last_error = f"malformed response from {self._url}: {e!r}"
            if attempt < self.config.max_retries:
                time.sleep(self._delay(attempt, retry_after))
        return Completion(text=None, error=f"{last_error} (gave up after {self.config.max_retries + 1} attempts)")

    def generate(self, requests: Sequence[ChatRequest], sampling: Sampling) -> Iterator[tuple[ChatRequest, Completion]]:
        if not requests:
            return
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.config.concurrency, len(requests))))
        try:
            futures = {pool.submit(self.complete, r, sampling): r for r in requests}
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        finally:  # an interrupted run does not wait for queued requests
            pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        pass
