"""`RemoteVerifier`: MooreEval through a `musacoder serve` endpoint, with the interface of the local verifier.

`verify(task, candidate, backend=None, overrides=None, config=None) -> Verdict` behaves like
`musacoder.verify` (a bad argument raises `ValueError`; every other outcome is a Verdict), and
`verify_many(jobs, workers=N, config=None)` like `musacoder.judge.batch.verify_many` (yields `(job, verdict)` in
completion order; a job that cannot be run becomes an `infra_error` verdict). The instance itself is callable as
`verify`, so it drops in wherever a verifier callable is taken (`musacoder.rl.env.KernelEnv(verifier=...)`), and
`verify_many` has the signature `musacoder.bench.runner.run_bench(verifier=...)` expects.

A job is submitted with `wait=false` and its verdict collected by long polls of `GET /v1/jobs/{id}`, so no request
stays open for a whole build; a full queue (429) is retried after the server's Retry-After.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

from musacoder.config import VerifyConfig
from musacoder.records import Task, Verdict

# VerifyConfig options the server decides for itself (musacoder.service.requests.SERVER_ONLY_OPTIONS)
_SERVER_ONLY = ("cache_dir", "keep_workdir", "isolate_network", "memory_limit_gb")


class RemoteError(RuntimeError):
    """The service could not be reached or answered with a server error."""


class _LostJob(RemoteError):
    pass


def config_options(config: VerifyConfig | None) -> dict[str, Any]:
    """The options of `config` that differ from the defaults, as a request's `config` object. `cache_dir` is the
    server's (a local path means nothing there); other server-only options set here are an error."""
    if config is None:
        return {}
    mine, default = config.model_dump(mode="json"), VerifyConfig().model_dump(mode="json")
    diff = {k: v for k, v in mine.items() if v != default[k] and k != "cache_dir"}
    server_only = sorted(set(diff) & set(_SERVER_ONLY))
    if server_only:
        raise ValueError(f"config option(s) {', '.join(server_only)} are set on the server (musacoder serve), "
                         "not per request")
    return diff


def request_body(task: Task | str | Path, candidate: str | Path, backend: str | None = None,
                 overrides: dict | None = None, config: VerifyConfig | None = None) -> dict[str, Any]:
    """The `POST /v1/verify` body. `task`: a `Task` or a problem file (sent inline), or a KernelBench id such as
    `level1/19_ReLU` resolved under the server's task root. `candidate`: text, or a `Path` to read."""
    text = candidate.read_text() if isinstance(candidate, Path) else candidate
    body: dict[str, Any] = {"candidate": text}
    if isinstance(task, (str, Path)) and (isinstance(task, Path) or os.path.isfile(task)):
        from musacoder.tasks import load_task

        task = load_task(task)
    if isinstance(task, Task):
        body.update(task_source=task.source, task_name=task.key)
        sizes = {**task.overrides, **(overrides or {})}
    else:
        body["task"] = str(task)
        sizes = dict(overrides or {})
    if sizes:
        body["set"] = sizes
    if backend is not None:
        body["backend"] = backend
    options = config_options(config)
    if options:
        body["config"] = options
    return body


