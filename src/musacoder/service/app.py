"""The HTTP API of MooreEval (FastAPI). Routes translate requests into `JobSpec`s for the job queue and verdicts
back into the Verdict JSON contract (`Verdict.model_dump(mode="json")`, as `musacoder verify --json` prints it).

Errors are `{"detail": "<what to change>"}` with a 4xx code: 400 for a task id that is not one, an unknown size
constant or option, or a body that is not JSON; 401 for a wrong or missing token; 404 for an unknown task or job;
413 for a body over the limit; 422 for a body of the wrong shape; 429 with Retry-After when the queue is full;
503 while the service shuts down.
"""

from __future__ import annotations

import asyncio

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from musacoder.config import VerifyConfig
from musacoder.records import Verdict
from musacoder.service.auth import token_matches
from musacoder.service.config import ServiceConfig
from musacoder.service.jobs import BatchTooLarge, Job, JobQueue, QueueFull, ServiceClosed, Verifier
from musacoder.service.metrics import Metrics
from musacoder.service.requests import BatchBody, RequestError, VerifyBody, to_spec

OPEN_PATHS = ("/v1/health", "/docs", "/redoc", "/openapi.json")


def _error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


class Guard:
    """ASGI middleware in front of every route: the bearer token (before anything is read), then the body size
    (Content-Length when given, else counted while reading), so neither costs the routes anything."""

    def __init__(self, app, *, token: str | None, max_body_bytes: int, metrics: Metrics):
        self.app, self.token, self.limit, self.metrics = app, token, max_body_bytes, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.token and not scope["path"].startswith(OPEN_PATHS):
            if not token_matches(headers.get("authorization"), self.token):
                self.metrics.inc(self.metrics.rejected, "unauthorized")
                why = "missing" if "authorization" not in headers else "wrong"
                return await _error(401, f"{why} bearer token: send 'Authorization: Bearer <token>' with the "
                                         "server's --token", {"WWW-Authenticate": "Bearer"})(scope, receive, send)
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        too_large = _error(413, f"request body larger than the server's limit of {self.limit} bytes; send smaller "
                                "candidates or split the batch")
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            self.metrics.inc(self.metrics.rejected, "body_too_large")
            return await too_large(scope, receive, send)
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                self.metrics.inc(self.metrics.rejected, "body_too_large")
                return await too_large(scope, receive, send)
            if not msg.get("more_body"):
                break
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


def _validation_message(exc: RequestValidationError) -> tuple[int, str]:
    errs = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errs):
        e = next(e for e in errs if e.get("type") == "json_invalid")
        return 400, f"request body is not valid JSON ({e.get('ctx', {}).get('error', e.get('msg'))})"
    parts = []
    for e in errs:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        if e.get("type") == "extra_forbidden":
            parts.append(f"unknown field {loc!r}")
        elif e.get("type") == "missing":
            parts.append(f"missing field {loc!r}")
        else:
            parts.append(f"{loc or 'body'}: {e.get('msg')}")
    return 422, "invalid request: " + "; ".join(parts) + (
        ". Expected {\"task\": ID or \"task_source\": TEXT, \"candidate\": TEXT, \"backend\": \"cpu\"|\"triton\"|"
        "\"cuda\", \"set\": {...}, \"config\": {...}}")


def _job_json(job: Job, how: str | None = None) -> dict:
    out = {"job_id": job.id, "status": job.state}
    if how is not None:
        out["deduplicated"] = how
    verdict = job.verdict
    if verdict is not None:
        out["verdict"] = verdict.model_dump(mode="json")
    return out


def _verdict_response(job: Job, how: str) -> JSONResponse:
    return JSONResponse(job.verdict.model_dump(mode="json"),
                        headers={"X-Musacoder-Job-Id": job.id, "X-Musacoder-Deduplicated": how})


def create_app(config: ServiceConfig | None = None, *, verifier: Verifier | None = None,
               verify_config: VerifyConfig | None = None, pool_context=None, pool_stats=None) -> FastAPI:
    """The API over a fresh job queue. `verifier` defaults to `musacoder.judge.pipeline.verify` (the local pool,
    workers started ahead while the service runs); `verify_config` is the base every request's options go on.
    `pool_context` (a callable returning a context manager) is entered while the service runs, and `pool_stats`
    (a callable returning a dict) is reported under `pool` by /v1/health: both for another pool, e.g.
    `musacoder.service.ray_pool.RayVerifier`."""
    cfg = config or ServiceConfig()
    if verifier is None:
        from musacoder.judge.pipeline import verify as verifier
        from musacoder.judge.sandbox import prestarted_workers

        pool_context = lambda: prestarted_workers(cfg.workers)  # noqa: E731
    metrics = Metrics()
    jobs = _job_queue(cfg, verifier, pool_context, metrics)

    async def lifespan(app):
        jobs.start()
        yield
        await asyncio.to_thread(jobs.stop)

    app = FastAPI(title="MooreEval", version="1", lifespan=lifespan,
                  description="Verify LLM-written kernels: verdicts in the Verdict JSON contract of "
                              "`musacoder verify --json`. See docs/service.md.")
    app.state.jobs, app.state.metrics, app.state.config = jobs, metrics, cfg
    app.add_middleware(Guard, token=cfg.token, max_body_bytes=cfg.max_body_bytes, metrics=metrics)
    _add_error_handlers(app, metrics)
    _add_routes(app, jobs, metrics, cfg, verify_config or VerifyConfig(), pool_stats)
    return app


