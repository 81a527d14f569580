"""What a client may ask for: request bodies, task ids under the task root, and the verification options it may set.

A request becomes a `JobSpec` (task with its sizes applied, candidate text, backend, the effective `VerifyConfig`)
or a `RequestError` whose status code and message go back to the client as they are.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from musacoder import syntax
from musacoder.config import VerifyConfig
from musacoder.records import Backend, Task
from musacoder.service.jobs import JobSpec

# VerifyConfig fields that are the server's to decide: where it builds and writes, and how it isolates workers.
SERVER_ONLY_OPTIONS = frozenset({"cache_dir", "keep_workdir", "isolate_network", "memory_limit_gb"})
CLIENT_OPTIONS = frozenset(VerifyConfig.model_fields) - SERVER_ONLY_OPTIONS

_TASK_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")


class RequestError(Exception):
    """A request the service cannot run; `status` is the HTTP code, the message says what to change."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class VerifyBody(BaseModel):
    """One verification: a task (by id under the server's task root, or inline source), a candidate and options."""

    model_config = ConfigDict(extra="forbid")

    task: str | None = Field(None, description="KernelBench id under the server's task root, e.g. `level1/19_ReLU`.")
    task_source: str | None = Field(None, description="The problem file's text, instead of `task`.")
    task_name: str | None = Field(None, max_length=200, description="Name for an inline task (`level1/19_ReLU` or "
                                  "`19_ReLU`), reported as the verdict's `task`; default `inline`.")
    candidate: str = Field(description="Raw model response or plain code, as for `musacoder verify --candidate`.")
    backend: Backend | None = Field(None, description="cpu, triton or cuda; default: what the code shows.")
    set: dict[str, int | float | bool | str] = Field(default_factory=dict,
                                                     description="Size overrides, as `--set NAME=VALUE`.")
    config: dict[str, Any] = Field(default_factory=dict, description="VerifyConfig options (trials, extra_shapes, "
                                   "baseline, time_compile_baseline, …); the server's own are cache_dir, "
                                   "keep_workdir, isolate_network and memory_limit_gb.")

    @model_validator(mode="after")
    def _one_task(self):
        if (self.task is None) == (self.task_source is None):
            raise ValueError("give exactly one of `task` (an id under the server's task root) or `task_source` "
                             "(the problem file's text)")
        return self


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jobs: list[VerifyBody] = Field(min_length=1, description="Verifications; results come back in this order.")


def resolve_task_id(root: Path | None, task_id: str) -> Path:
    """`level1/19_ReLU` (or with `.py`) → the file under `root`. Ids that could leave the root are refused (400)."""
    if root is None:
        raise RequestError(400, f"task {task_id!r}: this server has no task root (start it with --task-root DIR); "
                                "send the problem's text as `task_source` instead")
    if "\\" in task_id or "\x00" in task_id or task_id.startswith("/") or re.match(r"^[A-Za-z]:", task_id):
        raise RequestError(400, f"task {task_id!r}: a task id is a relative KernelBench id like level1/19_ReLU, "
                                "not a path")
    if any(p in ("", ".", "..") for p in task_id.split("/")) or not _TASK_ID.match(task_id):
        raise RequestError(400, f"task {task_id!r}: a task id may not contain '..', '.' or empty components, nor "
                                "characters other than letters, digits, '_', '-', '.' and '/'; e.g. level1/19_ReLU")
    rel = task_id if task_id.endswith(".py") else task_id + ".py"
    base = root.resolve()
    path = (base / rel).resolve()
    if not path.is_relative_to(base):  # a symlink inside the root pointing out of it
        raise RequestError(400, f"task {task_id!r} resolves outside the task root")
    if not path.is_file():
        raise RequestError(404, f"unknown task {task_id!r}: no {rel} under the server's task root")
    return path


def effective_config(base: VerifyConfig, options: dict[str, Any]) -> VerifyConfig:
    """The server's base config with the client's options on top; server-only or unknown options are refused."""
    if not options:
        return base
    server_only = sorted(set(options) & SERVER_ONLY_OPTIONS)
    if server_only:
        raise RequestError(400, f"config option(s) {', '.join(server_only)} are set by the server, not per request")
    unknown = sorted(set(options) - CLIENT_OPTIONS)
    if unknown:
        raise RequestError(400, f"unknown config option(s) {', '.join(unknown)}; see VerifyConfig "
                                f"(e.g. trials, extra_shapes, baseline, time_compile_baseline)")
    try:
        return VerifyConfig(**{**base.model_dump(), **options})
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors())
        raise RequestError(422, f"invalid config: {msgs}") from None


def _inline_task(source: str, name: str | None, overrides: dict) -> Task:
    from musacoder.tasks import task_from_source

    name = name or "inline"
    m = re.fullmatch(r"level(\d+)/([^/]+)", name)
    level, short = (int(m.group(1)), m.group(2)) if m else (None, name)
    return task_from_source(source, short, level=level, overrides=overrides)


# Parsing a request's task takes the package's one parse lock (musacoder.syntax: ast.parse is not thread-safe before
# Python 3.12); a collision with a parse that does not take it (third-party code) is tried again.
_PARSE_LOCK = syntax.LOCK


def to_spec(body: VerifyBody, task_root: Path | None, base: VerifyConfig) -> JobSpec:
    tries = 0
    while True:
        try:
            with _PARSE_LOCK:
                return _to_spec(body, task_root, base)
        except SystemError as e:
            tries += 1
            if "recursion depth mismatch" not in str(e) or tries == 3:
                raise


def _to_spec(body: VerifyBody, task_root: Path | None, base: VerifyConfig) -> JobSpec:
    from musacoder.tasks import TaskError, task_from_source

    try:
        if body.task is not None:
            path = resolve_task_id(task_root, body.task)
            m = re.fullmatch(r"level(\d+)", path.parent.name)
            # no `path`: messages name the task by its id, not by the server's file layout
            task = task_from_source(path.read_text(), path.stem, level=int(m.group(1)) if m else None,
                                    overrides=body.set)
        else:
            task = _inline_task(body.task_source, body.task_name, body.set)
    except TaskError as e:
        raise RequestError(400, str(e)) from None
    return JobSpec(task=task, candidate=body.candidate, backend=body.backend,
                   config=effective_config(base, body.config))
