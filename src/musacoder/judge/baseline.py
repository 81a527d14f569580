"""The baselines timed in a reference-only worker, where no candidate code ever ran: the eager reference once per
task and batch (beside the figure each candidate's own worker takes; stored for later runs where opted in), and the
`torch.compile` baseline, cached."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import statistics
import threading
import time
from pathlib import Path

import torch

from musacoder.config import VerifyConfig
from musacoder.judge.messages import (L2_FLUSH_BYTES, Ack, CompileReferenceRequest, CompileTimesReply, Fault,
                                      InitReply, InitRequest, LoadReply, LoadRequest, MalformedReply,
                                      ReferenceTimesReply, Reply, Request, TimeCompileRequest, TimeReferenceRequest,
                                      exchange)
from musacoder.judge.sandbox import Sandbox
from musacoder.records import Task


class BaselineError(RuntimeError):
    pass


def _device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    import platform

    return f"cpu-{platform.machine()}-{os.cpu_count()}"


TIMING_METHOD = 3  # part of the compile-baseline cache key: 3 = timed to the end of the calling stream's work


def compile_baseline_ms(task: Task, device: str, cfg: VerifyConfig, *, state: dict, init_inputs: list, seed: int,
                        mode: str | None = None, perturb: str | None = None, hold=None, reap=None,
                        flush_bytes: int = L2_FLUSH_BYTES, worker=None) -> float:
    """Median ms of the `torch.compile`d reference, measured in a reference-only worker (no candidate code ever ran
    there, so no candidate can slow it down or poison the cache) and cached per task source and sizes, device model,
    torch version, dtype, compile mode and timing inputs' perturbation (`perturb`, as the candidate's timing used)
    under `CACHE/baselines/`.

    `hold(slot)` gives the context for each part: the worker's start under `hold("start")` (no device slot), the
    task's load, the compile and its warm-up run under `hold("shared")` (a first compile takes tens of seconds of
    host time), only the timing under `hold("exclusive")`. `worker()` makes the reference-only worker (an unstarted
    `Sandbox`; by default a plain one). `reap(gone)`, where given, takes the worker's reaping to the background: it
    is called with the event set once the killed worker is gone (`DeviceLease.end_after`). `flush_bytes`: the L2
    flush before each timed call, as the candidate's timing had it."""
    source = source_with_overrides(task)
    dtypes = sorted({str(t.dtype) for t in state.values()}) or ["float32"]
    key_src = json.dumps([source, _device_name(device), torch.__version__, dtypes, mode, cfg.warmup, cfg.repeats,
                          TIMING_METHOD] + ([perturb] if perturb else []) + [flush_bytes])
    key = hashlib.sha256(key_src.encode()).hexdigest()
    path = Path(cfg.cache_dir) / "baselines" / f"{key}.json"
    if path.exists():
        try:
            return float(json.loads(path.read_text())["median_ms"])
        except (ValueError, KeyError):
            pass
    prepare = CompileReferenceRequest(master_seed=int.from_bytes(os.urandom(7), "little"), input_sets=cfg.input_sets,
                                      mode=mode, perturb=perturb)
    timed = TimeCompileRequest(warmup=cfg.warmup, repeats=cfg.repeats, l2_flush_bytes=flush_bytes)
    rep = _reference_worker(task, device, cfg, state, init_inputs, seed, hold, prepare, timed, cfg.timeout_s,
                            CompileTimesReply, reap, worker)
    if not rep.compile_ms:
        raise BaselineError("the reference-only worker returned no timed rounds of the compiled reference")
    median = statistics.median(rep.compile_ms)
    _write_json(path, {"median_ms": median, "samples_ms": rep.compile_ms, "device": _device_name(device),
                       "torch": torch.__version__, "dtypes": dtypes, "task": task.key})
    return median


def _write_json(path: Path, obj: dict) -> None:
    """Write `obj` to `path` atomically: concurrent writers never leave a torn file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(obj))
    tmp.replace(path)


def clean_reference_ms(task: Task, device: str, cfg: VerifyConfig, *, state: dict, init_inputs: list, seed: int,
                       master_seed: int, input_sets: int, warmup: int, repeats: int, perturb: str | None = None,
                       hold=None, reap=None, flush_bytes: int = L2_FLUSH_BYTES, worker=None) -> list[float]:
    """ms per call of the eager reference, `repeats` rounds after `warmup`, timed in a fresh reference-only worker on
    inputs drawn as the candidate's `time` request drew them (`master_seed`), right after that candidate's timing on
    the same device. The caller shares it with the task's other candidates (the per-task cache) and, opted in, with
    later runs (`stored_figure`). `hold`, `reap`, `flush_bytes` and `worker` as for `compile_baseline_ms`."""
    timed = TimeReferenceRequest(master_seed=master_seed, input_sets=input_sets, warmup=warmup, repeats=repeats,
                                 perturb=perturb, l2_flush_bytes=flush_bytes)
    got = _reference_worker(task, device, cfg, state, init_inputs, seed, hold, None, timed,
                            cfg.timeout_s + cfg.time_budget_s * 2, ReferenceTimesReply, reap, worker).reference_ms
    if len(got) != repeats or not all(0 < x < float("inf") for x in got):
        raise BaselineError(f"the reference-only worker returned no {repeats} timed rounds")
    return [float(x) for x in got]


# the clean reference's figures this process measured, by the key `stored_figure` uses: (ms, monotonic time)
_RECENT: dict[str, tuple[list[float], float]] = {}
_RECENT_LOCK = threading.Lock()


def recent_figure(key: str, count: int, max_age_s: float) -> tuple[list[float], float] | None:
    """A figure a reference-only worker of this process measured for `key` (`remember_figure`) at most `max_age_s`
    seconds ago, as (`count` ms values, its age in seconds); None otherwise. It outlives the batch (its per-task
    cache and secrets rotate), since a timing depends on the inputs' distribution and sets, not on their values."""
    with _RECENT_LOCK:
        got = _RECENT.get(key)
    if got is None or len(got[0]) != count:
        return None
    age = time.monotonic() - got[1]
    return (list(got[0]), age) if 0 <= age <= max_age_s else None


