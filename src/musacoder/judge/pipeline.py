"""MooreEval: extract → static legality → build → correctness → runtime legality → timing → reward.

This module is the trusted side's stage machine. It makes the reference model, the inputs (from a secret master seed)
and the reference outputs, and compares; the candidate only ever runs inside a `Sandbox` worker, which never sees
reference outputs. Each stage fills the verdict and either returns what the next stage needs or raises `_Stop` with
the verdict's status.

Whose fault an error is: only what the candidate's own code raised (`runtime_error`, `compile_error`, …) is charged
to it. A fault of the verifier (its own out-of-memory while making inputs, copies, clones or references, a worker
that could not start, anything unexpected on the trusted side) is `infra_error`, which carries no reward. A
verification whose harness ran out of device memory, or whose candidate did while sharing the device, is redone once
with the device to itself (`_RetryAlone`); if the harness still does not fit, the error says how much memory the task
needs and how much the verifier had.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import math
import os
import random
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from musacoder.candidates import extract_code
from musacoder.config import VerifyConfig
from musacoder.feedback import render_feedback
from musacoder.judge import ipc, isolation
from musacoder.judge.baseline import BaselineError, clean_reference_ms, compile_baseline_ms, load_request
from musacoder.judge.compare import (Precision, Yardstick, compare_outputs, float_leaves, max_abs_error, rel_error,
                                     round_mantissa, round_mantissa_, task_audit)
from musacoder.judge.replies import (CallReport, Fault, InitReply, LoadReply, MalformedReply, OutputsReply, ProbeReply,
                                     TimeReply, TrialReply, parse)
from musacoder.judge.inputs import (make_init_inputs, make_inputs, nbytes, output_spec, seed_for, seeded,
                                    to_cpu)
from musacoder.judge.sandbox import Sandbox, WorkerDied, WorkerStartFailed, WorkerTimeout
from musacoder.judge.slots import (DEVICE_SLOTS, HOST_HOLD_BYTES, TRUSTED_FIXED, WORKER_FIXED, Footprint, GiB,
                                   footprint, memory_budget, memory_violations)
from musacoder.legality.runtime import VENDOR_KERNEL, own_kernels, python_compute_violations
from musacoder.legality.static import check_static
from musacoder.records import BACKENDS, Task, Timing, TrialResult, Verdict
from musacoder.reward import kernel_reward
from musacoder.tasks import load_module, load_task

# A worker that ran out of memory in harness code while holding more than its estimated footprint plus this much
# (and plus one input set and one output) was hoarding memory of its own: the candidate's fault, not the verifier's.
HOARD_SLACK = 2 * GiB


def _as_task(task: Task | str | Path, overrides: dict | None) -> Task:
    if isinstance(task, Task):
        if overrides:
            merged = {**task.overrides, **overrides}
            from musacoder.tasks import apply_overrides

            apply_overrides(task.source, merged, task.path or task.name)
            return task.model_copy(update={"overrides": merged})
        return task
    return load_task(task, overrides)


def _candidate_text(candidate: str | Path) -> str:
    if isinstance(candidate, Path):
        return candidate.read_text()
    return candidate


def cuda_available() -> bool:
    return torch.cuda.is_available()


def _timing(xs: list[float]) -> Timing:
    return Timing(median_ms=statistics.median(xs), mean_ms=statistics.fmean(xs),
                  stdev_ms=statistics.stdev(xs) if len(xs) > 1 else 0.0, min_ms=min(xs), max_ms=max(xs), repeats=len(xs))


def _ratio(reference_ms: float, candidate_ms: float) -> float:
    """Speedup: reference median over candidate median (infinite for a candidate timed at 0)."""
    return reference_ms / candidate_ms if candidate_ms > 0 else float("inf")


def _is_oom(e: BaseException) -> bool:
    return isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e)


# the chance that a timing round after the first few is profiled (an audit round), decided in the worker before
# the call: over ~100 such rounds a candidate idle or falling back outside the first rounds meets one almost surely
LATE_AUDIT_P = 0.05
# the reference timed in the candidate's worker this much slower than in a clean one is flagged; the flag is a note
# for the reader (the lower figure counts either way), and on a busy 2-core CPU an honest candidate's gap has reached
# 1.7x, so it is no evidence of a hack on its own
SLOWED_REFERENCE = 1.25


class _Stop(Exception):
    """A stage reached the verdict; its fields are filled, `status` is the verdict's status."""

    def __init__(self, status: str):
        super().__init__(status)
        self.status = status


class _RetryAlone(Exception):
    """Redo the verification with the device to itself (see the module docstring)."""


@dataclass
class _Correctness:
    """What the correctness stage hands on: the trusted reference model, the judged trials, the runtime violations
    seen, the candidate's kernel launches, and notes on how its state dict lined up with the reference's."""

    ref_model: object
    trials: list[TrialResult]
    illegal: list[str] = field(default_factory=list)
    launches: int = 0
    notes: list[str] = field(default_factory=list)


