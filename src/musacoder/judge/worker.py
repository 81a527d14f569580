"""The candidate worker: the only process that imports and runs candidate code.

Started by `musacoder.judge.sandbox` (forked by `musacoder.judge.forkserver`, or as `python -m musacoder.judge.worker
FD_IN FD_OUT`) in its own process group, in a throw-away working directory, with a scrubbed environment. It never
receives reference outputs: it gets inputs, returns the candidate's outputs (and the inputs as they are after the
call), the aten ops the profiler saw and the kernel launches the build/launch hooks counted. Timers are captured before any candidate code is imported.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import threading
import time
import traceback
from typing import NamedTuple

# Captured before candidate code exists in this process.
_perf_ns = time.perf_counter_ns
_thread_count = threading.active_count


def _native_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


class Worker:
    def __init__(self):
        import torch

        self.torch = torch
        self.model = None
        self.ref_model = None
        self.task_module = None
        self.record = None
        self.triton_launches: dict[str, int] = {}
        self.device = "cpu"
        self.backend = "cpu"
        self.static_kernels: list[str] = []
        self._warmed: str | None = None
        self.start_s: dict[str, float] = {}  # seconds of each part of this worker's start (reported with `ready`)

    # -- helpers -----------------------------------------------------------------------------------------------
    def _poison_allocator(self, inputs) -> None:
        """Fill and free a block as large as the inputs with NaN, so output memory that the candidate does not write
        (uninitialised reads that happen to hold an earlier answer) is NaN rather than a plausible value."""
        torch = self.torch
        n = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) // 4
        n = min(2 * n, 1 << 28)  # at most 1 GiB
        if n:
            torch.full((n,), float("nan"), dtype=torch.float32, device=self.device)
            self.sync()

    def global_state(self) -> dict:
        """Process-wide settings a candidate could change to slow the reference or alter its numerics."""
        torch = self.torch
        return {"intra-op threads": torch.get_num_threads(), "inter-op threads": torch.get_num_interop_threads(),
                "default dtype": str(torch.get_default_dtype()), "grad mode": torch.is_grad_enabled(),
                "float32 matmul precision": torch.get_float32_matmul_precision()}

    def global_state_changes(self) -> list[str]:
        before = getattr(self, "_state0", None)
        if before is None:
            return []
        now = self.global_state()
        return [f"{k} changed from {before[k]} to {now[k]}" for k in before if now[k] != before[k]]

    def device_mem_peak(self) -> int:
        """Peak bytes PyTorch's allocator reserved in this process on the GPU (0 on the CPU). Raw cudaMalloc is
        rejected statically, so this accounts for the candidate's device memory."""
        torch = self.torch
        if self.device.startswith("cuda") and torch.cuda.is_available():
            return int(torch.cuda.max_memory_reserved(torch.device(self.device)))
        return 0

    def sync(self):
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def launches(self) -> int:
        return sum(self.record.calls.values()) + sum(self.triton_launches.values())

    def _install_triton_hook(self):
        try:
            import triton  # noqa: F401
            from triton.runtime import jit as tjit
        except Exception:  # noqa: BLE001 - triton absent: nothing to hook
            return
        torch = self.torch
        counts = self.triton_launches
        classes = [tjit.JITFunction]
        try:
            from triton.runtime import interpreter

            if hasattr(interpreter, "InterpretedFunction"):
                classes.append(interpreter.InterpretedFunction)
        except Exception:  # noqa: BLE001
            pass
        for cls in classes:
            orig = cls.run

            def run(self_, *args, _orig=orig, **kw):
                fn = getattr(self_, "fn", None)
                name = getattr(fn, "__name__", None) or getattr(self_, "__name__", "triton_kernel")
                counts[name] = counts.get(name, 0) + 1
                if not torch.autograd._profiler_enabled():
                    return _orig(self_, *args, **kw)
                with torch.profiler.record_function(f"musacoder::triton::{name}"):
                    return _orig(self_, *args, **kw)

            cls.run = run

    def _warm_device(self) -> None:
        """Create the CUDA context on the assigned GPU and start the profiler's CUDA tracing once, before any candidate
        code exists and before the verification takes its device slot (both cost a second or more the first time)."""
        torch = self.torch
        if not (self.device.startswith("cuda") and torch.cuda.is_available()) or self._warmed == self.device:
            return
        self._warmed = self.device
        t0 = time.perf_counter()
        torch.cuda.set_device(torch.device(self.device))
        x = torch.ones(1024, device=self.device)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts):
            x.add_(1)
            torch.cuda.synchronize()
        self.start_s.update(cuda_context=t1 - t0, profiler=time.perf_counter() - t1)

    # -- operations --------------------------------------------------------------------------------------------
    def op_load(self, msg):
        """Install hooks and import the candidate (its load_inline calls build through the cache)."""
        import torch.utils.cpp_extension as cpp_ext

        from musacoder.build.cache import BuildError, BuildRecord, make_cached_load_inline
        from musacoder.tasks import load_module
        from musacoder.records import Task

        self.device = msg["device"]
        self.backend = msg["backend"]
        self._warm_device()
        self.record = BuildRecord()
        cpp_ext.load_inline = make_cached_load_inline(cpp_ext.load_inline, msg["cache_dir"], self.backend, self.record)
        if self.backend == "triton":
            self._install_triton_hook()
        if msg.get("task_source") is not None:
            self.task_module = load_module(Task(name="task", source=msg["task_source"], overrides={}), "musacoder_task")
        if msg.get("code") is None:  # a reference-only worker (trusted baselines): no candidate at all
            self.candidate = None
            return {"ok": True, "builds": [], "seconds": 0.0}
        import types

        module = types.ModuleType("candidate")
        module.__file__ = os.path.join(os.getcwd(), "candidate.py")
        with open(module.__file__, "w") as f:
            f.write(msg["code"])
        sys.modules["candidate"] = module
        self._state0 = self.global_state()
        t0 = time.perf_counter()
        try:
            exec(compile(msg["code"], module.__file__, "exec"), module.__dict__)  # noqa: S102 - sandboxed worker
        except BuildError as e:
            return {"ok": False, "kind": "compile_error", "log": e.log, "builds": self.record.builds}
        except BaseException as e:  # noqa: BLE001
            if self.record.error_log is not None:
                return {"ok": False, "kind": "compile_error", "log": self.record.error_log, "builds": self.record.builds}
            return {"ok": False, "kind": "runtime_error", "error": _trim_tb(e), "where": "import"}
        if self.record.error_log is not None:
            return {"ok": False, "kind": "compile_error", "log": self.record.error_log, "builds": self.record.builds}
        if not hasattr(module, "ModelNew"):
            return {"ok": False, "kind": "runtime_error", "error": "the candidate defines no ModelNew", "where": "import"}
        self.candidate = module
        return {"ok": True, "builds": self.record.builds, "seconds": time.perf_counter() - t0,
                "global_state": self.global_state_changes()}

    def op_init(self, msg):
        torch = self.torch
        if msg.get("device"):
            self.device = msg["device"]
            if self.device.startswith("cuda"):
                torch.cuda.set_device(torch.device(self.device))
        init_inputs = list(msg["init_inputs"])
        if self.candidate is None:
            torch.manual_seed(msg["seed"])
            self.ref_model = self.task_module.Model(*init_inputs)
            self.ref_model.load_state_dict(msg["state_dict"])
            self.ref_model = self.ref_model.to(self.device)
            return {"ok": True, "notes": []}
        torch.manual_seed(msg["seed"])
        try:
            model = self.candidate.ModelNew(*init_inputs)
        except BaseException as e:  # noqa: BLE001
            return {"ok": False, "kind": "runtime_error", "error": _trim_tb(e), "where": "ModelNew.__init__"}
        notes = []
        ref_sd = msg["state_dict"]
        own = model.state_dict()
        with torch.no_grad():
            for k, v in ref_sd.items():
                if k in own and own[k].shape == v.shape:
                    own[k].copy_(v)
                elif k in own:
                    notes.append(f"{k}: shape {tuple(own[k].shape)} differs from the reference's {tuple(v.shape)}")
                else:
                    notes.append(f"{k}: not kept as a parameter/buffer of ModelNew (weights may differ)")
        self.model = model.to(self.device)
        if self.task_module is not None and msg.get("build_reference", True):
            torch.manual_seed(msg["seed"])
            self.ref_model = self.task_module.Model(*init_inputs)
            self.ref_model.load_state_dict(ref_sd)
            self.ref_model = self.ref_model.to(self.device)
        return {"ok": True, "notes": notes, "device_mem_peak": self.device_mem_peak()}

    def _forward(self, inputs, profile: bool, copy: bool = True, seed: int | None = None, perturb: bool = False):
        """One candidate call on device copies of `inputs` (or on `inputs` themselves while timing, so an audited
        round is indistinguishable from a timed one); returns (outputs, report dict)."""
        torch = self.torch
        from musacoder.judge.inputs import to_device
        from musacoder.legality.runtime import analyse_events

        args = to_device(inputs, self.device) if copy else inputs
        self.sync()
        py_threads, native_threads = _thread_count(), _native_threads()
        launches0 = self.launches()
        report = {}
        with torch.no_grad():
            if profile:
                acts = [torch.profiler.ProfilerActivity.CPU]
                if self.device.startswith("cuda"):
                    acts.append(torch.profiler.ProfilerActivity.CUDA)
                with torch.profiler.profile(activities=acts) as prof:
                    with torch.profiler.record_function("musacoder::candidate_forward"):
                        out = self.model(*args)
                    self.sync()
                rt = analyse_events(prof.events())
                report.update(illegal_ops=rt.illegal_ops, ops=sorted(set(rt.all_ops)), device_kernels=sorted(set(rt.device_kernels)),
                              device_time_ms=rt.device_time_ms, python_op_counts=rt.python_op_counts)
            else:
                out = self.model(*args)
                self.sync()
        report["launches"] = self.launches() - launches0
        report["device_mem_peak"] = self.device_mem_peak()
        report["global_state"] = self.global_state_changes()
        report["py_threads_added"] = _thread_count() - py_threads
        report["native_threads_added"] = _native_threads() - native_threads
        bad = _non_plain(out)
        if bad:
            report["output_type_error"] = bad
            out = None
        if seed is not None:  # inputs must be bit-identical to a fresh copy after the call
            from musacoder.judge.inputs import make_inputs

            pristine = make_inputs(self.task_module, seed, perturb=perturb, device=self.device)
            report["input_mutation"] = _mutation(pristine, args)
        return out, report

    def op_trial(self, msg):
        from musacoder.judge.inputs import to_cpu

        from musacoder.judge.inputs import make_inputs

        inputs = make_inputs(self.task_module, msg["seed"], perturb=msg["perturb"], device=self.device)
        self._poison_allocator(inputs)
        try:
            out, report = self._forward(inputs, profile=msg.get("profile", True), seed=msg["seed"],
                                        perturb=msg["perturb"])
        except BaseException as e:  # noqa: BLE001
            return {"ok": False, "kind": "runtime_error", "error": _trim_tb(e), "where": "forward"}
        return {"ok": True, "outputs": to_cpu(out) if out is not None else None, "report": report}

    def op_time(self, msg):
        """Interleaved timing of candidate and reference over rotating input sets, with secret audit rounds.

        Round r uses input set r mod P, refilled in place from seed(master, r) before reuse, so contents never
        repeat while pointers do. The candidate runs before the reference in every round. Audit rounds run the
        candidate under the profiler (untimed) and return its output for the trusted side to re-check; check rounds
        are ordinary timed rounds whose output is also returned (kept after the clock stopped, so nothing tells them
        apart from the others). Every timed round must call the candidate's own kernels (counted by the build hook).
        """
        torch = self.torch
        from musacoder.judge.inputs import make_inputs, seed_for

        master, n_sets = msg["master_seed"], msg["input_sets"]
        warmup, min_rep, max_rep = msg["warmup"], msg["repeats"], msg["max_repeats"]
        budget_ns = msg["budget_s"] * 1e9
        audits = set(msg["audit_rounds"])
        checks = set(msg.get("check_rounds", ())) - audits
        sets: list = []
        checked = {}
        no_launch: list[int] = []
        cand_ms: list[float] = []
        ref_ms: list[float] = []
        audit_out = {}
        self._held = {}
        start = _perf_ns()

        def inputs_for(r):
            fresh = make_inputs(self.task_module, seed_for(master, r), device=self.device)
            if len(sets) < n_sets:
                sets.append(fresh)
                return fresh
            cur = sets[r % n_sets]
            with torch.no_grad():
                for dst, src in zip(cur, fresh):
                    if isinstance(dst, torch.Tensor):
                        dst.copy_(src)
            return cur

        timed, flush = self._timer(msg.get("l2_flush_bytes", 256 << 20))
        trip = self._round_trip()

        r = 0
        final_round = None
        while True:
            args = inputs_for(r)
            if r in audits or r == final_round:
                flush()  # the profiler's device time is taken from the L2 state the timed rounds start from
                try:
                    out, report = self._forward(args, profile=True, copy=False, seed=seed_for(master, r))
                except BaseException as e:  # noqa: BLE001
                    return {"ok": False, "kind": "runtime_error", "error": _trim_tb(e), "where": f"forward (timing round {r})"}
                audit_out[r] = {"report": report}
                self._held[r] = _clone(out)
                if r == final_round:
                    break
            else:
                launches0 = self.launches()
                try:
                    t_c, out = timed(self.model, args)
                except BaseException as e:  # noqa: BLE001
                    return {"ok": False, "kind": "runtime_error", "error": _trim_tb(e), "where": f"forward (timing round {r})"}
                if self.launches() == launches0:
                    no_launch.append(r)
                if r in checks:  # a timed round like any other: its output is kept only after the clock stopped
                    bad = _non_plain(out)
                    checked[r] = {"report": {"output_type_error": bad} if bad else {}}
                    self._held[r] = None if bad else _clone(out)
                del out
                t_r, ref_out = timed(self.ref_model, args)
                del ref_out
                if r >= warmup:
                    cand_ms.append(t_c)
                    ref_ms.append(t_r.stream_ms)  # trusted eager PyTorch: its work is on the stream it was called on
                    trip.sample([t.stream_ms for t in cand_ms])
            r += 1
            n = len(cand_ms)
            if final_round is None and r > max(audits | checks, default=0) and n >= min_rep:
                done = n >= max_rep or (_perf_ns() - start) > budget_ns or (
                    _sem(trip.charge(cand_ms)) < msg["target_sem"] and _sem(ref_ms) < msg["target_sem"])
                if done:
                    final_round = r
        return {"ok": True, "candidate_ms": trip.charge(cand_ms), "reference_ms": ref_ms, "audits": audit_out,
                "checks": checked, "device_mem_peak": self.device_mem_peak(), "timer_overhead_ms": trip.ms(),
                "no_launch_rounds": no_launch, "final_round": final_round}

    def op_take_outputs(self, msg):
        """The outputs kept from the last `time` request's audit and check rounds (device copies made right after each
        call), sent to the CPU now: the trusted side fetches them after the device's timing slot is released."""
        from musacoder.judge.inputs import to_cpu

        held, self._held = getattr(self, "_held", {}), {}
        return {"ok": True, "outputs": {r: to_cpu(o) if o is not None else None for r, o in held.items()}}

    def _timer(self, l2_flush_bytes: int):
        """The one timing primitive, for the candidate and both baselines: `(timed, flush)`, where
        `timed(fn, args) -> (Region, out)` and `flush()` evicts the L2 cache as `timed` does before each call.

        Host clock around a synchronised call on the CPU; on CUDA, `_cuda_region` after an L2 flush: the time to the
        end of the calling stream's work, and to the end of the whole device's (`_RoundTrip` charges the candidate for
        work left on other streams). Audit rounds call `flush` too, so the profiler's device time is measured from the
        same cold L2 as the timed rounds."""
        torch = self.torch
        if not self.device.startswith("cuda"):
            def timed_cpu(fn, args):
                self.sync()
                t0 = _perf_ns()
                with torch.no_grad():
                    out = fn(*args)
                self.sync()
                ms = (_perf_ns() - t0) / 1e6
                return Region(ms, ms), out

            return timed_cpu, _nothing
        scratch = torch.empty(l2_flush_bytes, dtype=torch.uint8, device=self.device)

        def flush():
            scratch.zero_()

        def timed_cuda(fn, args):
            flush()
            return _cuda_region(torch, fn, args)

        return timed_cuda, flush

    def _round_trip(self) -> _RoundTrip:
        return _RoundTrip(self.torch if self.device.startswith("cuda") else None)

    def op_compile_reference(self, msg):
        """Compile the reference with torch.compile and run it once on each input set (the compile and its warm-up are
        host work: the device need not be held exclusively for them)."""
        torch = self.torch
        from musacoder.judge.inputs import make_inputs, seed_for

        self._compiled = torch.compile(self.ref_model, mode=msg.get("mode") or None)
        self._compile_sets = [make_inputs(self.task_module, seed_for(msg["master_seed"], 7_000_000 + i), device=self.device)
                              for i in range(msg["input_sets"])]
        with torch.no_grad():
            for inputs in self._compile_sets:
                self._compiled(*inputs)
        self.sync()
        return {"ok": True}

    def op_time_compile(self, msg):
        """Time the compiled reference (`compile_reference` first) on rotating inputs: the `torch.compile` baseline."""
        timed, _ = self._timer(msg.get("l2_flush_bytes", 256 << 20))
        sets, times = self._compile_sets, []
        for r in range(msg["warmup"] + msg["repeats"]):
            t, _ = timed(self._compiled, sets[r % len(sets)])
            if r >= msg["warmup"]:
                times.append(t.stream_ms)  # trusted code (inductor's kernels), timed like the eager reference
        return {"ok": True, "compile_ms": times}