class RemoteVerifier:
    """Client of `musacoder serve`. `token` is the server's bearer token (default `$MUSACODER_SERVICE_TOKEN`);
    `timeout_s` bounds one verification from submission to verdict, queue waits included; a request that cannot
    reach the server is tried `retries` more times (0.5 s, 1 s, 2 s, … apart; a resubmitted job joins the first
    if it arrived, since identical jobs share one result)."""

    def __init__(self, url: str, token: str | None = None, *, timeout_s: float = 3600.0, poll_s: float = 30.0,
                 max_connections: int = 64, retries: int = 3):
        import httpx

        self.url = url.rstrip("/")
        token = token if token is not None else os.environ.get("MUSACODER_SERVICE_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout_s, self.poll_s, self.retries = timeout_s, poll_s, retries
        self._http = httpx.Client(base_url=self.url, headers=headers,
                                  timeout=httpx.Timeout(poll_s + 30.0, connect=10.0),
                                  limits=httpx.Limits(max_connections=max_connections,
                                                      max_keepalive_connections=max_connections))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "RemoteVerifier":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def health(self) -> dict:
        return self._check(self._request("GET", "/v1/health")).json()

    # ---- one verification -------------------------------------------------------------------------------------
    def verify(self, task: Task | str | Path, candidate: str | Path, backend: str | None = None,
               overrides: dict | None = None, config: VerifyConfig | None = None) -> Verdict:
        """Verify one candidate on the server; raises ValueError for a request the server refuses (unknown task,
        bad id or override, body too large), RemoteError when the server cannot be reached or fails."""
        body = request_body(task, candidate, backend, overrides, config)
        end = time.monotonic() + self.timeout_s
        try:
            return self.result(self.submit(body, end), end)
        except _LostJob:  # the server restarted (or forgot the job): submit it once more
            return self.result(self.submit(body, end), end)

    __call__ = verify

    def submit(self, body: dict, end: float | None = None) -> str:
        """Queue one request body; returns its job id. Waits out 429s (Retry-After) until `end`."""
        end = end or time.monotonic() + self.timeout_s
        while True:
            r = self._request("POST", "/v1/verify", params={"wait": "false"}, json=body)
            if r.status_code == 429 and time.monotonic() < end:
                time.sleep(min(float(r.headers.get("Retry-After", "1")), max(0.0, end - time.monotonic())))
                continue
            return self._check(r).json()["job_id"]

    def result(self, job_id: str, end: float | None = None) -> Verdict:
        """Long-poll a job until its verdict arrives or `end` passes (then an infra_error verdict)."""
        end = end or time.monotonic() + self.timeout_s
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return Verdict(status="infra_error", error=f"no verdict from {self.url} within {self.timeout_s:g} s",
                               feedback="The verification service did not answer in time; this says nothing about "
                                        "the candidate.", flags=["deadline"])
            r = self._request("GET", f"/v1/jobs/{job_id}", params={"wait": f"{min(self.poll_s, left):.3f}"})
            if r.status_code == 404:
                raise _LostJob(f"{self.url} no longer knows job {job_id} (restarted, or the job was forgotten)")
            self._check(r)
            data = r.json()
            if data["status"] == "done":
                return Verdict.model_validate(data["verdict"])

    # ---- many -------------------------------------------------------------------------------------------------
    def verify_many(self, jobs: Iterable[Any], *, workers: int = 16,
                    config: VerifyConfig | None = None) -> Iterator[tuple[Any, Verdict]]:
        """Verify jobs (with `task`, `candidate`, `backend`, `overrides`, as `musacoder.judge.batch.VerifyJob`),
        at most `workers` in flight; yields (job, verdict) in completion order. The server's --workers decides how
        many run at once there; `workers` here only bounds how many this client keeps queued."""

        def one(job) -> Verdict:
            try:
                return self.verify(job.task, job.candidate, backend=job.backend,
                                   overrides=job.overrides or None, config=config)
            except Exception as e:  # noqa: BLE001 - a bad job must not stop the batch, as in the local verify_many
                task = getattr(job.task, "key", str(job.task))
                return Verdict(status="infra_error", task=task, error=f"{type(e).__name__}: {e}",
                               feedback=f"The verifier could not run this job: {e}")

        from musacoder.judge.batch import bounded

        yield from bounded(one, jobs, workers)

    # ---- HTTP -------------------------------------------------------------------------------------------------
    def _request(self, method: str, path: str, **kw):
        import httpx

        last: Exception | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(0.5 * 2 ** (attempt - 1))
            try:
                return self._http.request(method, path, **kw)
            except httpx.TransportError as e:  # refused, reset, timed out: the service, not the request
                last = e
        raise RemoteError(f"cannot reach the verification service at {self.url}: {type(last).__name__}: {last}")

    def _check(self, r):
        if r.status_code < 400:
            return r
        try:
            detail = r.json().get("detail", r.text)
        except ValueError:
            detail = r.text
        if r.status_code == 401:
            raise PermissionError(f"{self.url}: {detail}")
        if r.status_code < 500 and r.status_code != 429:
            raise ValueError(f"{self.url} refused the request ({r.status_code}): {detail}")
        raise RemoteError(f"{self.url} answered {r.status_code}: {detail}")