class _Run:
    """State of one verification; `run` drives the stages and turns `_Stop` into the verdict."""

    def __init__(self, task: Task, text: str, backend: str | None, cfg: VerifyConfig):
        self.task, self.text, self.cfg = task, text, cfg
        self.backend = backend
        self.v = Verdict(status="infra_error", task=task.key)
        self.master = cfg.seed if cfg.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
        self.rng = random.Random(self.master ^ 0xA5A5)
        self.device = "cpu"
        self.alone = False
        self.fp: Footprint | None = None
        self.need = 0  # device bytes reserved while the stages run (`_admit`)
        self._large = False
        self._precision_models: tuple | None = None  # (float64 copy, rounded fp32 copy) of the reference, per attempt
        self.ipc = False  # large outputs come over CUDA IPC (musacoder.judge.ipc) once the probe read back
        self._center_ok: bool | None = None  # the reference stayed finite on zero-mean inputs (a "center" trial)

    def finish(self, status: str) -> Verdict:
        v = self.v
        v.status = status
        for stage in ("extract", "static_legality", "build", "binary_legality", "correctness", "runtime_legality",
                      "timing"):
            v.stages.setdefault(stage, "skipped")
        if status != "ok":
            v.correct = v.correct and status not in ("incorrect",)
        if status in ("illegal",):
            v.legal = False
        v.reward = kernel_reward(status, v.pass_fraction, v.legal, v.speedup, self.cfg.reward_lambda, self.cfg.reward_nu_max)
        v.stages["reward"] = "ok" if v.reward is not None else "skipped"
        v.feedback = render_feedback(v)
        return v

    # ----------------------------------------------------------------------------------------------------------
    def run(self) -> Verdict:
        v, cfg = self.v, self.cfg
        cand = extract_code(self.text)
        if cand.code is None:
            v.stages["extract"] = "failed"
            v.error = cand.extract_error
            return self.finish("extract_error")
        v.stages["extract"] = "ok"
        backend = self.backend or cand.backend or "cpu"
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        v.backend = backend
        if backend == "musa":  # torch_musa (or the shim) must be there, and MUSA has no torch.compile baseline
            from musacoder.judge.devices import check_musa_config, require_backend

            require_backend("musa", load_shim=False)
            check_musa_config(backend, cfg.baseline, cfg.time_compile_baseline)
        static = check_static(cand.code, backend, cfg.allow_vendor_libs)
        if static.violations:
            v.stages["static_legality"] = "failed"
            v.violations = static.violations
            return self.finish("illegal")
        v.stages["static_legality"] = "ok"
        self.static = static
        v.flags += [f"static analysis deferred to runtime evidence: {d}" for d in getattr(static, "deferred", [])[:5]]

        device = cfg.device or ("cuda" if backend == "cuda" or (backend == "triton" and cuda_available()) else "cpu")
        if backend == "musa" and not cfg.device:
            from musacoder.judge.devices import default_device

            device = default_device("musa")  # musa; cuda (or cpu) when the shim stands in for torch_musa
        module = load_module(self.task)  # trusted reference
        self.code = cand.code
        snapshot = v.model_copy(deep=True)
        start_failures = 0
        while True:
            try:
                self._on_device(module, cand.code, backend, device, fresh=start_failures > 0)
                return self.finish("ok")
            except _Stop as stop:
                return self.finish(stop.status)
            except WorkerStartFailed as e:
                # not the candidate's doing (no candidate code had reached the worker): try once more, with a worker
                # started for this verification alone, then report an infrastructure error
                start_failures += 1
                note = f"a worker failed to start ({str(e).splitlines()[0][:200]})"
                self._restore(snapshot, keep=("flags",))
                v.flags.append(note)
                if start_failures > 1:
                    v.error = f"{e}\n{e.log_tail[-1500:]}"
                    return self.finish("infra_error")
            except _RetryAlone as e:
                if self.alone:
                    v.error = f"{e} (with the device to itself). {self._memory_advice()}"
                    return self.finish("infra_error")
                self._restore(snapshot, keep=("flags", "stage_s"))
                v.flags.append(f"re-run with the device to itself: {e}")
                self.alone = True

    def _memory_advice(self) -> str:
        cap = DEVICE_SLOTS.capacity(self.device)
        have = f"{cap / GiB:.1f} GiB usable on {self.device}" if cap else "no accounted device memory"
        need = self.fp.describe() if self.fp else "an amount that could not be estimated on meta tensors"
        return f"The task needs {need}; the verifier had {have}. Verify it on a larger GPU or with smaller sizes (--set)."

    def _restore(self, snapshot: Verdict, keep: tuple[str, ...] = ()) -> None:
        """Reset the verdict to `snapshot` (a fresh copy of it each time), except the fields in `keep`; in place,
        since callers hold references to `self.v`."""
        fresh = snapshot.model_copy(deep=True)
        for name in Verdict.model_fields:
            if name not in keep:
                setattr(self.v, name, getattr(fresh, name))

    def _on_device(self, module, code: str, backend: str, device: str, fresh: bool) -> None:
        v, cfg = self.v, self.cfg
        cuda = device.startswith("cuda")
        self.fp = footprint(module, cfg.input_sets) if cuda else None
        need = self.fp.total if self.fp else (WORKER_FIXED + TRUSTED_FIXED if cuda else 0)
        if self.fp:
            v.memory_estimate_gb = {"worker": round(self.fp.worker / GiB, 3), "trusted": round(self.fp.trusted / GiB, 3)}
        self.need = need
        # a task of a gigabyte or more: both sides give their allocator's cached blocks back to the device between
        # steps, so the verifier's peak is nearer the larger side's than the sum of both sides' peaks
        self._large = self.fp is not None and self.fp.inputs + self.fp.outputs >= HOST_HOLD_BYTES
        t0 = time.monotonic()
        # pinned to a device first, reserving nothing: the worker starts and the candidate builds while other
        # verifications run; `_admit` reserves the footprint before anything runs on the device, and the
        # reservation ends only here, after the worker was killed and reaped (a worker of a large task still tearing
        # down holds its gigabytes, so the next verification must not be admitted before it is gone)
        with DEVICE_SLOTS.pin(device, need) as dev, contextlib.ExitStack() as self._reservation:
            v.stage_s["admission_wait"] = round(v.stage_s.get("admission_wait", 0.0) + time.monotonic() - t0, 4)
            self.device = v.device = dev
            try:
                with self._sandbox(backend, dev, fresh=fresh) as sb:
                    # the wait for a ready worker, and (for diagnosis) what the worker says its start cost, part by part
                    v.stage_s["worker_start"] = round(sb.ready_wait_s, 4)
                    v.sandbox = list(sb.layers)
                    if cfg.require_sandbox and (lacking := isolation.missing(sb.layers)):
                        v.error = f"the sandbox lacks {', '.join(lacking)} on this host; see `musacoder doctor`"
                        raise _Stop("infra_error")
                    v.stage_s.update({f"worker.{k}": round(x, 4) for k, x in sb.start_report.items() if math.isfinite(x)})
                    try:
                        self._in_sandbox(sb, module, code, backend, dev)
                    except WorkerTimeout as e:
                        v.error = f"{e} (limit: build {cfg.build_timeout_s:.0f} s, run {cfg.timeout_s:.0f} s)"
                        raise _Stop("timeout") from None
                    except WorkerDied as e:
                        v.error = f"worker died (exit {e.returncode}); last output:\n{e.log_tail[-1500:]}"
                        if e.oom_killed and self._cap_too_small(module):
                            v.error += ("\nThis task's own data alone needs about half that cap or more: raise "
                                        "MUSACODER_WORKER_MEMORY_MB (not the candidate's doing).")
                            raise _Stop("infra_error") from None
                        raise _Stop("crashed") from None
                self._clean_reference_stage(dev)  # the candidate's worker is gone now
            except (torch.OutOfMemoryError, RuntimeError) as e:
                if not _is_oom(e):
                    raise
                raise _RetryAlone(f"the verifier ran out of device memory on the trusted side "
                                  f"({str(e).splitlines()[0][:700]})") from None
            finally:
                self._release(dev)

    def _cap_too_small(self, module) -> bool:
        """Whether the worker's memory cgroup cap (`isolation.worker_memory_mb`) leaves less than twice the task's own
        data in the worker (its estimated footprint without the fixed part for a device context: inputs, outputs,
        weights, the harness's copies): a kill at that cap may then be the verifier's, not the candidate's. A task
        that cannot be estimated counts as fitting."""
        fp = self.fp or footprint(module, self.cfg.input_sets)
        return fp is not None and 2 * (fp.worker - WORKER_FIXED) > isolation.worker_memory_mb() << 20

    def _admit(self) -> None:
        """Take the verification's memory reservation on its device (waiting, into `admission_wait`, until its
        footprint fits beside the others'; with `alone`, the whole device). It is held until `_on_device` has closed
        the worker."""
        dev, t0 = self.device, time.monotonic()
        self._reservation.enter_context(DEVICE_SLOTS.reserve(dev, self.need, alone=self.alone))
        self.v.stage_s["admission_wait"] = round(self.v.stage_s.get("admission_wait", 0.0) + time.monotonic() - t0, 4)
        if dev.startswith("cuda") and cuda_available():
            if self.alone:
                gc.collect()  # what earlier verifications left cached in this process goes back to the device
                torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(torch.device(dev))

    def _give_back(self) -> None:
        """Return this process's cached device blocks to the GPU when the task is large (see `_on_device`)."""
        if self._large and self.device.startswith("cuda") and cuda_available():
            torch.cuda.empty_cache()

    def _release(self, dev: str) -> None:
        """Give the trusted side's device memory back when a verification (or an attempt) ends."""
        self._precision_models = None
        if dev.startswith("cuda") and cuda_available():
            if self._large:  # tensors an error's traceback still holds (reference cycles) go back now, not later
                gc.collect()
            d = torch.device(dev)
            self.v.trusted_mem_gb = round(torch.cuda.max_memory_reserved(d) / GiB, 3)
            torch.cuda.empty_cache()

    def _sandbox(self, backend: str, device: str, fresh: bool = False) -> Sandbox:
        """A fresh candidate worker with the toolchain variables the backend needs."""
        from musacoder.build.cache import toolchain_env

        cfg = self.cfg
        env = toolchain_env(device) if backend == "cuda" or (backend == "musa" and device.startswith("cuda")) else {}
        if backend == "triton" and device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        if device.startswith("cuda") and ":" in device:
            env["MUSACODER_PREWARM_DEVICE"] = device  # a worker started ahead makes its CUDA context while it waits
        return Sandbox(cfg.cache_dir, env=env, keep_workdir=cfg.keep_workdir, memory_limit_gb=cfg.memory_limit_gb,
                       isolate_network=cfg.isolate_network, use_prestarted=not fresh)

    def _ask(self, sb: Sandbox, msg: dict, timeout_s: float, record: type, stage: str):
        """Send a request and return its reply as `record`; a `Fault` goes to `_fault` (which raises), a reply that
        fits neither is the candidate's doing (`crashed`)."""
        try:
            got = parse(sb.request(msg, timeout_s), record)
        except MalformedReply as e:
            self.v.stages[stage] = "error"
            self.v.error = f"the candidate's worker sent a malformed reply to `{msg['op']}` ({e})"
            raise _Stop("crashed") from None
        if isinstance(got, Fault):
            self._fault(got, stage)
        return got

    def _fault(self, fault: Fault, stage: str) -> None:
        """A reply with `ok` false: the candidate's own error, or the harness's (module docstring). Always raises."""
        v = self.v
        v.stages[stage] = "error"
        v.error = fault.error
        cuda = self.device.startswith("cuda")
        if fault.kind == "runtime_error":
            if fault.oom and cuda and not self.alone:
                raise _RetryAlone("the candidate ran out of device memory while other verifications shared the device")
            raise _Stop("runtime_error")
        if fault.kind == "compile_error":
            v.stages[stage] = "failed"
            v.compile_log = fault.log
            raise _Stop("compile_error")
        if fault.oom:
            held, fp = fault.mem_allocated, self.fp
            if fp is not None and held > fp.worker + fp.inputs + fp.outputs + HOARD_SLACK:
                v.error = (f"the candidate's worker held {held / GiB:.1f} GiB of device memory when the verifier needed "
                           f"more in it (the verifier's own part is ~{fp.worker / GiB:.1f} GiB): forward must not keep "
                           f"large allocations alive\n{fault.error[-1500:]}")
                raise _Stop("runtime_error")
            raise _RetryAlone(f"the verifier ran out of device memory in the worker ({fault.where}; "
                              f"{held / GiB:.1f} GiB held there, {fault.mem_free / GiB:.1f} GiB free)")
        raise _Stop("infra_error")

    def _in_sandbox(self, sb: Sandbox, module, code: str, backend: str, device: str) -> None:
        v = self.v
        self.ipc = False
        if device.startswith("cuda") and ipc.available():
            self.ipc = self._probe_ipc(sb, device)
        with self._stage("build"):
            load = self._load(sb, code, backend, device, self.task)
        v.build_s = load.seconds
        v.build_cached = bool(load.builds) and all(b.get("cached") is True for b in load.builds)
        v.compiled = True
        v.stages["build"] = "ok"
        self._check_binaries(sb, load.builds)
        if load.global_state:
            v.stages["runtime_legality"] = "failed"
            v.violations = [f"importing the candidate changed global state: {c}" for c in load.global_state]
            raise _Stop("illegal")
        if device.startswith("cuda") and not cuda_available():
            v.error = "compiled; running needs a CUDA GPU and none is visible on this machine"
            v.legal = True
            raise _Stop("infra_error")
        self._admit()
        self._run_stages(sb, module, device)

    def _check_binaries(self, sb: Sandbox, builds: list[dict]) -> None:
        """The binary rule (`musacoder.legality.binary`: imports and linked libraries) and the machine-code rule
        (`musacoder.legality.machine_code`: clock reads) on every ELF file of the builds the candidate loaded: those
        its worker reports and those the build broker built for it, read here from the cache (or, for a private
        build, from the worker's folder). A library a tool could not read is flagged, not held against the
        candidate."""
        from musacoder.build.cache import built_libraries, is_build_key
        from musacoder.legality.binary import library_violations
        from musacoder.legality.glue import glue_baseline
        from musacoder.legality.machine_code import ToolMissing, library_clock_reads

        v = self.v
        ok = [b for b in builds if isinstance(b, dict) and b.get("ok") is not False]
        keys = sorted(k for k in {b.get("key") for b in ok} | set(sb.served_keys) if is_build_key(k))
        # a builder other than the cache's (torch_musa's) builds in the worker's own folder and names its library
        private = [Path(b["library"]) for b in ok if b.get("key") is None and isinstance(b.get("library"), str)]
        if not keys and not private:
            return
        bad, missing = [], []
        libs = []
        for key in keys:
            found = built_libraries(key, [self.cfg.cache_dir, sb.workdir / "mc-build"])
            if found is None:
                missing.append(key[:12])
            libs += found or []
        for lib in private:
            if lib.resolve().is_relative_to(sb.workdir.resolve()) and lib.is_file():
                libs.append(lib)
            else:
                missing.append(lib.name)
        uninspected, baselines = [], []

        def glue():  # built (or read from the cache) only when a library imports something forbidden
            baselines.append(glue_baseline(Path(self.cfg.cache_dir)))
            return baselines[-1]

        for lib in libs:
            try:
                bad += library_violations(lib, self.cfg.allow_vendor_libs, glue=glue)
            except OSError:  # unreadable here (gone with a cleared cache, say): the verifier's, so not held against it
                missing.append(lib.name)
                continue
            try:
                bad += library_clock_reads(lib)
            except (ToolMissing, OSError, subprocess.SubprocessError) as e:
                uninspected.append(f"{lib.name} ({str(e)[:160]})")
        if uninspected:
            v.flags.append(f"machine code not read for clock reads: {'; '.join(uninspected)}")
        if errors := sorted({b.error for b in baselines if b.error}):
            v.flags.append(f"binary rule judged without its glue baseline: {'; '.join(errors)}")
        if missing:
            v.flags.append(f"binary rule not applied (no finished, readable library) to: {', '.join(missing)}")
        if bad:
            v.stages["binary_legality"] = "failed"
            v.violations = list(dict.fromkeys(bad))
            raise _Stop("illegal")
        v.stages["binary_legality"] = "ok"

    def _load(self, sb: Sandbox, code: str, backend: str, device: str, task: Task) -> LoadReply:
        """Build and import the candidate in the worker. An error while importing is the candidate's (stage `build`
        failed); a compile error is `compile_error`."""
        try:
            got = parse(sb.request(load_request(code, backend, device, self.cfg, task), self.cfg.build_timeout_s),
                        LoadReply)
        except MalformedReply as e:
            self.v.stages["build"] = "error"
            self.v.error = f"the candidate's worker sent a malformed reply to `load` ({e})"
            raise _Stop("crashed") from None
        if isinstance(got, Fault):
            self.v.build_s = sum(x for b in got.builds if isinstance(x := b.get("seconds"), (int, float)))
            if got.kind == "runtime_error" and got.where == "import":
                self.v.stages["build"], self.v.error = "failed", got.error
                raise _Stop("runtime_error")
            self._fault(got, "build")
        return got

    def _probe_ipc(self, sb: Sandbox, device: str) -> bool:
        """Whether this worker's CUDA IPC exports read back here (asked before any candidate code is imported)."""
        try:
            got = parse(sb.request({"op": "ipc_probe", "device": device}, self.cfg.timeout_s), ProbeReply)
            if isinstance(got, ProbeReply) and ipc.probe_check(got.probe, device):
                return True
            note = got.error[-200:] if isinstance(got, Fault) else "the pattern read back wrong"
        except (ipc.IpcError, MalformedReply) as e:
            note = str(e)
        except Exception as e:  # noqa: BLE001 - whatever this host's driver or torch does wrong, the pipe still works
            note = f"{type(e).__name__}: {e}"[:200]
        self.v.flags.append(f"outputs travel through the pipe: CUDA IPC probe failed ({note})")
        return False

    def _received(self, sb: Sandbox, outputs):
        """The outputs of the last reply, with CUDA IPC exports replaced by copies in this process. An export that
        cannot be read is asked for again through the pipe (and IPC is off for the rest of the verification)."""
        if not self.ipc:
            return outputs
        try:
            return ipc.import_outputs(outputs, self.device)
        except ipc.IpcError as e:
            self.ipc = False
            self.v.flags.append(f"an output export could not be read ({str(e)[:160]}); outputs resent through the pipe")
            return self._ask(sb, {"op": "resend"}, self.cfg.timeout_s, OutputsReply, "correctness").outputs

    @contextlib.contextmanager
    def _stage(self, name: str, slot: str | None = None):
        """Time a stage into `verdict.stage_s` (and the wait for its device slot into `<name>_wait`); with `slot`
        ("shared" or "exclusive") the stage holds the verification's device that way."""
        t0 = time.monotonic()
        if slot is None:
            try:
                yield
            finally:
                self.v.stage_s[name] = round(self.v.stage_s.get(name, 0.0) + time.monotonic() - t0, 4)
            return
        with DEVICE_SLOTS.hold(self.device, exclusive=slot == "exclusive"):
            t1 = time.monotonic()
            self.v.stage_s[f"{name}_wait"] = round(self.v.stage_s.get(f"{name}_wait", 0.0) + t1 - t0, 4)
            try:
                yield
            finally:
                self.v.stage_s[name] = round(self.v.stage_s.get(name, 0.0) + time.monotonic() - t1, 4)

    # -- correctness -------------------------------------------------------------------------------------------
    def _trial_plan(self, n: int) -> list[str | None]:
        """The input distribution of each correctness trial (see `musacoder.judge.inputs`): the task's own, every
        other one rescaled log-normally, plus the structured ones (zero-mean, and zero-mean with one offset slice),
        in a secret order."""
        cfg = self.cfg
        plan = ["scale" if cfg.perturb_inputs and i % 2 == 1 else None for i in range(n)]
        plan += ["center", "slice"][:cfg.structured_trials] if cfg.perturb_inputs else []
        self.rng.shuffle(plan)
        return plan

    def _correctness(self, sb: Sandbox, module, device: str, plan: list[str | None], label: int) -> _Correctness:
        """Reference weights and one profiled trial per entry of `plan` in `sb`, with the device shared."""
        v, cfg = self.v, self.cfg
        init_seed = seed_for(self.master, 0, label)
        init_inputs = make_init_inputs(module, init_seed)
        with seeded(init_seed):
            ref_model = module.Model(*init_inputs).to(device)
        state = {k: t.detach().cpu() for k, t in ref_model.state_dict().items()}
        if label == 0:
            self._state, self._init_inputs, self._init_seed = state, init_inputs, init_seed
        self._precision_models = self._make_precision_models(ref_model)
        init = self._ask(sb, {"op": "init", "init_inputs": init_inputs, "state_dict": state, "seed": init_seed,
                              "device": device, "release_memory": self._large}, cfg.timeout_s, InitReply, "correctness")
        got = _Correctness(ref_model, [], notes=list(init.notes))
        weight_bytes = nbytes(list(state.values()))
        deadline = time.monotonic() + cfg.timeout_s
        for i, perturb in enumerate(plan):
            seed = seed_for(self.master, 1 + label, i)
            asked = perturb
            perturb, ref_out, precision = self._reference_case(module, ref_model, seed, perturb, device)
            if asked == "center" and label == 0:
                self._center_ok = perturb == "center"
            expect = output_spec(ref_out)
            reply = self._ask(sb, {"op": "trial", "seed": seed, "perturb": perturb, "profile": True, "ipc": self.ipc,
                                   "expect": expect},
                              max(1.0, deadline - time.monotonic()), TrialReply, "correctness")
            outputs = self._received(sb, reply.outputs)
            if i == 0 and label == 0:  # the task's own footprint sets the memory budget
                self._expect = expect  # the timing rounds' outputs are held to it too (`output_problem`)
                self._task_bytes = weight_bytes + nbytes(ref_out) + self._input_bytes(module, seed, ref_out)
                got.illegal += self._memory_violations(init.device_mem_peak)
                v.flags += task_audit(ref_out)
            got.illegal += self._runtime_violations(reply.report, i)
            got.launches += reply.report.launches
            got.trials.append(self._judge_trial(i, ref_out, outputs, reply.report, precision))
            del outputs
            del ref_out, precision
            self._give_back()
        return got

    def _input_bytes(self, module, seed: int, ref_out) -> int:
        if self.fp is not None:
            return self.fp.inputs
        try:
            return nbytes(make_inputs(module, seed, device="meta"))
        except Exception:  # noqa: BLE001 - an op meta does not implement
            return 4 * nbytes(ref_out)

    def _make_precision_models(self, ref_model):
        """The reference in float64, and in fp32 with every floating weight rounded to a 10-bit mantissa: the
        precision rule's yardsticks (`musacoder.judge.compare`). None (with a flag) where the task has no fp32
        weights or inputs to speak of, or its model cannot be copied or converted."""
        try:
            model64 = copy.deepcopy(ref_model).double()
            low = copy.deepcopy(ref_model)
            with torch.no_grad():
                for t in list(low.parameters()) + list(low.buffers()):
                    if t.dtype == torch.float32:
                        t.copy_(round_mantissa(t))
            return model64, low
        except Exception as e:  # noqa: BLE001 - models that cannot be deep-copied or converted
            if _is_oom(e):
                raise
            self.v.flags.append(f"precision rule not applied: the reference model could not be copied to float64 ({e})")
            return None

    def _reference_case(self, module, ref_model, seed: int, perturb: str | None, device: str, fallback: bool = True):
        """Reference output for the inputs made from `seed` and `perturb` (the worker makes the same inputs);
        returns (the perturbation kept: None when the task's domain forbids it, the output on the comparison
        device, the precision rule's yardsticks or None). With `fallback` False the perturbation is kept whatever
        the output (the worker made its inputs already: a timed round's)."""
        with torch.no_grad():
            ref_out = ref_model(*make_inputs(module, seed, perturb=perturb, device=device))
            if fallback and perturb and not _all_finite(ref_out):
                perturb = None  # the task's domain forbids the perturbation
                ref_out = ref_model(*make_inputs(module, seed, device=device))
        precision = self._yardsticks(module, seed, perturb, device, ref_out)
        self._give_back()  # the yardsticks' temporaries, gigabytes at full size, back before the worker runs
        return perturb, ref_out if self._compare_device() != "cpu" else to_cpu(ref_out), precision

    def _yardsticks(self, module, seed: int, perturb: str | None, device: str, ref_out) -> Precision | None:
        """e_t and e_low per fp32 output leaf (the precision rule in `musacoder.judge.compare`)."""
        leaves = [(p, t) for p, t in float_leaves(ref_out) if t.dtype == torch.float32]
        if not leaves or self._precision_models is None:
            return None
        model64, low = self._precision_models
        cmp = self._compare_device()
        try:
            with torch.no_grad():  # inputs converted one at a time and rounded in place: no copies of their size
                xs = make_inputs(module, seed, perturb=perturb, device=device)
                for k in range(len(xs)):
                    if _is_f32(xs[k]):
                        xs[k] = xs[k].double()
                out64 = model64(*xs)
                del xs
                ref64 = dict(float_leaves(out64))
                del out64
                xs = [round_mantissa_(x) if _is_f32(x) else x
                      for x in make_inputs(module, seed, perturb=perturb, device=device)]
                out_low = low(*xs)
                del xs
                low_leaves = dict(float_leaves(out_low))
                del out_low
        except Exception as e:  # noqa: BLE001 - ops without float64 kernels, float32 constants inside forward, …
            if _is_oom(e):
                raise
            self._precision_models = None
            self.v.flags.append(f"precision rule not applied: the reference does not run in float64 "
                                f"({type(e).__name__}: {str(e).splitlines()[0][:160]})")
            return None
        out = Precision()
        for path, r32 in leaves:
            r64, rl = ref64.get(path), low_leaves.get(path)
            if r64 is None or rl is None or r64.shape != r32.shape or rl.shape != r32.shape:
                continue
            out.leaves[path] = Yardstick(r64 if cmp != "cpu" else r64.cpu(), rel_error(r32, r64, cmp),
                                         rel_error(rl, r64, cmp), max_abs_error(r32, r64, cmp),
                                         max_abs_error(rl, r64, cmp))
        return out

    def _compare_device(self) -> str:
        """Outputs are compared on the verification's GPU when it has one (within its slot), else on the CPU."""
        return self.device if self.device.startswith("cuda") and cuda_available() else "cpu"

    def _judge_trial(self, i: int, ref_out, cand_out, rep: CallReport,
                     precision: Precision | None = None) -> TrialResult:
        if rep.output_type_error:
            return TrialResult(trial=i, passed=False, message=rep.output_type_error)
        if rep.input_mutation:
            return TrialResult(trial=i, passed=False, message=rep.input_mutation)
        c = compare_outputs(ref_out, cand_out, self.cfg.rel_l2_tol, device=self._compare_device(), precision=precision)
        return TrialResult(trial=i, passed=c.passed, max_abs_error=c.max_abs_error, rel_l2_error=c.rel_l2_error,
                           precision_error=c.precision_error, precision_bound=c.precision_bound, message=c.message)

    # -- runtime legality --------------------------------------------------------------------------------------
    def _runtime_violations(self, rep: CallReport, where) -> list[str]:
        out = [f"illegal PyTorch op {op}" for op in rep.illegal_ops]
        out += self._memory_violations(rep.device_mem_peak)
        out += python_compute_violations(rep.python_op_counts)
        out += [f"forward changed global state: {c}" for c in rep.global_state]
        out += rep.device_clocks
        kernels = rep.device_kernels
        if self.device.startswith("cuda") and self.v.backend in ("cuda", "triton"):
            own = own_kernels(kernels, self.static.kernel_defs)
            if not own:
                out.append("none of the candidate's own GPU kernels (" + ", ".join(self.static.kernel_defs[:5]) +
                           ") appeared in the profiler's CUDA kernel list")
            if not self.cfg.allow_vendor_libs:
                vendor = sorted({k for k in kernels if VENDOR_KERNEL.search(k) and k not in own})
                if vendor:
                    out.append("vendor library kernels ran (strict policy): " + ", ".join(x[:60] for x in vendor[:3]))
        if rep.py_threads_added > 0:
            out.append("forward left a Python thread running (background computation is not allowed)")
        if rep.native_threads_added > 0 and where != 0:
            out.append("forward started new native threads that outlived the call")
        return out

    def _memory_violations(self, peak) -> list[str]:
        return memory_violations(peak, memory_budget(self.cfg.max_device_memory_gb, getattr(self, "_task_bytes", 0)))

    def _run_stages(self, sb: Sandbox, module, device: str) -> None:
        v, cfg = self.v, self.cfg
        with self._stage("correctness", "shared"):
            got = self._correctness(sb, module, device, self._trial_plan(cfg.trials), 0)
        v.trials = got.trials
        passed = sum(t.passed for t in got.trials)
        v.pass_fraction = passed / len(got.trials)
        v.correct = passed == len(got.trials)
        v.stages["correctness"] = "ok" if v.correct else "failed"
        illegal = got.illegal
        if got.launches == 0:
            illegal.append("none of the candidate's own kernels ran during forward (decoy kernel or fallback)")
        v.violations = list(dict.fromkeys(illegal))
        if illegal:
            v.stages["runtime_legality"] = "failed"
            v.legal = False
            raise _Stop("illegal")
        v.legal = True
        v.stages["runtime_legality"] = "ok"
        if not v.correct:
            v.flags += [f"state dict: {n}" for n in got.notes[:5]]
            raise _Stop("incorrect")
        self._extra_shapes(device)
        if not cfg.time_candidate:
            v.stages["timing"] = "skipped"
            return
        self._timing_stage(sb, module, got.ref_model, device)

    def _extra_shapes(self, device: str) -> None:
        """Re-run the candidate at each of `cfg.extra_shapes` (size overrides) in a fresh worker, 2 trials each; a
        candidate that hard-codes its shapes fails here."""
        v, cfg = self.v, self.cfg
        for k, shape in enumerate(cfg.extra_shapes, start=1):
            task = _as_task(self.task, shape)
            module = load_module(task)
            with self._sandbox(v.backend, device) as sb:
                main_ipc, self.ipc = self.ipc, False  # this worker was not probed: its outputs use the pipe
                try:
                    self._load(sb, self.code, v.backend, device, task)
                    with self._stage("correctness", "shared"):
                        got = self._correctness(sb, module, device, [None, "center"], 100 * k)
                except _Stop:
                    v.error = f"at extra shape {shape}: {v.error}"
                    raise
                finally:
                    self.ipc = main_ipc
            if got.illegal or got.launches == 0:
                v.violations = list(dict.fromkeys(got.illegal or ["no kernel of the candidate ran"]))
                v.legal = False
                v.stages["runtime_legality"] = "failed"
                raise _Stop("illegal")
            failed = [t for t in got.trials if not t.passed]
            if failed:
                for t in failed:
                    t.message = f"at extra shape {shape}: {t.message}"
                v.trials += got.trials
                v.correct = False
                v.pass_fraction = sum(t.passed for t in v.trials) / len(v.trials)
                v.stages["correctness"] = "failed"
                raise _Stop("incorrect")

    # -- timing ------------------------------------------------------------------------------------------------
    def _timing_stage(self, sb: Sandbox, module, ref_model, device: str) -> None:
        v, cfg = self.v, self.cfg
        cand, ref = self._time_once(sb, module, ref_model, device)
        speedup = _ratio(ref.median_ms, cand.median_ms)
        if speedup > cfg.outlier_speedup:
            cand2, ref2 = self._time_once(sb, module, ref_model, device)
            s2 = _ratio(ref2.median_ms, cand2.median_ms)
            v.flags.append(f"outlier speedup {speedup:.3g}x re-timed: {s2:.3g}x; the lower is kept")
            if s2 < speedup:
                cand, ref, speedup = cand2, ref2, s2
        v.candidate_timing, v.reference_timing = cand, ref
        v.runtime_ms, v.ref_runtime_ms = cand.median_ms, ref.median_ms
        v.ref_runtime_ms_in_process = ref.median_ms
        v.speedup_vs_eager = speedup
        if cfg.time_compile_baseline or cfg.baseline == "compile":
            try:
                v.compile_runtime_ms = compile_baseline_ms(
                    self.task, device, cfg, state=self._state, init_inputs=self._init_inputs, seed=self._init_seed,
                    perturb=self._timing_perturb(),
                    hold=lambda slot: self._stage("compile_baseline" if slot == "exclusive" else "compile_build", slot))
                v.speedup_vs_compile = v.compile_runtime_ms / cand.median_ms
            except (BaselineError, WorkerTimeout, WorkerDied, WorkerStartFailed) as e:
                v.flags.append(f"torch.compile baseline unavailable: {e}")
        v.speedup = v.speedup_vs_compile if cfg.baseline == "compile" else v.speedup_vs_eager
        v.stages["timing"] = "ok"

    def _clean_reference_stage(self, device: str) -> None:
        """After the candidate's worker is gone (killed and reaped, its memory back), within the verification's
        device reservation: the eager reference timed again in a fresh reference-only worker, on the inputs of the
        candidate's last `time` request, as many rounds. The lower of that and the candidate's worker's figure is
        the speedup's reference, so a reference slowed by whatever the candidate left in its process (allocator,
        threads, scheduling, patched functions) earns nothing, while the interleaved figure, which cancels drift, is
        kept when it is the lower. A worker that cannot give the figure leaves the interleaved one, flagged."""
        v, cfg = self.v, self.cfg
        ref = v.reference_timing
        if not cfg.clean_reference or v.stages.get("timing") != "ok" or ref is None:
            return
        master_t, input_sets, perturb = self._timed_with
        try:
            ms = clean_reference_ms(
                self.task, device, cfg, state=self._state, init_inputs=self._init_inputs, seed=self._init_seed,
                master_seed=master_t, input_sets=input_sets, warmup=cfg.warmup, repeats=ref.repeats, perturb=perturb,
                hold=lambda slot: self._stage("clean_reference" if slot == "exclusive" else "clean_reference_start",
                                              slot))
        except (BaselineError, WorkerTimeout, WorkerDied, WorkerStartFailed) as e:
            v.flags.append(f"the reference was not re-timed in a clean worker ({str(e).splitlines()[0][:160]}); "
                           "the figure from the candidate's worker is used")
            return
        clean = _timing(ms)
        v.ref_runtime_ms_clean = clean.median_ms
        if ref.median_ms > clean.median_ms * SLOWED_REFERENCE:
            v.flags.append(f"the reference ran {ref.median_ms / clean.median_ms:.2f}x slower in the candidate's worker "
                           "than in a clean one; the clean figure is used")
        if clean.median_ms < ref.median_ms:
            v.reference_timing, v.ref_runtime_ms = clean, clean.median_ms
            v.speedup_vs_eager = _ratio(clean.median_ms, v.runtime_ms)
            if cfg.baseline == "eager":
                v.speedup = v.speedup_vs_eager

    def _timing_perturb(self) -> str | None:
        """The perturbation of every timed round's inputs (`VerifyConfig.timing_inputs`). "center" puts the timed
        rounds on zero-mean inputs, where the re-check after timing has the precision rule's power and skipped work
        misses by the order of the result, so a kernel that tells the task's own inputs (often non-negative, where
        fp16 arithmetic passes the tolerances and ReLU is the identity) from the checked ones gains nothing: the
        inputs it is timed on are checked as strictly as any. The task's own inputs where its domain forbids
        zero-mean ones (the reference was not finite on the "center" trial) or no such trial ran."""
        cfg = self.cfg
        if cfg.timing_inputs == "task" or not cfg.perturb_inputs or not self._center_ok:
            return None
        return "center"

    def _time_once(self, sb: Sandbox, module, ref_model, device: str) -> tuple[Timing, Timing]:
        v, cfg = self.v, self.cfg
        master_t = self.rng.getrandbits(62)
        perturb = self._timing_perturb()
        pool = list(range(cfg.warmup, cfg.warmup + cfg.repeats + cfg.rechecks))
        audits = sorted(self.rng.sample(pool, min(cfg.rechecks, len(pool))))

        input_sets = self.fp.input_sets if self.fp else cfg.input_sets
        self._timed_with = (master_t, input_sets, perturb)
        with self._stage("timing", "exclusive"):  # nothing else on the device while timing
            rep = self._ask(sb, {"op": "time", "master_seed": master_t, "input_sets": input_sets, "perturb": perturb,
                                 "warmup": cfg.warmup, "repeats": cfg.repeats, "max_repeats": cfg.max_repeats,
                                 "budget_s": cfg.time_budget_s, "target_sem": cfg.target_sem, "audit_rounds": audits,
                                 "check_keep": cfg.rechecks, "check_key": self.rng.getrandbits(62),
                                 "late_audit_from": pool[-1] + 1 if pool else cfg.warmup, "late_audit_p": LATE_AUDIT_P,
                                 "late_audit_max": cfg.rechecks, "late_audit_key": self.rng.getrandbits(62),
                                 "host_hold_bytes": HOST_HOLD_BYTES, "expect": getattr(self, "_expect", None)},
                            cfg.timeout_s + cfg.time_budget_s * 2, TimeReply, "timing")
        # the first of these that the timed rounds show makes the verdict illegal (a round that changed the
        # harness's code or its inputs ends the timing there, before the reference runs)
        for why in (self._memory_violations(rep.device_mem_peak),
                    rep.patched_rounds and [
                        f"the code the harness runs in the worker was changed as the candidate's call returned in "
                        f"{len(rep.patched_rounds)} timed round(s): {', '.join(rep.patched)} (PyTorch's classes and "
                        "functions, the verifier's own and the interpreter's hooks may not be patched)"],
                    rep.relaid_rounds and [
                        f"forward changed the shape, strides or storage of its inputs in {len(rep.relaid_rounds)} "
                        "timed round(s) (inputs are read-only)"],
                    rep.no_launch_rounds and [
                        f"the candidate's own kernels did not run in {len(rep.no_launch_rounds)} timed round(s) "
                        "(cached or fallback results while timing)"],
                    rep.device_clocks):
            if why:
                v.violations += why
                v.legal = False
                v.stages["timing"] = "failed"
                raise _Stop("illegal")
        if not rep.candidate_ms or not rep.reference_ms:
            v.stages["timing"] = "error"
            v.error = "the candidate's worker returned no timed rounds"
            raise _Stop("crashed")
        # Re-check the audited rounds (secretly chosen profiled ones plus the final one) and the checked timed rounds
        # against the reference; the outputs were kept in the worker and are fetched with the device shared again.
        with self._stage("recheck", "shared"):
            return self._recheck(sb, module, ref_model, device, master_t, perturb, rep)

    def _recheck(self, sb: Sandbox, module, ref_model, device: str, master_t: int, perturb: str | None,
                 rep: TimeReply) -> tuple[Timing, Timing]:
        v = self.v
        rounds = sorted(list(rep.audits.items()) + list(rep.checks.items()), key=lambda rc: rc[0])
        for r, audit in rounds:  # one kept output at a time: at full sizes each can be gigabytes on both sides
            taken = self._ask(sb, {"op": "take_outputs", "ipc": self.ipc, "rounds": [r]}, self.cfg.timeout_s,
                              OutputsReply, "timing")
            outputs = self._received(sb, taken.outputs)
            if not isinstance(outputs, dict):
                v.stages["timing"] = "error"
                v.error = "the candidate's worker returned the kept outputs in a malformed reply"
                raise _Stop("crashed")
            _, ref_out, precision = self._reference_case(module, ref_model, seed_for(master_t, r), perturb, device,
                                                         fallback=False)
            t = self._judge_trial(r, ref_out, outputs.pop(r, None), audit.report, precision)
            del ref_out, precision, outputs
            self._give_back()
            if not t.passed:
                t.message = f"re-check after timing (round {r}): {t.message}"
                v.trials.append(t)
                v.correct = False
                v.legal = False  # stale/cached outputs while timing are a hack, not a partial solution: s = -1
                v.pass_fraction = sum(x.passed for x in v.trials) / len(v.trials)
                v.stages["timing"] = "failed"
                v.violations.append("outputs produced while timing were wrong (stale or cached results)")
                raise _Stop("incorrect")
            if r not in rep.audits:
                continue  # a checked timed round: output only
            bad = self._runtime_violations(audit.report, r)
            if audit.report.launches == 0:
                bad.append("none of the candidate's own kernels ran in a timed round (fallback while timing)")
            if bad:
                v.violations = list(dict.fromkeys(v.violations + bad))
                v.legal = False
                v.stages["timing"] = "failed"
                raise _Stop("illegal")
        dev = [a.report.device_time_ms for a in rep.audits.values() if a.report.device_time_ms]
        if dev:
            v.candidate_device_ms = statistics.median(dev)
        v.timer_overhead_ms = rep.timer_overhead_ms
        if rep.device_mem_peak:
            v.device_mem_gb = round(rep.device_mem_peak / 2**30, 3)
        return _timing(rep.candidate_ms), _timing(rep.reference_ms)