def _clone(out):
    """A copy on the same device, so a candidate that reuses one output buffer cannot change a kept output later."""
    import torch

    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (list, tuple)):
        return type(out)(_clone(x) for x in out)
    return out


def _mutation(pristine: list, after: list) -> str | None:
    import torch

    for i, (b, a) in enumerate(zip(pristine, after)):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
                return f"input {i} changed shape or dtype during forward"
            same = a == b
            if b.is_floating_point():
                same |= torch.isnan(a) & torch.isnan(b)
            if not bool(same.all()):
                return f"input {i} was modified in place by forward (inputs must be left unchanged)"
    return None


_EVENT = None
_SLEEP = None
# Timed CUDA regions start behind a ~200 us GPU spin (at about 2 GHz) so the host's launch latency of the timed call is
# hidden, as it would be in a stream of work; whatever the call's host side costs beyond that is still counted. With a
# 50 us spin, a 0.40 ms ReLU kernel on the H200 still timed at 0.45-0.47 ms (the Python path to the launch was longer).
# Host work cannot hide computation behind it: reading the inputs back waits for it.
PREROLL_CYCLES = 400_000
MIN_TIMED_MS = 1e-3


def _cuda_event_class(torch):
    """torch.cuda.Event as it was before the candidate was imported (captured on first use in `main`)."""
    return _EVENT or torch.cuda.Event


