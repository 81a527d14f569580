"""MooreEval: extract → static legality → build → correctness → runtime legality → timing → reward.

This module is the trusted side. It makes the reference model, the inputs (from a secret master seed) and the reference
outputs, and compares; the candidate only ever runs inside a `Sandbox` worker, which never sees reference outputs.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import threading
import statistics
import time
from pathlib import Path

import torch

from musacoder.candidates import extract_code
from musacoder.config import VerifyConfig
from musacoder.feedback import render_feedback
from musacoder.judge.compare import compare_outputs
from musacoder.judge.inputs import make_init_inputs, make_inputs, seed_for, seeded, to_device
from musacoder.judge.sandbox import Sandbox, WorkerDied, WorkerStartFailed, WorkerTimeout
from musacoder.legality.runtime import VENDOR_KERNEL, python_compute_violations
from musacoder.legality.static import check_static
from musacoder.records import BACKENDS, Task, Timing, TrialResult, Verdict
from musacoder.reward import kernel_reward
from musacoder.tasks import load_module, load_task


class DeviceSlots:
    """The run pool's scheduler: which verification may use which device, and how.

    Each device is a readers-writer slot. Correctness trials hold it *shared* (at most `max_shared` verifications at
    once: their speed does not matter, only their outputs), timing holds it *exclusively* (nothing else runs on the
    device while a candidate or a baseline is timed). Timings come first: a shared waiter waits while any exclusive
    waiter is queued for its device (and behind earlier shared waiters), exclusive waiters are served in arrival order.
    So once a device has been drained for one timing, every timing then waiting runs back to back before the shared
    holders come back: one drain of the shared holders per batch of timings instead of per timing. Shared waiters are
    not starved: while they wait, new exclusive requests come only from verifications already past their shared stage,
    so each batch ends. `assign` pins a verification to one concrete device (the least loaded) before its worker starts,
    so the worker can create its CUDA context outside the slot; `cuda` means any visible GPU, `cuda:N` that GPU, `cpu`
    the host. `cuda_count` fixes the number of GPUs (tests)."""

    def __init__(self, cuda_count: int | None = None, max_shared: int = 8, memory: dict[str, int] | None = None):
        self._cv = threading.Condition()
        self._reserved: dict[str, int] = {}  # device memory reserved by the verifications pinned to each device
        self._memory = dict(memory or {})  # usable bytes per device (tests); else 85 % of the GPU's total
        self._shared: dict[str, int] = {}
        self._exclusive: set[str] = set()
        self._queue: dict[int, tuple[set[str], bool]] = {}  # waiters by arrival ticket → (devices, exclusive?)
        self._next_ticket = 0
        self._assigned: dict[str, int] = {}
        self._cuda_count = cuda_count
        self.max_shared = max_shared
        self.trace: list[tuple[str, str, float, float]] | None = None  # set to [] to record (device, kind, start, end)
        self.peak: dict[str, tuple[int, int]] = {}  # per device: most verifications pinned at once, most bytes reserved

    def devices_for(self, device: str) -> list[str]:
        if device == "cuda":
            n = self._cuda_count if self._cuda_count is not None else max(1, torch.cuda.device_count())
            return [f"cuda:{i}" for i in range(n)]
        return [device]

    def capacity(self, dev: str) -> int | None:
        """Usable memory of a device in bytes (None: not accounted, e.g. the CPU)."""
        if dev in self._memory:
            return self._memory[dev]
        if dev.startswith("cuda") and torch.cuda.is_available():
            self._memory[dev] = int(0.85 * torch.cuda.get_device_properties(torch.device(dev)).total_memory)
            return self._memory[dev]
        return None

    def _fits(self, dev: str, need: int) -> bool:
        cap = self.capacity(dev)
        held = self._reserved.get(dev, 0)
        return cap is None or held == 0 or held + need <= cap

    @contextlib.contextmanager
    def assign(self, device: str, need_bytes: int = 0):
        """Pin one verification to the concrete device with the fewest verifications pinned to it, reserving
        `need_bytes` of its memory until the verification ends: a verification waits until its estimate fits beside
        the others' (one always runs, however large), so concurrent verifications cannot run a GPU out of memory."""
        with self._cv:
            while True:
                fits = [d for d in self.devices_for(device) if self._fits(d, need_bytes)]
                if fits:
                    dev = min(fits, key=lambda d: self._assigned.get(d, 0))
                    break
                self._cv.wait()
            self._assigned[dev] = self._assigned.get(dev, 0) + 1
            self._reserved[dev] = self._reserved.get(dev, 0) + need_bytes
            most_pinned, most_reserved = self.peak.get(dev, (0, 0))
            self.peak[dev] = (max(most_pinned, self._assigned[dev]), max(most_reserved, self._reserved[dev]))
        try:
            yield dev
        finally:
            with self._cv:
                self._assigned[dev] -= 1
                self._reserved[dev] -= need_bytes
                self._cv.notify_all()

    def _can_take(self, dev: str, exclusive: bool) -> bool:
        if dev in self._exclusive:
            return False
        if exclusive:
            return self._shared.get(dev, 0) == 0
        return self._shared.get(dev, 0) < self.max_shared

    @contextlib.contextmanager
    def hold(self, device: str, exclusive: bool = True):
        """Hold a device (shared or exclusive); `device` may be a pool name (`cuda`): the first free one is taken.
        A shared waiter waits while an exclusive waiter is queued for the device and behind earlier shared waiters;
        an exclusive one only behind earlier exclusive waiters (timings run in batches, see the class)."""
        choices = self.devices_for(device)
        with self._cv:
            ticket = self._next_ticket
            self._next_ticket += 1
            self._queue[ticket] = (set(choices), exclusive)
            try:
                while True:
                    free = [d for d in choices if self._can_take(d, exclusive)
                            and not any(d in ds and (ex and t < ticket if exclusive else ex or t < ticket)
                                        for t, (ds, ex) in self._queue.items())]
                    if free:
                        dev = free[0]
                        break
                    self._cv.wait()
            finally:
                del self._queue[ticket]
                self._cv.notify_all()
            if exclusive:
                self._exclusive.add(dev)
            else:
                self._shared[dev] = self._shared.get(dev, 0) + 1
        t0 = time.monotonic()
        try:
            yield dev
        finally:
            with self._cv:
                if exclusive:
                    self._exclusive.discard(dev)
                else:
                    self._shared[dev] -= 1
                if self.trace is not None:
                    self.trace.append((dev, "exclusive" if exclusive else "shared", t0, time.monotonic()))
                self._cv.notify_all()


