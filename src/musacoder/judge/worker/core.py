"""The worker's state and the one candidate call every trial and audited round goes through.

`Worker` holds what one worker process keeps between requests (the device, the candidate's module and model, the
reference copy, the build record, the harness guard, the Triton launch counts, the outputs kept for the trusted side)
and the device helpers the operations share. `Worker.forward` is the candidate's call as the harness makes it: the
device synchronised around it, the profiler on where asked, what the harness runs checked as it returns, and the
report the trusted side judges (ops, launches, memory, global state, threads, output type, input mutation).
"""

from __future__ import annotations

import time

from musacoder.judge.worker import triton_hook
from musacoder.judge.worker.errors import guarded
from musacoder.judge.worker.guard import HarnessGuard, input_mutation, native_threads, thread_count


class Worker:
    def __init__(self):
        import torch

        self.torch = torch
        self.reply_key = None  # the current request's (protocol.REPLY_KEY)
        self.device_clocks: set[str] = set()  # Triton kernels that read a GPU clock (`triton_hook`)
        self.kernels_read: set = set()  # compiled Triton kernels already read (by hash)
        self.candidate = None  # the candidate's module (None: a reference-only worker, or not loaded yet)
        self.model = None
        self.ref_model = None
        self.task_module = None
        self.record = None  # the build hook's `BuildRecord` (launch counts, builds, profiling switch)
        self.triton_launches: dict[str, int] = {}
        self.device = "cpu"
        self.backend = "cpu"
        self.warmed: str | None = None
        self.start_s: dict[str, float] = {}  # seconds of each part of this worker's start (reported with `ready`)
        self.exports: list = []  # exported over CUDA IPC, kept alive until the next request (`ipc.release`)
        self.release_memory = False  # give cached device blocks back after every request (large tasks; see `init`)
        self.channel: tuple[int, int] | None = None  # (from the trusted side, to it): for mid-request build requests
        self.guard = HarnessGuard(torch)
        self.last_outputs = None  # the last outputs sent (`resend`)
        self.held: dict = {}  # outputs kept from the last `time` request's audit and check rounds (`take_outputs`)
        self.compiled = None  # the compiled reference and its inputs (`compile_reference`)
        self.compile_sets: list = []

    # -- the device ------------------------------------------------------------------------------------------------
    def sync(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()
        elif self.device.startswith("musa"):
            self.torch.musa.synchronize()

    def device_mem_peak(self) -> int:
        """Peak bytes PyTorch's allocator reserved in this process on the GPU (0 on the CPU). Raw cudaMalloc is
        rejected statically, so this accounts for the candidate's device memory."""
        torch = self.torch
        if self.device.startswith("cuda") and torch.cuda.is_available():
            return int(torch.cuda.max_memory_reserved(torch.device(self.device)))
        if self.device.startswith("musa"):
            return int(torch.musa.max_memory_reserved(torch.device(self.device)))
        return 0

    def memory_facts(self) -> dict:
        """The device memory this process holds and the device has free now (bytes; empty on the CPU): sent with a
        harness fault, so the trusted side can tell a verifier that ran out of memory from a candidate that hoards it."""
        torch = self.torch
        if not (self.device.startswith("cuda") and torch.cuda.is_available()):
            return {}
        dev = torch.device(self.device)
        free, total = torch.cuda.mem_get_info(dev)
        return {"mem_allocated": int(torch.cuda.memory_allocated(dev)), "mem_peak": self.device_mem_peak(),
                "mem_free": int(free), "mem_total": int(total)}

    def give_back(self) -> None:
        """Return the allocator's cached blocks to the device (large tasks: the trusted side needs them between
        requests, while this process only waits)."""
        if not self.release_memory:
            return
        if self.device.startswith("cuda") and self.torch.cuda.is_available():
            self.torch.cuda.empty_cache()
        elif self.device.startswith("musa"):
            self.torch.musa.empty_cache()

    def set_device(self, device: str) -> None:
        """Make `device` this worker's (and the current one of its framework)."""
        self.device = device
        if device.startswith("cuda"):
            self.torch.cuda.set_device(self.torch.device(device))
        elif device.startswith("musa"):
            self.torch.musa.set_device(self.torch.device(device))

    def warm_device(self) -> None:
        """Create the CUDA context on the assigned GPU and start the profiler's CUDA tracing once, before any candidate
        code exists and before the verification takes its device slot (both are slow the first time)."""
        torch = self.torch
        if not (self.device.startswith("cuda") and torch.cuda.is_available()) or self.warmed == self.device:
            return
        self.warmed = self.device
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

    def poison_allocator(self, inputs) -> None:
        """Fill and free a block as large as the inputs with NaN, so output memory that the candidate does not write
        (uninitialised reads that happen to hold an earlier answer) is NaN rather than a plausible value."""
        torch = self.torch
        n = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) // 4
        n = min(2 * n, 1 << 28)  # at most 1 GiB
        if n:
            torch.full((n,), float("nan"), dtype=torch.float32, device=self.device)
            self.sync()

    # -- the candidate's calls -------------------------------------------------------------------------------------
    def launches(self) -> int:
        """Calls of the candidate's own kernels so far (its extensions' functions and its Triton kernels)."""
        return sum(self.record.calls.values()) + sum(self.triton_launches.values())

    def check_harness(self) -> bool:
        """Whether what the harness runs changed since before candidate code (`HarnessGuard.check`)."""
        return self.guard.check()

    def call_candidate(self, args):
        """The candidate's forward and the device synchronise after it: the only code whose errors are the
        candidate's during a trial or a round (asynchronous kernel faults surface at the synchronise). What the
        harness runs is checked as the call returns, before the harness touches anything the call could have
        patched (a patch that undoes itself when first used would be gone by the request's end)."""
        out = self.model(*args)
        self.guard.check()
        self.sync()
        return out

    def forward(self, args, profile: bool, seed: int | None = None, perturb: str | None = None, expect=None,
                exact: bool = True, check_state: bool = True, dispatcher_check: bool = True):
        """One candidate call on `args` (the inputs made for this trial or round, never seen by anything else);
        returns (outputs, report dict), the outputs None where they are not what `expect` (the reference's
        `output_spec`) allows. Raises `CandidateError` for what the candidate's code raised; anything else raised here
        is the harness's. `check_state` off: the global-state check (`HarnessGuard.changes`) is left to the caller's
        request (the timing's audited rounds: it runs once after the timing, with the device shared again);
        `dispatcher_check` off leaves the dispatcher's digest out of it (`TrialRequest.dispatcher_check`)."""
        from musacoder.judge.inputs import make_inputs, output_problem

        self.sync()
        py_threads, threads = thread_count(), native_threads()
        launches0 = self.launches()
        t0 = time.perf_counter()
        with self.torch.no_grad():
            if profile:
                out, report = self._profiled_call(args)
            else:
                out, report = guarded(self.call_candidate, args), {}
        parts = report.setdefault("harness_s", {})
        parts["call"] = time.perf_counter() - t0 - parts.get("events", 0.0)
        report["launches"] = self.launches() - launches0
        report["device_mem_peak"] = self.device_mem_peak()
        if check_state:
            t1 = time.perf_counter()
            report["global_state"] = self.guard.changes(dispatcher=dispatcher_check)
            parts["guard"] = time.perf_counter() - t1
        report["py_threads_added"] = thread_count() - py_threads
        report["native_threads_added"] = native_threads() - threads
        report["device_clocks"] = sorted(self.device_clocks)
        bad = output_problem(out, expect, exact)
        if bad:
            report["output_type_error"] = bad
            out = None
        if seed is not None:  # inputs must be bit-identical to a fresh copy after the call
            t1 = time.perf_counter()
            pristine = make_inputs(self.task_module, seed, perturb=perturb, device=self.device)
            report["input_mutation"] = input_mutation(pristine, args)
            del pristine
            parts["mutation_check"] = time.perf_counter() - t1
        return out, report

    def _profiled_call(self, args):
        """The candidate's call under the profiler (every thread, the device's activity too): (outputs, what the
        runtime rule read from its events)."""
        torch = self.torch
        from musacoder.legality.runtime import FORWARD_RANGE, analyse_events

        acts = [torch.profiler.ProfilerActivity.CPU]
        if self.device.startswith("cuda"):
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        elif self.device.startswith("musa"):  # torch_musa's kernels: the PrivateUse1 activity
            acts.append(torch.profiler.ProfilerActivity.PrivateUse1)
        self.record.profiling = True
        try:
            with torch.profiler.profile(activities=acts, record_shapes=True,
                                        experimental_config=all_threads(torch)) as prof:
                with torch.profiler.record_function(FORWARD_RANGE):
                    out = guarded(self.call_candidate, args)
        finally:
            self.record.profiling = False
        t0 = time.perf_counter()
        rt = analyse_events(prof.events())
        return out, {"illegal_ops": rt.illegal_ops, "ops": sorted(set(rt.all_ops)),
                     "device_kernels": sorted(set(rt.device_kernels)), "device_time_ms": rt.device_time_ms,
                     "python_op_counts": rt.python_op_counts, "harness_s": {"events": time.perf_counter() - t0}}

    def outputs_reply(self, out, ipc: bool):
        """Outputs as sent to the trusted side: large CUDA tensors as CUDA IPC exports when `ipc` (kept alive until
        the next request, see `musacoder.judge.ipc`), everything else copied to the CPU for the pipe."""
        from musacoder.judge import ipc as cuda_ipc
        from musacoder.judge.inputs import to_cpu

        self.last_outputs = out
        if out is None:
            return None
        if ipc:
            out = cuda_ipc.export_outputs(out, self.exports)
        return to_cpu(out)

    # -- names kept for callers that reach into the worker --------------------------------------------------------
    def _arm_watch(self) -> None:
        self.guard.arm()

    @property
    def _harness_moved(self) -> set[str]:
        return self.guard.moved

    @property
    def _kernels_read(self) -> set:
        return self.kernels_read

    def _install_triton_hook(self) -> None:
        triton_hook.install(self)

    def _read_triton_kernel(self, name: str, kernel) -> None:
        triton_hook.read_compiled_kernel(self, name, kernel)


def all_threads(torch):
    """The profiler's option to record ops on every thread, where this torch has it: an op the candidate's native
    code runs on another thread (an OpenMP region's workers) is then seen too, not only the calling thread's."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return _ExperimentalConfig(profile_all_threads=True)
    except (ImportError, TypeError):
        return None