def _cuda_sleep(torch):
    """torch.cuda._sleep (a GPU spin of N cycles) as it was before the candidate was imported."""
    return _SLEEP or torch.cuda._sleep


class Region(NamedTuple):
    """One timed call, in ms from the start event: to the end of the work on the stream it was called on
    (`stream_ms`), and to an event recorded after the whole device was synchronised (`device_ms`: all streams, plus the
    host's round trip through the synchronise)."""

    device_ms: float
    stream_ms: float


def _cuda_region(torch, fn, args):
    """One timed CUDA region: device synchronised, the pre-roll spin, start event, the call, an event on the calling
    stream, a whole-device synchronise (so work left on any stream is waited for), end event. Returns (Region, output).
    Timers as captured before candidate code."""
    torch.cuda.synchronize()
    Event = _cuda_event_class(torch)
    start, on_stream, end = Event(enable_timing=True), Event(enable_timing=True), Event(enable_timing=True)
    _cuda_sleep(torch)(PREROLL_CYCLES)  # the GPU is busy while the host issues the call, so launch latency is not timed
    start.record()
    with torch.no_grad():
        out = fn(*args)
    on_stream.record()
    torch.cuda.synchronize()
    end.record()
    end.synchronize()
    return Region(start.elapsed_time(end), start.elapsed_time(on_stream)), out