DEVICE_SLOTS = DeviceSlots()


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


class _Run:
    """State of one verification; each stage method fills the verdict or raises _Stop."""

    def __init__(self, task: Task, text: str, backend: str | None, cfg: VerifyConfig):
        self.task, self.text, self.cfg = task, text, cfg
        self.backend = backend
        self.v = Verdict(status="infra_error", task=task.key)
        self.master = cfg.seed if cfg.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
        self.rng = random.Random(self.master ^ 0xA5A5)
        self.device = "cpu"

    def finish(self, status: str) -> Verdict:
        v = self.v
        v.status = status
        for stage in ("extract", "static_legality", "build", "correctness", "runtime_legality", "timing"):
            v.stages.setdefault(stage, "skipped")
        if status != "ok":
            v.correct = v.correct and status not in ("incorrect",)
        if status in ("illegal",):
            v.legal = False
        v.reward = kernel_reward(status, v.pass_fraction, v.legal, v.speedup, self.cfg.reward_lambda, self.cfg.reward_nu_max)
        v.stages["reward"] = "ok"
        v.feedback = render_feedback(v)
        return v

    # ----------------------------------------------------------------------------------------------------------
    def run(self) -> Verdict:
        v, cfg = self.v, self.cfg
        cand = extract_code(self.text)
        if cand.code is None:
            v.stages["extract"] = "failed"
            v.error = cand.extract_error
            v.violations = []
            return self.finish("extract_error")
        v.stages["extract"] = "ok"
        backend = self.backend or cand.backend or "cpu"
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        v.backend = backend
        static = check_static(cand.code, backend, cfg.allow_vendor_libs)
        if static.violations:
            v.stages["static_legality"] = "failed"
            v.violations = static.violations
            return self.finish("illegal")
        v.stages["static_legality"] = "ok"
        self.static = static

        device = cfg.device or ("cuda" if backend == "cuda" or (backend == "triton" and cuda_available()) else "cpu")
        module = load_module(self.task)  # trusted reference
        self.code = cand.code
        snapshot, notes = v.model_copy(deep=True), []
        for attempt in range(2):
            try:
                return self._on_device(module, cand.code, backend, device, fresh=attempt > 0)
            except WorkerStartFailed as e:
                # not the candidate's doing (no candidate code had reached the worker): try once more, with a worker
                # started for this verification alone, then report an infrastructure error
                self._restore(snapshot)
                notes.append(f"a worker failed to start ({str(e).splitlines()[0][:200]})")
                v.flags += notes
                if attempt:
                    v.error = f"{e}\n{e.log_tail[-1500:]}"
                    return self.finish("infra_error")
        raise AssertionError("unreachable")

    def _restore(self, snapshot: Verdict, keep: tuple[str, ...] = ()) -> None:
        """Reset the verdict to `snapshot` (a fresh copy of it each time), except the fields in `keep`; in place,
        since callers hold references to `self.v`."""
        fresh = snapshot.model_copy(deep=True)
        for name in Verdict.model_fields:
            if name not in keep:
                setattr(self.v, name, getattr(fresh, name))

    def _on_device(self, module, code: str, backend: str, device: str, fresh: bool) -> Verdict:
        v, cfg = self.v, self.cfg
        need = device_footprint(module) if device.startswith("cuda") else 0
        with DEVICE_SLOTS.assign(device, need) as dev, self._sandbox(backend, dev, fresh=fresh) as sb:
            self.device = self.v.device = dev
            # the wait for a ready worker, and (for diagnosis) what the worker says its start cost, part by part
            v.stage_s["worker_start"] = round(sb.ready_wait_s, 4)
            v.stage_s.update({f"worker.{k}": round(x, 4) for k, x in sb.start_report.items() if math.isfinite(x)})
            try:
                return self._in_sandbox(sb, module, code, backend, dev)
            except WorkerTimeout as e:
                v.error = f"{e} (limit: build {cfg.build_timeout_s:.0f} s, run {cfg.timeout_s:.0f} s)"
                return self.finish("timeout")
            except WorkerDied as e:
                v.error = f"worker died (exit {e.returncode}); last output:\n{e.log_tail[-1500:]}"
                return self.finish("crashed")

    def _sandbox(self, backend: str, device: str, fresh: bool = False) -> Sandbox:
        """A fresh candidate worker with the toolchain variables the backend needs."""
        from musacoder.build.cache import toolchain_env

        cfg = self.cfg
        env = toolchain_env(device) if backend == "cuda" else {}
        if backend == "triton" and device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        if device.startswith("cuda") and ":" in device:
            env["MUSACODER_PREWARM_DEVICE"] = device  # a worker started ahead makes its CUDA context while it waits
        return Sandbox(cfg.cache_dir, env=env, keep_workdir=cfg.keep_workdir, memory_limit_gb=cfg.memory_limit_gb,
                       isolate_network=cfg.isolate_network, use_prestarted=not fresh)

    def _in_sandbox(self, sb: Sandbox, module, code: str, backend: str, device: str) -> Verdict:
        v, cfg = self.v, self.cfg
        with self._stage("build"):
            load = sb.request(_load_request(code, backend, device, cfg, self.task), cfg.build_timeout_s)
        builds = load.get("builds") or []
        v.build_s = load.get("seconds", sum(b.get("seconds", 0.0) for b in builds))
        v.build_cached = bool(builds) and all(b.get("cached") for b in builds)
        if not load["ok"]:
            if load["kind"] == "compile_error":
                v.stages["build"] = "failed"
                v.compile_log = load.get("log", "")
                return self.finish("compile_error")
            v.stages["build"] = "failed" if load.get("where") == "import" else "error"
            v.error = load.get("error")
            return self.finish("runtime_error" if load["kind"] == "runtime_error" else "infra_error")
        v.compiled = True
        v.stages["build"] = "ok"
        if load.get("global_state"):
            v.stages["runtime_legality"] = "failed"
            v.violations = [f"importing the candidate changed global state: {c}" for c in load["global_state"]]
            return self.finish("illegal")
        if device.startswith("cuda") and not cuda_available():
            v.error = "compiled; running needs a CUDA GPU and none is visible on this machine"
            v.legal = True
            return self.finish("infra_error")
        return self._run_stages(sb, module, device)

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

    def _checked_correctness(self, sb: Sandbox, module, device: str, n_trials: int, label: int):
        """`_correctness` with the device shared; a run that failed for lack of device memory while other
        verifications shared the device is repeated with the device to itself (one candidate's allocations must not
        fail another)."""
        snapshot = self.v.model_copy(deep=True)
        with self._stage("correctness", "shared"):
            got = self._correctness(sb, module, device, n_trials, label)
        if isinstance(got, Verdict) and device.startswith("cuda") and _out_of_memory(got.error):
            self._restore(snapshot, keep=("stage_s",))
            self.v.flags.append("correctness re-run with the device to itself after running out of device memory")
            with self._stage("correctness", "exclusive"):
                got = self._correctness(sb, module, device, n_trials, label)
        return got

    def _correctness(self, sb: Sandbox, module, device: str, n_trials: int, label: int):
        """Reference weights and `n_trials` profiled trials in `sb`. Returns (ref_model, trials, illegal, launches,
        notes), or a Verdict when the candidate failed to run."""
        v, cfg = self.v, self.cfg
        init_seed = seed_for(self.master, 0, label)
        init_inputs = make_init_inputs(module, init_seed)
        with seeded(init_seed):
            ref_model = module.Model(*init_inputs).to(device)
        state = {k: t.detach().cpu() for k, t in ref_model.state_dict().items()}
        if label == 0:
            self._state, self._init_inputs, self._init_seed = state, init_inputs, init_seed
        init = sb.request({"op": "init", "init_inputs": init_inputs, "state_dict": state, "seed": init_seed,
                           "device": device}, cfg.timeout_s)
        if not init["ok"]:
            v.stages["correctness"] = "error"
            v.error = init.get("error")
            return self.finish("runtime_error")
        illegal: list[str] = []
        launches = 0
        trials: list[TrialResult] = []
        weight_bytes = sum(t.numel() * t.element_size() for t in state.values())
        deadline = time.monotonic() + cfg.timeout_s
        for i in range(n_trials):
            seed = seed_for(self.master, 1 + label, i)
            perturbed, ref_out = self._reference_case(module, ref_model, seed,
                                                      perturb=cfg.perturb_inputs and i % 2 == 1, device=device)
            reply = sb.request({"op": "trial", "seed": seed, "perturb": perturbed, "profile": True},
                               max(1.0, deadline - time.monotonic()))
            if not reply["ok"]:
                v.stages["correctness"] = "error"
                v.error = reply.get("error")
                return self.finish("runtime_error" if reply["kind"] == "runtime_error" else "infra_error")
            if i == 0 and label == 0:  # the task's own footprint sets the memory budget
                self._task_bytes = weight_bytes + _nbytes(ref_out) + _input_bytes(module, seed, ref_out)
                illegal += self._memory_violations(init.get("device_mem_peak"))
            rep = reply["report"]
            illegal += self._runtime_violations(rep, i)
            launches += rep.get("launches", 0)
            trials.append(self._judge_trial(i, ref_out, reply["outputs"], rep))
            if i == 0 and label == 0:
                v.flags += task_audit(ref_out)
        return ref_model, trials, illegal, launches, init.get("notes", [])

    def _run_stages(self, sb: Sandbox, module, device: str) -> Verdict:
        got = self._checked_correctness(sb, module, device, self.cfg.trials, 0)
        if isinstance(got, Verdict):
            return got
        v, cfg = self.v, self.cfg
        ref_model, trials, illegal, launches, notes = got
        v.trials = trials
        passed = sum(t.passed for t in trials)
        v.pass_fraction = passed / len(trials)
        v.correct = passed == len(trials)
        v.stages["correctness"] = "ok" if v.correct else "failed"
        if launches == 0:
            illegal.append("none of the candidate's own kernels ran during forward (decoy kernel or fallback)")
        v.violations = list(dict.fromkeys(illegal))
        if illegal:
            v.stages["runtime_legality"] = "failed"
            v.legal = False
            return self.finish("illegal")
        v.legal = True
        v.stages["runtime_legality"] = "ok"
        if not v.correct:
            if notes:
                v.flags += [f"state dict: {n}" for n in notes[:5]]
            return self.finish("incorrect")
        extra = self._extra_shapes(device)
        if extra is not None:
            return extra

        if not cfg.time_candidate:
            v.stages["timing"] = "skipped"
            return self.finish("ok")
        return self._timing_stage(sb, module, ref_model, device)

    def _extra_shapes(self, device: str) -> Verdict | None:
        """Re-run the candidate at each of `cfg.extra_shapes` (size overrides) in a fresh worker, 2 trials each; a
        candidate that hard-codes its shapes fails here. None when every extra shape passes."""
        v, cfg = self.v, self.cfg
        for k, shape in enumerate(cfg.extra_shapes, start=1):
            task = _as_task(self.task, shape)
            module = load_module(task)
            with self._sandbox(v.backend, device) as sb:
                load = sb.request(_load_request(self.code, v.backend, device, cfg, task), cfg.build_timeout_s)
                if not load["ok"]:
                    v.error = f"at extra shape {shape}: " + str(load.get("error") or load.get("log", ""))[-1500:]
                    return self.finish("runtime_error" if load["kind"] != "compile_error" else "compile_error")
                got = self._checked_correctness(sb, module, device, 2, 100 * k)
                if isinstance(got, Verdict):
                    v.error = f"at extra shape {shape}: {v.error}"
                    return got
                _, trials, illegal, launches, _ = got
            if illegal or launches == 0:
                v.violations = list(dict.fromkeys(illegal or ["no kernel of the candidate ran"]))
                v.legal = False
                v.stages["runtime_legality"] = "failed"
                return self.finish("illegal")
            failed = [t for t in trials if not t.passed]
            if failed:
                for t in failed:
                    t.message = f"at extra shape {shape}: {t.message}"
                v.trials += trials
                v.correct = False
                v.pass_fraction = sum(t.passed for t in v.trials) / len(v.trials)
                v.stages["correctness"] = "failed"
                return self.finish("incorrect")
        return None

    def _reference_case(self, module, ref_model, seed: int, perturb: bool, device: str):
        """Reference output for the inputs made from `seed` (the worker makes the same inputs from the same seed);
        returns (whether the perturbation was kept, output on the comparison device)."""
        with torch.no_grad():
            ref_out = ref_model(*to_device(make_inputs(module, seed, perturb=perturb, device=device), device))
        if perturb and not _all_finite(ref_out):
            perturb = False  # the task's domain forbids the perturbation
            with torch.no_grad():
                ref_out = ref_model(*to_device(make_inputs(module, seed, perturb=False, device=device), device))
        return perturb, ref_out if self._compare_device() != "cpu" else _to_cpu(ref_out)

    def _compare_device(self) -> str:
        """Outputs are compared on the verification's GPU when it has one (within its slot), else on the CPU."""
        return self.device if self.device.startswith("cuda") and cuda_available() else "cpu"

    def _runtime_violations(self, rep: dict, where) -> list[str]:
        out = [f"illegal PyTorch op {op}" for op in rep.get("illegal_ops", [])]
        out += self._memory_violations(rep.get("device_mem_peak"))
        out += python_compute_violations(rep.get("python_op_counts") or {})
        out += [f"forward changed global state: {c}" for c in rep.get("global_state") or []]
        kernels = rep.get("device_kernels") or []
        if self.device.startswith("cuda") and self.v.backend in ("cuda", "triton"):
            own = [k for k in kernels if any(name in k for name in self.static.kernel_defs)]
            if not own:
                out.append("none of the candidate's own GPU kernels (" + ", ".join(self.static.kernel_defs[:5]) +
                           ") appeared in the profiler's CUDA kernel list")
            if not self.cfg.allow_vendor_libs:
                vendor = sorted({k for k in kernels if VENDOR_KERNEL.search(k) and k not in own})
                if vendor:
                    out.append("vendor library kernels ran (strict policy): " + ", ".join(x[:60] for x in vendor[:3]))
        if rep.get("py_threads_added", 0) > 0:
            out.append("forward left a Python thread running (background computation is not allowed)")
        if rep.get("native_threads_added", 0) > 0 and where not in (0, "0"):
            out.append("forward started new native threads that outlived the call")
        return out

    def _memory_budget(self) -> int:
        """Bytes of GPU memory the candidate's worker may reserve at peak (see `VerifyConfig.max_device_memory_gb`)."""
        if self.cfg.max_device_memory_gb is not None:
            return int(self.cfg.max_device_memory_gb * (1 << 30))
        return (8 << 30) + 16 * getattr(self, "_task_bytes", 0)

    def _memory_violations(self, peak) -> list[str]:
        if not peak or peak <= self._memory_budget():
            return []
        return [f"the candidate's worker reserved {peak / 2**30:.1f} GiB of GPU memory at peak; the limit for this task "
                f"is {self._memory_budget() / 2**30:.1f} GiB (memory held back starves the reference and inflates the "
                "speedup)"]

    def _judge_trial(self, i: int, ref_out, cand_out, rep: dict) -> TrialResult:
        if rep.get("output_type_error"):
            return TrialResult(trial=i, passed=False, message=rep["output_type_error"])
        if rep.get("input_mutation"):
            return TrialResult(trial=i, passed=False, message=rep["input_mutation"])
        c = compare_outputs(ref_out, cand_out, self.cfg.rel_l2_tol, device=self._compare_device())
        return TrialResult(trial=i, passed=c.passed, max_abs_error=c.max_abs_error, rel_l2_error=c.rel_l2_error,
                           message=c.message)

    def _timing_stage(self, sb: Sandbox, module, ref_model, device: str) -> Verdict:
        v, cfg = self.v, self.cfg
        result = self._time_once(sb, module, ref_model, device)
        if isinstance(result, Verdict):
            return result
        cand, ref = result
        speedup = ref.median_ms / cand.median_ms if cand.median_ms > 0 else float("inf")
        if speedup > cfg.outlier_speedup:
            again = self._time_once(sb, module, ref_model, device)
            if isinstance(again, Verdict):
                return again
            cand2, ref2 = again
            s2 = ref2.median_ms / cand2.median_ms if cand2.median_ms > 0 else float("inf")
            v.flags.append(f"outlier speedup {speedup:.3g}x re-timed: {s2:.3g}x; the lower is kept")
            if s2 < speedup:
                cand, ref, speedup = cand2, ref2, s2
        v.candidate_timing, v.reference_timing = cand, ref
        v.runtime_ms, v.ref_runtime_ms = cand.median_ms, ref.median_ms
        v.speedup_vs_eager = speedup
        if cfg.time_compile_baseline or cfg.baseline == "compile":
            try:
                v.compile_runtime_ms = compile_baseline_ms(
                    self.task, device, cfg, state=self._state, init_inputs=self._init_inputs, seed=self._init_seed,
                    hold=lambda slot: self._stage("compile_baseline" if slot == "exclusive" else "compile_build", slot))
                v.speedup_vs_compile = v.compile_runtime_ms / cand.median_ms
            except (BaselineError, WorkerTimeout, WorkerDied, WorkerStartFailed) as e:
                v.flags.append(f"torch.compile baseline unavailable: {e}")
        v.speedup = v.speedup_vs_compile if cfg.baseline == "compile" else v.speedup_vs_eager
        v.stages["timing"] = "ok"
        return self.finish("ok")

    def _time_once(self, sb: Sandbox, module, ref_model, device: str):
        v, cfg = self.v, self.cfg
        master_t = self.rng.getrandbits(62)
        pool = list(range(cfg.warmup, cfg.warmup + cfg.repeats + cfg.rechecks))
        picked = self.rng.sample(pool, min(2 * cfg.rechecks, len(pool)))
        audits, checks = sorted(picked[:cfg.rechecks]), sorted(picked[cfg.rechecks:])
        with self._stage("timing", "exclusive"):  # nothing else on the device while timing
            rep = sb.request({"op": "time", "master_seed": master_t, "input_sets": cfg.input_sets, "warmup": cfg.warmup,
                              "repeats": cfg.repeats, "max_repeats": cfg.max_repeats, "budget_s": cfg.time_budget_s,
                              "target_sem": cfg.target_sem, "audit_rounds": audits, "check_rounds": checks},
                             cfg.timeout_s + cfg.time_budget_s * 2)
        if not rep["ok"]:
            v.stages["timing"] = "error"
            v.error = rep.get("error")
            return self.finish("runtime_error" if rep["kind"] == "runtime_error" else "infra_error")
        if self._memory_violations(rep.get("device_mem_peak")):
            v.violations += self._memory_violations(rep.get("device_mem_peak"))
            v.legal = False
            v.stages["timing"] = "failed"
            return self.finish("illegal")
        if rep.get("no_launch_rounds"):
            v.violations.append(f"the candidate's own kernels did not run in {len(rep['no_launch_rounds'])} timed "
                                "round(s) (cached or fallback results while timing)")
            v.legal = False
            v.stages["timing"] = "failed"
            return self.finish("illegal")
        # Re-check the audited rounds (secretly chosen profiled ones plus the final one) and the checked timed rounds
        # against the reference; the outputs were kept in the worker and are fetched with the device shared again.
        with self._stage("recheck", "shared"):
            return self._recheck(sb, module, ref_model, device, master_t, rep)

    def _recheck(self, sb: Sandbox, module, ref_model, device: str, master_t: int, rep: dict):
        v, cfg = self.v, self.cfg
        taken = sb.request({"op": "take_outputs"}, cfg.timeout_s)
        if not taken.get("ok"):
            v.stages["timing"] = "error"
            v.error = taken.get("error")
            return self.finish("infra_error")
        outputs = taken["outputs"]
        rounds = sorted(list(rep["audits"].items()) + [(r, c) for r, c in (rep.get("checks") or {}).items()],
                        key=lambda rc: int(rc[0]))
        for r, audit in rounds:
            _, ref_out = self._reference_case(module, ref_model, seed_for(master_t, r), perturb=False, device=device)
            t = self._judge_trial(int(r), ref_out, outputs.get(r), audit["report"])
            if not t.passed:
                t.message = f"re-check after timing (round {r}): {t.message}"
                v.trials.append(t)
                v.correct = False
                v.legal = False  # stale/cached outputs while timing are a hack, not a partial solution: s = -1
                v.pass_fraction = sum(x.passed for x in v.trials) / len(v.trials)
                v.stages["timing"] = "failed"
                v.violations.append("outputs produced while timing were wrong (stale or cached results)")
                return self.finish("incorrect")
            if r not in rep["audits"]:
                continue  # a checked timed round: output only
            bad = self._runtime_violations(audit["report"], r)
            if audit["report"].get("launches", 0) == 0:
                bad.append("none of the candidate's own kernels ran in a timed round (fallback while timing)")
            if bad:
                v.violations = list(dict.fromkeys(v.violations + bad))
                v.legal = False
                v.stages["timing"] = "failed"
                return self.finish("illegal")
        dev = [a["report"].get("device_time_ms") for a in rep["audits"].values() if a["report"].get("device_time_ms")]
        if dev:
            v.candidate_device_ms = statistics.median(dev)
        v.timer_overhead_ms = rep.get("timer_overhead_ms")
        if rep.get("device_mem_peak"):
            v.device_mem_gb = round(rep["device_mem_peak"] / 2**30, 3)
        return _timing(rep["candidate_ms"]), _timing(rep["reference_ms"])


