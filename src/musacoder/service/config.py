"""Settings of one `musacoder serve` process. Every option is documented where it is declared."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class ServiceConfig(BaseModel):
    task_root: Path | None = Field(
        None, description="Folder in KernelBench layout (`level1/19_ReLU.py`, …); requests name tasks by id under "
        "it. None: requests must carry the task source inline (`task_source`).")
    host: str = Field("127.0.0.1", description="Address to listen on. Anything but loopback requires `token`.")
    port: int = Field(8000, ge=0, le=65535, description="TCP port to listen on.")
    workers: int = Field(1, ge=1, description="Verifications run at once (threads of the local pool).")
    token: str | None = Field(None, description="Bearer token every /v1 request except /v1/health must carry.")
    max_queue: int = Field(256, ge=1, description="Jobs waiting for a worker (not counting running ones); a request "
                           "that would exceed it is answered 429 with Retry-After.")
    job_deadline_s: float = Field(
        1800.0, gt=0, description="Seconds from submission to verdict. A job past it is answered `infra_error` (no "
        "reward: the verifier's delay says nothing about the candidate); a verification still running goes on in "
        "the background and its verdict, if it is not an infra_error, fills the result cache.")
    max_body_bytes: int = Field(4 << 20, ge=1024, description="Largest request body; larger ones are answered 413.")
    result_cache_size: int = Field(4096, ge=0, description="Finished verdicts kept for identical jobs (LRU); "
                                   "infra_error verdicts are never kept, so a retry runs again.")
    keep_jobs: int = Field(10000, ge=1, description="Finished jobs whose results `GET /v1/jobs/{id}` can still return.")
    max_poll_s: float = Field(60.0, gt=0, description="Longest wait `GET /v1/jobs/{id}?wait=S` holds a request open.")