def _nothing():
    return None


class _RoundTrip:
    """What a candidate's time is: the end of its calling stream's work, plus whatever of the whole device's end lies
    beyond the host's round trip (work the candidate left on other streams).

    The whole-device end is recorded only after the host saw the synchronise return, so it carries a round trip that
    grows with how long the host waited and how busy the CPU is: on the H200 (docs/benchmarks.md §10, timer_probe.py)
    0.02 ms after a 0.2 ms kernel and 0.03-0.09 ms (median) after a 2.7 ms one with 14 busy processes beside it, while
    the calling stream's end was within 0.005 ms of the profiler's kernel time in every case. Taking off one
    empty region's latency left 0.2 ms kernels 5 % over the profiler's time.

    The round trip is measured in the timing loop: after each timed round, a region whose calling-stream work is a GPU
    spin as long as the candidate's median stream time (so the host waits as long as for the candidate), timed the same
    way; its device-minus-stream gap is a pure round trip. Per round, the candidate is charged
    `stream_ms + max(0, (device_ms - stream_ms) - R)`, R the `QUANTILE` of those gaps (at most `MAX_MS`): work left on other streams is
    counted beyond R (a candidate that puts its work on a side stream has a short stream time, so its spin is short
    too, and a short wait's round trip is the smaller one). The reference and the compile baseline are trusted
    PyTorch code, timed by their calling stream alone. On the CPU (host clock) nothing is charged or measured."""

    QUANTILE = 0.75
    MAX_MS = 0.15  # R never exceeds this, however busy the host (a longer round trip is charged: the safe direction)
    CYCLES_PER_MS = 1.98e6  # the spin's first guess (an H200's SM clock); then measured from the spins themselves

    def __init__(self, torch):  # torch None: host-clock timing
        self.torch = torch
        self.gaps: list[float] = []
        self.rates: list[float] = []

    def sample(self, cand_stream_ms: list[float]) -> None:
        if self.torch is None or not cand_stream_ms:
            return
        rate = statistics.median(self.rates) if self.rates else self.CYCLES_PER_MS
        cycles = int(min(max(statistics.median(cand_stream_ms), 1e-3) * rate, 2**31 - 1))
        t, _ = _cuda_region(self.torch, _cuda_sleep(self.torch), (cycles,))
        self.gaps.append(max(0.0, t.device_ms - t.stream_ms))
        if t.stream_ms > 0.01:
            self.rates.append(cycles / t.stream_ms)

    def ms(self) -> float | None:
        """R: the round trip allowed between the calling stream's end and the whole device's end."""
        if self.torch is None or not self.gaps:
            return None
        xs = sorted(self.gaps)
        return min(xs[min(len(xs) - 1, int(self.QUANTILE * len(xs)))], self.MAX_MS)

    def charge(self, regions: list[Region]) -> list[float]:
        if self.torch is None:
            return [t.device_ms for t in regions]
        rt = self.ms() or 0.0
        return [max(t.stream_ms + max(0.0, t.device_ms - t.stream_ms - rt), MIN_TIMED_MS) for t in regions]