def trace_overlaps(trace: list[tuple[str, str, float, float]]) -> list[str]:
    """Pairs of holds in a `DeviceSlots.trace` that broke the rules: an exclusive hold overlapping any other hold on
    the same device. Empty when every timing stage had its device to itself."""
    bad = []
    by_dev: dict[str, list] = {}
    for dev, kind, t0, t1 in trace:
        by_dev.setdefault(dev, []).append((t0, t1, kind))
    for dev, holds in by_dev.items():
        holds.sort()
        for i, (a0, a1, ak) in enumerate(holds):
            for b0, b1, bk in holds[i + 1:]:
                if b0 >= a1:
                    break
                if "exclusive" in (ak, bk):
                    bad.append(f"{dev}: {ak} [{a0:.3f}, {a1:.3f}] overlaps {bk} [{b0:.3f}, {b1:.3f}]")
    return bad


class BaselineError(RuntimeError):
    pass


def _device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    import platform

    return f"cpu-{platform.machine()}-{os.cpu_count()}"


TIMING_METHOD = 3  # part of the compile-baseline cache key: 3 = timed to the end of the calling stream's work


def compile_baseline_ms(task: Task, device: str, cfg: VerifyConfig, *, state: dict, init_inputs: list, seed: int,
                        mode: str | None = None, hold=None) -> float:
    """Median ms of the `torch.compile`d reference, measured in a reference-only worker (no candidate code ever ran
    there, so no candidate can slow it down or poison the cache) and cached per task source and sizes, device model,
    torch version, dtype and compile mode under `CACHE/baselines/`.

    `hold(slot)` gives the device-slot context for each part: the worker's start, the compile and its warm-up run
    under `hold("shared")` (a first compile takes tens of seconds of host time), only the timing under
    `hold("exclusive")`."""
    import hashlib
    import json

    source = _source_with_overrides(task)
    dtypes = sorted({str(t.dtype) for t in state.values()}) or ["float32"]
    key_src = json.dumps([source, _device_name(device), torch.__version__, dtypes, mode, cfg.warmup, cfg.repeats,
                          TIMING_METHOD])
    key = hashlib.sha256(key_src.encode()).hexdigest()
    path = Path(cfg.cache_dir) / "baselines" / f"{key}.json"
    if path.exists():
        try:
            return float(json.loads(path.read_text())["median_ms"])
        except (ValueError, KeyError):
            pass
    hold = hold or (lambda slot: contextlib.nullcontext())
    with Sandbox(cfg.cache_dir, keep_workdir=False) as sb:
        with hold("shared"):
            ok = sb.request(_load_request(None, "cpu", device, cfg, task), cfg.timeout_s)
            if ok.get("ok"):
                ok = sb.request({"op": "init", "init_inputs": init_inputs, "state_dict": state, "seed": seed,
                                 "device": device}, cfg.timeout_s)
            if ok.get("ok"):
                ok = sb.request({"op": "compile_reference", "master_seed": int.from_bytes(os.urandom(7), "little"),
                                 "input_sets": cfg.input_sets, "mode": mode}, cfg.timeout_s * 5)
        if not ok.get("ok"):
            raise BaselineError(str(ok.get("error", ""))[-300:])
        with hold("exclusive"):
            rep = sb.request({"op": "time_compile", "warmup": cfg.warmup, "repeats": cfg.repeats}, cfg.timeout_s)
    if not rep.get("ok"):
        raise BaselineError(str(rep.get("error", ""))[-300:])
    median = statistics.median(rep["compile_ms"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps({"median_ms": median, "samples_ms": rep["compile_ms"], "device": _device_name(device),
                               "torch": torch.__version__, "dtypes": dtypes, "task": task.key}))
    tmp.replace(path)  # atomic: concurrent writers never leave a torn file
    return median


def task_audit(ref_out) -> list[str]:
    """Warnings about degenerate reference outputs, where correctness checks are weak (KernelBench has such tasks)."""
    leaves = ref_out if isinstance(ref_out, (list, tuple)) else [ref_out]
    out = []
    for i, t in enumerate(leaves):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() == 0:
            continue
        finite = t[torch.isfinite(t)]
        if finite.numel() and bool((finite == 0).all()):
            out.append(f"task audit: reference output {i} is exactly zero; any kernel returning zeros passes this task")
        elif finite.numel() and float(finite.abs().max()) <= 1e-4:
            out.append(f"task audit: reference output {i} is below atol everywhere; only the relative-error bound "
                       "separates a real kernel from zeros")
    return out


def _nbytes(obj) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(x) for x in obj)
    return 0


