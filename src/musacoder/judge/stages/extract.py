"""Stage 1, in the trusted process, before any worker: the candidate's code out of the response, its backend, the
static legality rules (`musacoder.legality.static`), and the device it will run on."""

from __future__ import annotations

import torch

from musacoder.candidates import extract_code
from musacoder.config import UnusableArgument
from musacoder.legality import static as static_rules
from musacoder.legality.static import StaticReport
from musacoder.records import BACKENDS
from musacoder.judge.stages.context import RunContext, Stop


def extract_and_check(ctx: RunContext) -> StaticReport:
    """Fill `ctx.code`, `ctx.backend` and `ctx.device_pool` (the device asked for; each attempt is pinned to a
    concrete one) and return the static rules' report. `Stop("extract_error")` without code, `Stop("illegal")`
    with a static violation; `ValueError` for an unknown backend (an unusable argument, not a verdict)."""
    v, cfg = ctx.verdict, ctx.cfg
    cand = extract_code(ctx.text)
    if cand.code is None:
        v.stages["extract"] = "failed"
        v.error = cand.extract_error
        raise Stop("extract_error")
    v.stages["extract"] = "ok"
    backend = chosen_backend(ctx.requested_backend, cand.backend)
    if backend not in BACKENDS:
        raise UnusableArgument(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    ctx.code, ctx.backend = cand.code, backend
    v.backend = backend
    if backend == "musa":  # torch_musa (or the shim) must be there, and MUSA has no torch.compile baseline
        from musacoder.judge.devices import check_musa_config, require_backend

        require_backend("musa", load_shim=False)
        check_musa_config(backend, cfg.baseline, cfg.time_compile_baseline)
    static = static_rules.check_static(cand.code, backend, cfg.allow_vendor_libs)
    if static.violations:
        v.stages["static_legality"] = "failed"
        v.violations = static.violations
        raise Stop("illegal")
    v.stages["static_legality"] = "ok"
    v.flags += [f"static analysis deferred to runtime evidence: {d}" for d in getattr(static, "deferred", [])[:5]]
    ctx.device_pool = device_pool(ctx.backend, ctx.cfg)
    return static


def chosen_backend(requested: str | None, shown: str | None) -> str:
    """The backend a verification runs on: the one asked for, else the one the candidate's text shows
    (`extract_code(...).backend`), else the CPU's."""
    return requested or shown or "cpu"


def device_pool(backend: str, cfg) -> str:
    """The configured device, else the backend's: `cuda` for CUDA (and Triton where a GPU is visible), the MUSA
    device (or what the shim stands in with) for MUSA, the CPU otherwise."""
    if cfg.device:
        return cfg.device
    if backend == "musa":
        from musacoder.judge.devices import default_device

        return default_device("musa")
    return "cuda" if backend == "cuda" or (backend == "triton" and torch.cuda.is_available()) else "cpu"