def _is_f32(x) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype == torch.float32


def _all_finite(obj) -> bool:
    if isinstance(obj, torch.Tensor):
        return not obj.is_floating_point() or bool(torch.isfinite(obj).all())
    if isinstance(obj, (list, tuple)):
        return all(_all_finite(x) for x in obj)
    return True


_FP32_LOCK = threading.Lock()
_fp32_users = 0
_fp32_saved: tuple[bool, bool] | None = None


@contextlib.contextmanager
def exact_fp32():
    """References in this process are computed in true fp32 while any verification runs: TF32 off for cuBLAS and
    cuDNN (PyTorch enables it for cuDNN convolutions by default, and a TF32 reference would make an honest fp32
    kernel look wrong and a TF32 one look right). The previous settings come back when the last one ends. The
    candidate's worker times the eager reference with PyTorch's defaults, as its users run it."""
    global _fp32_users, _fp32_saved
    with _FP32_LOCK:
        if _fp32_users == 0:
            _fp32_saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        _fp32_users += 1
    try:
        yield
    finally:
        with _FP32_LOCK:
            _fp32_users -= 1
            if _fp32_users == 0 and _fp32_saved is not None:
                torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = _fp32_saved


def verify(task: Task | str | Path, candidate: str | Path, backend: str | None = None, overrides: dict | None = None,
           config: VerifyConfig | None = None) -> Verdict:
    """Run MooreEval on one candidate (raw model response or plain code, or a Path to a file holding it).

    `backend` defaults to what the candidate's code shows (`cpu` when it shows nothing). Always returns a Verdict;
    raises only for unusable arguments (missing task file, unknown override, unknown backend).
    """
    cfg = config or VerifyConfig()
    t = _as_task(task, overrides)
    t0 = time.monotonic()
    run = _Run(t, _candidate_text(candidate), backend, cfg)
    try:
        with exact_fp32():
            verdict = run.run()
    except (ValueError, FileNotFoundError):
        raise
    except Exception as e:  # noqa: BLE001 - anything unexpected on the trusted side is an infrastructure error
        run.v.error = f"{type(e).__name__}: {e}"
        verdict = run.finish("infra_error")
    verdict.wall_s = time.monotonic() - t0
    return verdict