def _input_bytes(module, seed: int, ref_out) -> int:
    """Bytes of one input set, counted on meta tensors (no memory); 4 × the output where meta cannot make them."""
    try:
        return _nbytes(make_inputs(module, seed, device="meta"))
    except Exception:  # noqa: BLE001 - an op meta does not implement
        return 4 * _nbytes(ref_out)


# What one verification may hold on its GPU at once, in units of the task's input and output bytes: the worker keeps
# P = 4 input sets, a pristine copy and a fresh draw; its outputs, the audit and check copies it holds, and the trusted
# side's reference output, fetched outputs and comparison temporaries. Plus a CUDA context, the L2 flush buffer and
# the allocator's poison block.
FOOTPRINT_INPUTS, FOOTPRINT_OUTPUTS, FOOTPRINT_FIXED = 6, 10, 3 << 30


def meta_bytes(module) -> tuple[int, int, int]:
    """Bytes of the task's (inputs, outputs, weights) for one call, from its shapes on the meta device (no memory is
    allocated). Raises whatever the task raises there (ops without meta kernels, data-dependent shapes)."""
    with torch.device("meta"), torch.no_grad():
        model = module.Model(*make_init_inputs(module, 0))
        inputs = list(module.get_inputs())
        out = model(*inputs)
    return _nbytes(inputs), _nbytes(out), _nbytes(list(model.state_dict().values()))