def _sem(xs: list[float]) -> float:
    """Relative standard error of the mean."""
    n = len(xs)
    if n < 2:
        return math.inf
    m = sum(xs) / n
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return math.sqrt(var / n) / m if m > 0 else math.inf


def _non_plain(out) -> str | None:
    import torch

    if isinstance(out, (list, tuple)):
        for x in out:
            bad = _non_plain(x)
            if bad:
                return bad
        return None
    if isinstance(out, torch.Tensor) and type(out) is not torch.Tensor:
        return f"forward returned a tensor subclass ({type(out).__name__}); return plain torch.Tensor outputs"
    if isinstance(out, torch.Tensor) and out.is_meta:
        return "forward returned a meta tensor (no data)"
    return None


def _trim_tb(e: BaseException, limit: int = 4000) -> str:
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return text if len(text) <= limit else "…" + text[-limit:]


def main(fd_in: int | None = None, fd_out: int | None = None) -> None:
    """Serve one candidate over the protocol pipes (from argv, or given by the fork server's child)."""
    t0 = time.perf_counter()
    if fd_in is None or fd_out is None:
        fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
    os.dup2(2, 1)  # candidate prints go to the log, never into the protocol
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    fsize = int(os.environ.get("MUSACODER_FSIZE_LIMIT", str(4 << 30)))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    as_limit = os.environ.get("MUSACODER_AS_LIMIT")
    if as_limit:
        resource.setrlimit(resource.RLIMIT_AS, (int(as_limit), int(as_limit)))
    from musacoder.judge import protocol

    try:
        worker = Worker()
        global _EVENT, _SLEEP
        _EVENT, _SLEEP = worker.torch.cuda.Event, worker.torch.cuda._sleep  # captured before any candidate code runs
        worker.torch.ones(1 << 16).sum()  # start the intra-op thread pool before any candidate code runs
        worker.start_s["python_torch"] = time.perf_counter() - t0
        prewarm = os.environ.get("MUSACODER_PREWARM_DEVICE")
        if prewarm:  # a worker started ahead for a known GPU: make its CUDA context while it waits for work
            worker.device = prewarm
            worker._warm_device()
            worker.device = "cpu"
    except BaseException as e:  # noqa: BLE001 - e.g. no device memory left for a CUDA context
        protocol.send(fd_out, {"ok": False, "ready": False, "kind": "infra_error", "error": _trim_tb(e), "where": "start"})
        return
    protocol.send(fd_out, {"ok": True, "ready": True, "start_s": worker.start_s})
    while True:
        try:
            msg = protocol.recv(fd_in)
        except protocol.ChannelClosed:
            return
        op = msg["op"]
        if op == "exit":
            protocol.send(fd_out, {"ok": True})
            return
        try:
            reply = getattr(worker, f"op_{op}")(msg)
        except BaseException as e:  # noqa: BLE001
            reply = {"ok": False, "kind": "infra_error", "error": _trim_tb(e), "where": op}
        protocol.send(fd_out, reply)


if __name__ == "__main__":
    main()