def remember_figure(key: str, ms: list[float]) -> None:
    """Keep a figure measured now for later batches of this process (`recent_figure`)."""
    with _RECENT_LOCK:
        _RECENT[key] = (list(ms), time.monotonic())


def stored_figure(cache_dir: Path, key: str, count: int, max_age_s: float) -> tuple[list[float], float] | None:
    """A figure an earlier run stored (`store_figure`) under `cache_dir/baselines/stored-<key>.json`: (`count` ms
    values, its age in seconds), or None when there is none, it is older than `max_age_s`, dated in the future, or not
    `count` positive finite numbers."""
    try:
        got = json.loads(_stored_path(cache_dir, key).read_text())
        ms, at = [float(x) for x in got["ms"]], float(got["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    age = time.time() - at
    if len(ms) != count or not all(0 < x < float("inf") for x in ms) or not 0 <= age <= max_age_s:
        return None
    return ms, age


def store_figure(cache_dir: Path, key: str, ms: list[float], about: dict) -> None:
    """Keep a figure for later runs (`stored_figure`), written atomically; `about` says what it is (for a reader)."""
    try:
        _write_json(_stored_path(cache_dir, key), {"ms": ms, "at": time.time(), **about})
    except OSError:
        pass  # a read-only cache: the next run measures again


def _stored_path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "baselines" / f"stored-{key}.json"


def _reference_worker(task: Task, device: str, cfg: VerifyConfig, state: dict, init_inputs: list, seed: int, hold,
                      prepare: Request | None, timed: Request, timed_timeout_s: float, record: type[Reply],
                      reap=None, worker=None):
    """Start a reference-only worker (`worker()`, an unstarted `Sandbox`; by default a plain one), load the task,
    build the reference with the verification's weights, run `prepare` (if any) with the device shared, then `timed`
    with it held exclusively; returns the timed reply as `record`. Raises `BaselineError` with the worker's error."""
    hold = hold or (lambda slot: contextlib.nullcontext())
    worker = worker or (lambda: Sandbox(cfg.cache_dir, keep_workdir=False))
    with contextlib.ExitStack() as stack:
        with hold("start"):
            sb = stack.enter_context(worker())
        if reap is not None:
            sb.reap_later = True
            reap(sb.gone)
        with hold("shared"):
            # no candidate code; on a MUSA device the worker still needs torch_musa and its timers ("musa")
            backend = "musa" if device.startswith("musa") else "cpu"
            _expect(sb, load_request(None, backend, device, cfg, task), cfg.timeout_s, LoadReply)
            _expect(sb, InitRequest(init_inputs=init_inputs, state_dict=state, seed=seed, device=device),
                    cfg.timeout_s, InitReply)
            if prepare is not None:
                _expect(sb, prepare, cfg.timeout_s * 5, Ack)
        with hold("exclusive"):
            return _expect(sb, timed, timed_timeout_s, record)


def _expect(sb: Sandbox, request: Request, timeout_s: float, record: type[Reply]):
    """The reply to `request` as `record`; `BaselineError` for a fault or a reply that does not fit."""
    try:
        got = exchange(sb, request, timeout_s, record)
    except MalformedReply as e:
        raise BaselineError(f"malformed reply to `{request.op}`: {e}"[-300:]) from None
    if isinstance(got, Fault):
        raise BaselineError(got.error[-300:])
    return got


def load_request(code: str | None, backend: str, device: str, cfg: VerifyConfig, task: Task) -> LoadRequest:
    """The worker's `load` request: the candidate's code (None for a reference-only worker) and the task source."""
    return LoadRequest(code=code, backend=backend, device=device, cache_dir=str(cfg.cache_dir),
                       task_source=source_with_overrides(task))


def source_with_overrides(task: Task) -> str:
    from musacoder.tasks import apply_overrides

    return apply_overrides(task.source, task.overrides, task.path or task.name)