def device_footprint(module) -> int:
    """Estimated peak device bytes of one verification of `module`'s task (`meta_bytes`); the fixed part alone when
    the task does not run on meta tensors."""
    try:
        inputs, outputs, weights = meta_bytes(module)
    except Exception:  # noqa: BLE001 - data-dependent shapes and the like
        return FOOTPRINT_FIXED
    return FOOTPRINT_FIXED + FOOTPRINT_INPUTS * inputs + FOOTPRINT_OUTPUTS * outputs + 2 * weights


def _out_of_memory(error: str | None) -> bool:
    return bool(error) and ("out of memory" in error or "OutOfMemoryError" in error)


def _all_finite(obj) -> bool:
    if isinstance(obj, torch.Tensor):
        return not obj.is_floating_point() or bool(torch.isfinite(obj).all())
    if isinstance(obj, (list, tuple)):
        return all(_all_finite(x) for x in obj)
    return True


def _to_cpu(obj):
    from musacoder.judge.inputs import to_cpu

    return to_cpu(obj)


def _load_request(code: str | None, backend: str, device: str, cfg: VerifyConfig, task: Task) -> dict:
    """The worker's `load` request: the candidate's code (None for a reference-only worker) and the task source."""
    return {"op": "load", "code": code, "backend": backend, "device": device, "cache_dir": str(cfg.cache_dir),
            "task_source": _source_with_overrides(task)}


def _source_with_overrides(task: Task) -> str:
    from musacoder.tasks import apply_overrides

    return apply_overrides(task.source, task.overrides, task.path or task.name)


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
        verdict = run.run()
    except (ValueError, FileNotFoundError):
        raise
    except Exception as e:  # noqa: BLE001 - anything unexpected on the trusted side is an infrastructure error
        run.v.error = f"{type(e).__name__}: {e}"
        verdict = run.finish("infra_error")
    verdict.wall_s = time.monotonic() - t0
    return verdict