def _job_queue(cfg: ServiceConfig, verifier: Verifier, pool_context, metrics: Metrics) -> JobQueue:
    """The job queue the routes submit to, with its load reported as gauges on /v1/metrics."""
    jobs = JobQueue(verifier, workers=cfg.workers, max_queue=cfg.max_queue, deadline_s=cfg.job_deadline_s,
                    cache_size=cfg.result_cache_size, keep_jobs=cfg.keep_jobs, metrics=metrics,
                    pool_context=pool_context)
    metrics.add_gauge("musacoder_queue_depth", "Jobs waiting for a worker.", lambda: jobs.depth)
    metrics.add_gauge("musacoder_queue_capacity", "Jobs that may wait (--max-queue).", lambda: jobs.max_queue)
    metrics.add_gauge("musacoder_jobs_running", "Verifications running now.", lambda: jobs.running)
    metrics.add_gauge("musacoder_workers", "Verifications that may run at once (--workers).", lambda: jobs.workers)
    metrics.add_gauge("musacoder_result_cache_entries", "Verdicts kept for identical jobs.",
                      lambda: jobs.cache_entries)
    return jobs


def _add_error_handlers(app: FastAPI, metrics: Metrics) -> None:
    """Each refusal as `{"detail": ...}` with its status code (see the module's docstring), counted by reason."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        status, message = _validation_message(exc)
        metrics.inc(metrics.rejected, "invalid")
        return _error(status, message)

    @app.exception_handler(RequestError)
    async def _bad_request(request: Request, exc: RequestError):
        metrics.inc(metrics.rejected, "not_found" if exc.status == 404 else "bad_request")
        return _error(exc.status, exc.message)

    @app.exception_handler(QueueFull)
    async def _full(request: Request, exc: QueueFull):
        return _error(429, str(exc), {"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(ServiceClosed)
    async def _closed(request: Request, exc: ServiceClosed):
        return _error(503, str(exc), {"Retry-After": "5"})

    @app.exception_handler(BatchTooLarge)
    async def _too_many(request: Request, exc: BatchTooLarge):
        metrics.inc(metrics.rejected, "bad_request")
        return _error(400, str(exc))


def _add_routes(app: FastAPI, jobs: JobQueue, metrics: Metrics, cfg: ServiceConfig, base_config: VerifyConfig,
                pool_stats) -> None:
    """/v1/verify, /v1/verify/batch, /v1/jobs/{id}, /v1/health and /v1/metrics over `jobs`."""

    async def _submit(bodies: list[VerifyBody]):
        # reading task files, parsing sources and hashing candidates: off the event loop
        return await asyncio.to_thread(lambda: jobs.submit_many([to_spec(b, cfg.task_root, base_config)
                                                                 for b in bodies]))

    @app.post("/v1/verify", responses={200: {"model": Verdict, "description": "The verdict (wait=true)."},
                                       202: {"description": "{\"job_id\": ..., \"status\": ...} (wait=false)."}})
    async def verify_one(body: VerifyBody, wait: bool = Query(True, description="Answer with the verdict "
                                                                                "(true) or a job id at once (false).")):
        """Verify one candidate. The verdict is the JSON of `musacoder verify --json`."""
        [(job, how)] = await _submit([body])
        if not wait:
            return JSONResponse(_job_json(job, how), status_code=202)
        await asyncio.wrap_future(job.future)
        return _verdict_response(job, how)

    @app.post("/v1/verify/batch")
    async def verify_batch(body: BatchBody, wait: bool = Query(True, description="Answer with all verdicts (true) "
                                                                                "or job ids at once (false).")):
        """Queue many verifications, all or none. wait=true: `{"results": [verdict, ...]}` in request order;
        wait=false: 202 and `{"job_ids": [...]}`."""
        submitted = await _submit(body.jobs)
        if not wait:
            return JSONResponse({"job_ids": [job.id for job, _ in submitted]}, status_code=202)
        await asyncio.gather(*(asyncio.wrap_future(job.future) for job, _ in submitted))
        return JSONResponse({"results": [job.verdict.model_dump(mode="json") for job, _ in submitted],
                             "job_ids": [job.id for job, _ in submitted]})

    @app.get("/v1/jobs/{job_id}")
    async def get_job(job_id: str, wait: float = Query(0.0, ge=0, description="Seconds to wait for the verdict "
                                                                             f"(long poll; at most {cfg.max_poll_s:g} s).")):
        """A job's state (queued, running, done) and, once done, its verdict."""
        job = jobs.get(job_id)
        if job is None:
            metrics.inc(metrics.rejected, "not_found")
            return _error(404, f"unknown job {job_id!r} (never submitted here, or finished long enough ago to be "
                               "forgotten)")
        if wait > 0 and not job.future.done():
            await asyncio.wait({asyncio.wrap_future(job.future)}, timeout=min(wait, cfg.max_poll_s))
        return _job_json(job)

    @app.get("/v1/health")
    async def health():
        """Liveness and load; open without a token."""
        out = {"status": "ok", "workers": jobs.workers, "running": jobs.running, "queue_depth": jobs.depth,
               "max_queue": jobs.max_queue, "task_root": cfg.task_root is not None}
        if pool_stats is not None:
            out["pool"] = pool_stats()
        return out

    @app.get("/v1/metrics", response_class=PlainTextResponse)
    async def prometheus():
        """Prometheus text format: queue depth, verdicts by status, stage and job seconds, device busy seconds."""
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")
