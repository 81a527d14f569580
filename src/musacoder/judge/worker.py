"""The candidate worker: the only process that imports and runs candidate code.

Started by `musacoder.judge.sandbox` (forked by `musacoder.judge.forkserver`, or as `python -m musacoder.judge.worker
FD_IN FD_OUT`) in its own process group, in a throw-away working directory, with a scrubbed environment. It never
receives reference outputs: it gets inputs, returns the candidate's outputs (and the inputs as they are after the
call), the aten ops the profiler saw and the kernel launches the build/launch hooks counted. Timers are captured before
any candidate code is imported.

Whose fault an error is: only what the candidate's own code raises (its import and builds, `ModelNew(...)` and its
`.to()`, its forward and the device synchronise right after it, where asynchronous kernel faults surface) is replied
as `runtime_error`. Anything else raised here (making inputs, pristine copies, mutation checks, clones, the reference
copy, the timer) is the harness's: it is replied as `infra_error`, with `oom` and the process's device memory facts,
and the trusted side decides what it means.
"""

from __future__ import annotations

import functools
import os
import random
import sys
import threading
import time
import traceback
import types
from pathlib import Path

# Captured before candidate code exists in this process.
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
        self.reply_key = None  # the current request's (protocol.REPLY_KEY)
        self.device_clocks: set[str] = set()  # Triton kernels that read a GPU clock (`_read_triton_kernel`)
        self._kernels_read: set = set()
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
        self._exports: list = []  # exported over CUDA IPC, kept alive until the next request (`ipc.release`)
        self.release_memory = False  # give cached device blocks back after every request (large tasks; see `init`)
        self.channel: tuple[int, int] | None = None  # (from the trusted side, to it): for mid-request build requests
        self._harness_moved: set[str] = set()  # what `check_harness` found changed since before candidate code

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
                "float32 matmul precision": torch.get_float32_matmul_precision(), **_scheduling(),
                "environment": _environment(), "dispatcher": _dispatcher(torch), "allocators": _allocators(torch)}

    def global_state_changes(self) -> list[str]:
        before = getattr(self, "_state0", None)
        if before is None:
            return []
        now = self.global_state()
        out = [f"{k} changed from {before[k]} to {now[k]}" for k in before
               if now[k] != before[k] and k not in ("environment", "dispatcher", "allocators")]
        swapped = sorted(k for k, a in before.get("allocators", {}).items() if a and now.get("allocators", {}).get(k) != a)
        if swapped:
            out.append(f"PyTorch's {', '.join(swapped)} allocator was replaced (an allocator of the candidate's runs its "
                       "code inside every allocation of the harness and the reference)")
        self.check_harness()
        patched = sorted(self._harness_moved)
        if patched:
            out.append(f"the code the harness runs in the worker was changed: {', '.join(patched[:5])} (PyTorch's "
                       "classes and functions, the verifier's own, the interpreter's hooks and mode stacks may not be "
                       "patched)")
        redone = sorted(op for op, h in before.get("dispatcher", {}).items() if now.get("dispatcher", {}).get(op) != h)
        if redone:
            out.append(f"kernels registered with PyTorch's dispatcher for {', '.join(redone[:5])} (a registration "
                       "changes what that op does for every caller in the process, the harness and the reference "
                       "included)")
        if now.get("environment") != before.get("environment"):
            changed = sorted({line.split("=", 1)[0] for line in set(now["environment"]) ^ set(before["environment"])})
            out.append(f"environment variables changed: {', '.join(changed[:8])} (they can change how the reference "
                       "runs; only build variables such as TORCH_CUDA_ARCH_LIST may be set)")
        return out

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

    def sync(self):
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()
        elif self.device.startswith("musa"):
            self.torch.musa.synchronize()

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
                if kw.get("warmup"):  # `kernel.warmup(...)` compiles without launching: not a call of the kernel
                    return _orig(self_, *args, **kw)
                fn = getattr(self_, "fn", None)
                name = getattr(fn, "__name__", None) or getattr(self_, "__name__", "triton_kernel")
                counts[name] = counts.get(name, 0) + 1
                _refuse_tensor_constexprs(torch, fn, name, args, kw)
                if not self.record.profiling:
                    return _orig(self_, *args, **kw)
                with torch.profiler.record_function(f"musacoder::triton::{name}"):
                    return _orig(self_, *args, **kw)

            cls.run = run
        try:  # every compiled kernel, however it was compiled or launched, has its PTX read
            from triton.compiler.compiler import CompiledKernel
        except Exception:  # noqa: BLE001 - a Triton without it: launches through JITFunction.run still count
            return
        init = CompiledKernel.__init__

        def read_after_init(self_, *args, _init=init, **kw):
            _init(self_, *args, **kw)
            self._read_triton_kernel(getattr(self_, "name", "triton_kernel"), self_)

        CompiledKernel.__init__ = read_after_init

    def _read_triton_kernel(self, name: str, kernel) -> None:
        """Note a compiled Triton kernel that reads a GPU clock (`musacoder.legality.machine_code`), once per
        compiled kernel (called as Triton makes each `CompiledKernel`); reported with every call and timing request
        (`device_clocks`)."""
        key = getattr(kernel, "hash", None)
        if key is None or key in self._kernels_read:
            return
        self._kernels_read.add(key)
        from musacoder.legality.machine_code import ptx_clock_reads

        try:
            asm = getattr(kernel, "asm", None)
            ptx = asm.get("ptx") if isinstance(asm, dict) else None
            regs = sorted({reg for _, reg in ptx_clock_reads(ptx)}) if isinstance(ptx, str) else []
        except Exception:  # noqa: BLE001 - a kernel object of another Triton: nothing read, nothing held against it
            regs = []
        if regs:
            self.device_clocks.add(f"the Triton kernel {name} reads the GPU's clock ({', '.join(regs)}): a kernel that "
                                   "times itself can tell the rounds the profiler watches from the timed ones")

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
        if self.backend == "musa":  # torch_musa (or its stand-in under $MUSACODER_MUSA_SHIM) before the candidate
            from musacoder.judge.devices import require_backend

            require_backend("musa")
            if self.device.startswith("musa"):  # torch.musa's timers, as they are before candidate code runs
                from musacoder.judge import timing

                timing.capture(self.torch, "musa")
        self._warm_device()
        self.record = BuildRecord()
        broker = self._request_build if os.environ.get("MUSACODER_BUILD_BROKER") == "1" and self.channel else None
        cpp_ext.load_inline = make_cached_load_inline(cpp_ext.load_inline, msg["cache_dir"], self.backend, self.record,
                                                      request_build=broker)
        if self.backend == "musa" and self.device.startswith("musa"):  # torch_musa's builder: recorded and counted
            import torch_musa.utils.musa_extension as musa_ext

            from musacoder.build.cache import make_counted_load_inline

            musa_ext.load_inline = make_counted_load_inline(musa_ext.load_inline, self.record)
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
        if not (self.backend == "triton" and self.device == "cpu"):  # Triton's CPU interpreter works in NumPy itself
            _seal_array_exits(self.torch)
        self._state0 = self.global_state()
        self._arm_watch()
        threads0 = _native_threads()
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
        changes = self.global_state_changes()
        started = _native_threads() - threads0
        if started > 0:  # a thread started at import is not counted by any call's check (it did work after the clock)
            changes.append(f"importing the candidate started {started} thread(s) (a kernel may use OpenMP inside its "
                           "call; no thread of its own)")
        return {"ok": True, "builds": self.record.builds, "seconds": time.perf_counter() - t0,
                "global_state": changes}

    def _request_build(self, request: dict) -> dict:
        """Ask the trusted side to build (`musacoder.build.broker`) in the middle of a request: it answers this
        message, then waits for the request's own reply."""
        from musacoder.judge import protocol

        fd_in, fd_out = self.channel
        protocol.send(fd_out, {"build_request": request, protocol.REPLY_KEY: self.reply_key})
        return protocol.recv(fd_in)

    def op_build(self, msg):
        """The builder's one request (a fresh worker that never sees candidate code): build `kwargs` in `stage/` of
        this worker's folder with torch's own `load_inline`; the trusted side installs the result in the cache."""
        import torch.utils.cpp_extension as cpp_ext

        from musacoder.build.cache import BuildRecord, build_into, deterministic_failure

        key, record = str(msg["key"]), BuildRecord()
        stage = os.path.join(os.getcwd(), "stage")
        t0 = time.perf_counter()
        try:
            module = build_into(cpp_ext.load_inline, dict(msg["kwargs"]), Path(stage), f"mc_ext_{key[:20]}", record)
        except Exception as e:  # noqa: BLE001 - the compiler's failure is the reply
            log = str(e) or f"{type(e).__name__} while building"
            return {"ok": False, "log": log, "deterministic": deterministic_failure(log),
                    "seconds": time.perf_counter() - t0}
        where = os.path.dirname(module.__file__) if getattr(module, "__file__", None) else stage
        return {"ok": True, "rel": os.path.relpath(where, stage), "fast": record.fast_build,
                "seconds": time.perf_counter() - t0}

    def op_init(self, msg):
        """Make ModelNew (candidate code) and the worker's reference copy (harness), both with the reference's
        weights. Only what ModelNew's constructor and its `.to()` raise is the candidate's error."""
        torch = self.torch
        if msg.get("device"):
            self.device = msg["device"]
            if self.device.startswith("cuda"):
                torch.cuda.set_device(torch.device(self.device))
            elif self.device.startswith("musa"):
                torch.musa.set_device(torch.device(self.device))
        self.release_memory = bool(msg.get("release_memory"))
        init_inputs = list(msg["init_inputs"])
        ref_sd = msg["state_dict"]
        if self.candidate is None:
            self.ref_model = self._reference(init_inputs, ref_sd, msg["seed"])
            return {"ok": True, "notes": []}
        torch.manual_seed(msg["seed"])
        try:
            model = self.candidate.ModelNew(*init_inputs)
            notes = []
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
            self.sync()
        except BaseException as e:  # noqa: BLE001 - the candidate's constructor
            return _candidate_error(e, "ModelNew.__init__")
        if self.task_module is not None and msg.get("build_reference", True):
            self.ref_model = self._reference(init_inputs, ref_sd, msg["seed"])
        return {"ok": True, "notes": notes, "device_mem_peak": self.device_mem_peak()}

    def _reference(self, init_inputs, state_dict, seed: int):
        torch = self.torch
        torch.manual_seed(seed)
        ref = self.task_module.Model(*init_inputs)
        ref.load_state_dict(state_dict)
        return ref.to(self.device)

    def _call_candidate(self, args):
        """The candidate's forward and the device synchronise after it: the only code whose errors are the
        candidate's during a trial or a round (asynchronous kernel faults surface at the synchronise). What the
        harness runs is checked as the call returns, before the harness touches anything the call could have
        patched (a patch that undoes itself when first used would be gone by the request's end)."""
        out = self.model(*args)
        self.check_harness()
        self.sync()
        return out

    def check_harness(self) -> bool:
        """Compare what `_watched` names with its values before candidate code (about 0.2 ms: the live namespaces
        are read back entry by entry); remember what moved. True when something did. Run as each candidate call
        returns and at the end of every request (`global_state_changes`)."""
        watch = getattr(self, "_watch", None)
        if watch is None:
            return False
        missing = object()
        moved = [label for space, key, value, label in watch[0] if space.get(key, missing) is not value]
        for label, get, value in watch[1]:
            now = get()
            if now != value:  # a changed hook or mode stack, or the names a class gained
                moved += [f"{label}.{k}" for k in sorted(now - value)] if type(value) is frozenset else [label]
        self._harness_moved.update(moved)
        return bool(moved)

    def _arm_watch(self) -> None:
        """What `_watched` names and its values now, before candidate code, for `check_harness`."""
        self._watch = _watched(self.torch)

    def _forward(self, args, profile: bool, seed: int | None = None, perturb: str | None = None, expect=None,
                 exact: bool = True):
        """One candidate call on `args` (the inputs made for this trial or round, never seen by anything else);
        returns (outputs, report dict), the outputs None where they are not what `expect` (the reference's
        `output_spec`) allows. Raises `CandidateError` for what the candidate's code raised; anything else raised here
        is the harness's."""
        torch = self.torch
        from musacoder.judge.inputs import make_inputs, output_problem
        from musacoder.legality.runtime import FORWARD_RANGE, analyse_events

        self.sync()
        py_threads, native_threads = _thread_count(), _native_threads()
        launches0 = self.launches()
        report = {}
        with torch.no_grad():
            if profile:
                acts = [torch.profiler.ProfilerActivity.CPU]
                if self.device.startswith("cuda"):
                    acts.append(torch.profiler.ProfilerActivity.CUDA)
                elif self.device.startswith("musa"):  # torch_musa's kernels: the PrivateUse1 activity
                    acts.append(torch.profiler.ProfilerActivity.PrivateUse1)
                self.record.profiling = True
                try:
                    with torch.profiler.profile(activities=acts, experimental_config=_all_threads(torch)) as prof:
                        with torch.profiler.record_function(FORWARD_RANGE):
                            out = _guarded(self._call_candidate, args)
                finally:
                    self.record.profiling = False
                rt = analyse_events(prof.events())
                report.update(illegal_ops=rt.illegal_ops, ops=sorted(set(rt.all_ops)), device_kernels=sorted(set(rt.device_kernels)),
                              device_time_ms=rt.device_time_ms, python_op_counts=rt.python_op_counts)
            else:
                out = _guarded(self._call_candidate, args)
        report["launches"] = self.launches() - launches0
        report["device_mem_peak"] = self.device_mem_peak()
        report["global_state"] = self.global_state_changes()
        report["py_threads_added"] = _thread_count() - py_threads
        report["native_threads_added"] = _native_threads() - native_threads
        report["device_clocks"] = sorted(self.device_clocks)
        bad = output_problem(out, expect, exact)
        if bad:
            report["output_type_error"] = bad
            out = None
        if seed is not None:  # inputs must be bit-identical to a fresh copy after the call
            pristine = make_inputs(self.task_module, seed, perturb=perturb, device=self.device)
            report["input_mutation"] = input_mutation(pristine, args)
            del pristine
        return out, report

    def op_trial(self, msg):
        from musacoder.judge.inputs import make_inputs

        inputs = make_inputs(self.task_module, msg["seed"], perturb=msg["perturb"], device=self.device)
        self._poison_allocator(inputs)
        try:
            out, report = self._forward(inputs, profile=msg.get("profile", True), seed=msg["seed"],
                                        perturb=msg["perturb"], expect=msg.get("expect"))
        except CandidateError as e:
            return _candidate_error(e.error, "forward")
        del inputs
        return {"ok": True, "outputs": self._outputs_reply(out, msg.get("ipc")), "report": report}

    def _outputs_reply(self, out, ipc: bool):
        """Outputs as sent to the trusted side: large CUDA tensors as CUDA IPC exports when `ipc` (kept alive until
        the next request, see `musacoder.judge.ipc`), everything else copied to the CPU for the pipe."""
        from musacoder.judge import ipc as cuda_ipc
        from musacoder.judge.inputs import to_cpu

        self._last_outputs = out
        if out is None:
            return None
        if ipc:
            out = cuda_ipc.export_outputs(out, self._exports)
        return to_cpu(out)

    def op_resend(self, msg):
        """The last outputs again, through the pipe (the trusted side could not read their CUDA IPC exports)."""
        from musacoder.judge.inputs import to_cpu

        last = getattr(self, "_last_outputs", None)
        if isinstance(last, dict):  # take_outputs' rounds
            return {"ok": True, "outputs": {r: to_cpu(o) for r, o in last.items()}}
        return {"ok": True, "outputs": to_cpu(last)}

    def op_ipc_probe(self, msg):
        """Export a known pattern on the verification's GPU (before any candidate code is imported)."""
        from musacoder.judge import ipc as cuda_ipc

        self.device = msg["device"]
        self.torch.cuda.set_device(self.torch.device(self.device))
        return {"ok": True, "probe": cuda_ipc.probe_spec(self.device, self._exports)}

    def op_time(self, msg):
        """Interleaved timing of candidate and reference over rotating input sets, with secret audit rounds.

        Round r uses input set r mod P, refilled in place from seed(master, r) before reuse, so contents never
        repeat while pointers do. The candidate runs before the reference in every round. Audit rounds run the
        candidate under the profiler (untimed) and keep its output for the trusted side to re-check; check rounds
        are ordinary timed rounds whose output is also kept (after the clock stopped, so nothing tells them apart
        from the others), `check_keep` of them drawn by reservoir sampling over every timed round of the run (a
        secret `check_key`), so a late round is as likely to be re-checked as an early one. Outputs of `host_hold_bytes` or more are kept in host memory rather than on the device.
        Every timed round must call the candidate's own kernels (counted by the build hook).
        """
        torch = self.torch
        from musacoder.judge.inputs import nbytes, output_problem, seed_for
        from musacoder.judge.timing import RoundTrip, Timer, rel_sem

        master, n_sets, perturb = msg["master_seed"], msg["input_sets"], msg.get("perturb")
        warmup, min_rep, max_rep = msg["warmup"], msg["repeats"], msg["max_repeats"]
        budget_ns = msg["budget_s"] * 1e9
        host_hold = msg.get("host_hold_bytes", 1 << 30)
        audits = set(msg["audit_rounds"])
        expect = msg.get("expect")  # the reference's outputs in the trials (`output_spec`), shapes not binding here
        # late audits: after the pool the fixed ones are drawn from, each round is profiled with probability
        # `late_audit_p` (a secret key; at most `late_audit_max` of them), decided before the call, so a candidate
        # cannot count calls to be honest only in the rounds the profiler sees
        late_p, late_max = float(msg.get("late_audit_p", 0.0)), int(msg.get("late_audit_max", 0))
        late_from = int(msg.get("late_audit_from", 0))
        late_picker = random.Random(msg.get("late_audit_key", 0))
        late = 0
        # the checked rounds: a reservoir sample (secret key) over every timed round of the run, however long it
        # runs, decided after each round's clock stopped; so no round, early or late, is safe from the re-check
        keep_n = int(msg.get("check_keep", 0))
        picker = random.Random(msg.get("check_key", 0))
        kept: list[int] = []
        timed_rounds = 0
        checked = {}
        no_launch: list[int] = []
        relaid: list[int] = []
        patched: list[int] = []  # rounds whose call left what the harness runs changed (`check_harness`)
        cand_ms: list = []
        ref_ms: list[float] = []
        audit_out = {}
        self._held = {}
        start = time.perf_counter_ns()

        inputs_for = _RotatingInputs(self, master, n_sets, perturb)

        def keep(out):
            return _clone(out) if nbytes(out) < host_hold else _to_host(out)

        timer = Timer(torch, self.device, msg.get("l2_flush_bytes", 256 << 20))
        trip = RoundTrip(torch) if self.device.startswith("cuda") else \
            RoundTrip(torch, "musa") if self.device.startswith("musa") else RoundTrip(None)
        r = 0
        final_round = None
        while True:
            args = inputs_for(r)
            audit_now = r in audits or r == final_round
            if not audit_now and r >= late_from and late < late_max and late_picker.random() < late_p:
                audit_now, late = True, late + 1
            if audit_now:
                timer.flush()  # the profiler's device time is taken from the L2 state the timed rounds start from
                try:
                    out, report = self._forward(args, profile=True, seed=seed_for(master, r), perturb=perturb,
                                                expect=expect, exact=False)
                except CandidateError as e:
                    return _candidate_error(e.error, f"forward (timing round {r})")
                audit_out[r] = {"report": report}
                self._held[r] = keep(out)
                del out
                if r == final_round:
                    break
            else:
                launches0 = self.launches()
                layout0 = _layout(args)
                try:
                    t_c, out = _guarded(timer.timed, self.model, args)
                except CandidateError as e:
                    return _candidate_error(e.error, f"forward (timing round {r})")
                if self.check_harness():
                    patched.append(r)
                if self.launches() == launches0:
                    no_launch.append(r)
                if _layout(args) != layout0:  # the reference runs on these same tensors next
                    relaid.append(r)
                if relaid[-1:] == [r] or patched[-1:] == [r]:
                    break  # illegal already: nothing more runs on inputs or harness code the call changed
                timed_rounds += 1
                slot = len(kept) if len(kept) < keep_n else picker.randrange(timed_rounds)
                if slot < keep_n:  # a timed round like any other: its output is kept only after the clock stopped
                    if slot < len(kept):
                        checked.pop(kept[slot], None)
                        self._held.pop(kept[slot], None)
                        kept[slot] = r
                    else:
                        kept.append(r)
                    bad = output_problem(out, expect, exact=False)
                    checked[r] = {"report": {"output_type_error": bad} if bad else {}}
                    self._held[r] = None if bad else keep(out)
                del out
                t_r, ref_out = timer.timed(self.ref_model, args)
                del ref_out
                if r >= warmup:
                    cand_ms.append(t_c)
                    ref_ms.append(t_r.stream_ms)  # trusted eager PyTorch: its work is on the stream it was called on
                    trip.sample([t.stream_ms for t in cand_ms])
            r += 1
            n = len(cand_ms)
            if final_round is None and r > max(audits, default=0) and n >= min_rep:
                done = n >= max_rep or (time.perf_counter_ns() - start) > budget_ns or (
                    rel_sem(trip.charge(cand_ms)) < msg["target_sem"] and rel_sem(ref_ms) < msg["target_sem"])
                if done:
                    final_round = r
        inputs_for.clear()
        return {"ok": True, "candidate_ms": trip.charge(cand_ms), "reference_ms": ref_ms, "audits": audit_out,
                "checks": checked, "device_mem_peak": self.device_mem_peak(), "timer_overhead_ms": trip.ms(),
                "no_launch_rounds": no_launch, "relaid_rounds": relaid, "final_round": final_round,
                "patched_rounds": patched, "patched": sorted(self._harness_moved)[:5],
                "device_clocks": sorted(self.device_clocks)}

    def op_take_outputs(self, msg):
        """The outputs kept from the last `time` request's audit and check rounds (those of `rounds`, default all),
        handed over and forgotten here: the trusted side fetches them after the device's timing slot is released,
        one round at a time for large outputs. With `ipc`, each goes over CUDA IPC, an output kept in host memory
        moved back to the device first (one at a time: a 6 GB output crosses the pipe in about 13 s)."""
        from musacoder.judge.inputs import to_cpu

        held = getattr(self, "_held", {})
        rounds = msg.get("rounds")
        picked = {r: held.pop(r) for r in (list(held) if rounds is None else rounds) if r in held}
        self._held = held
        if msg.get("ipc"):
            from musacoder.judge import ipc as cuda_ipc

            picked = {r: _to_device(o, self.device) for r, o in picked.items()}
            self._last_outputs = picked
            return {"ok": True, "outputs": {r: to_cpu(cuda_ipc.export_outputs(o, self._exports)) if o is not None
                                            else None for r, o in picked.items()}}
        self._last_outputs = picked
        return {"ok": True, "outputs": {r: to_cpu(o) if o is not None else None for r, o in picked.items()}}

    def op_time_reference(self, msg):
        """Time the eager reference alone, in a reference-only worker (no candidate code was ever loaded here), on
        rotating input sets from `master_seed` as `time` makes them: `warmup` untimed rounds, then `repeats` timed
        ones. The candidate's worker times the reference beside its own rounds; this figure is the one nothing the
        candidate left in its process (allocator, thread and scheduling state, patched functions) can slow down."""
        from musacoder.judge.timing import Timer

        if self.candidate is not None or self.ref_model is None:
            raise RuntimeError("time_reference runs only in a reference-only worker after init")
        timer = Timer(self.torch, self.device, msg.get("l2_flush_bytes", 256 << 20))
        inputs_for = _RotatingInputs(self, msg["master_seed"], msg["input_sets"], msg.get("perturb"))
        warmup = msg["warmup"]
        times: list[float] = []
        for r in range(warmup + msg["repeats"]):
            t, out = timer.timed(self.ref_model, inputs_for(r))
            del out
            if r >= warmup:
                times.append(t.stream_ms)
        inputs_for.clear()
        return {"ok": True, "reference_ms": times}

    def op_compile_reference(self, msg):
        """Compile the reference with torch.compile and run it once on each input set (the compile and its warm-up are
        host work: the device need not be held exclusively for them)."""
        torch = self.torch
        from musacoder.judge.inputs import make_inputs, seed_for

        self._compiled = torch.compile(self.ref_model, mode=msg.get("mode") or None)
        self._compile_sets = [make_inputs(self.task_module, seed_for(msg["master_seed"], 7_000_000 + i),
                                          perturb=msg.get("perturb"), device=self.device)
                              for i in range(msg["input_sets"])]
        with torch.no_grad():
            for inputs in self._compile_sets:
                self._compiled(*inputs)
        self.sync()
        return {"ok": True}

    def op_time_compile(self, msg):
        """Time the compiled reference (`compile_reference` first) on rotating inputs: the `torch.compile` baseline."""
        from musacoder.judge.timing import Timer

        timer = Timer(self.torch, self.device, msg.get("l2_flush_bytes", 256 << 20))
        sets, times = self._compile_sets, []
        for r in range(msg["warmup"] + msg["repeats"]):
            t, _ = timer.timed(self._compiled, sets[r % len(sets)])
            if r >= msg["warmup"]:
                times.append(t.stream_ms)  # trusted code (inductor's kernels), timed like the eager reference
        return {"ok": True, "compile_ms": times}


@functools.lru_cache(maxsize=256)
def _constexpr_params(fn) -> tuple[tuple[int, str], ...]:
    """(position, name) of each parameter of a Triton kernel's function annotated `tl.constexpr` (read once per
    function: launches in timed rounds only look them up)."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ()
    return tuple((i, p.name) for i, p in enumerate(params)
                 if ("constexpr" in p.annotation if isinstance(p.annotation, str)
                     else getattr(p.annotation, "__name__", "") == "constexpr"))


def _refuse_tensor_constexprs(torch, fn, name: str, args, kw) -> None:
    """A tensor passed as a `tl.constexpr` is a compile-time constant no GPU build accepts; under Triton's interpreter
    (the triton backend on a CPU) it reaches the kernel's body as a host tensor, which plain Python could then compute
    on. Raised as the candidate's error, as the compiler would."""
    if fn is None:
        return
    try:
        constexprs = _constexpr_params(fn)
    except TypeError:  # an unhashable callable: read it uncached
        constexprs = _constexpr_params.__wrapped__(fn)
    for i, p in constexprs:
        value = args[i] if i < len(args) else kw.get(p)
        if isinstance(value, torch.Tensor):
            raise TypeError(f"Triton kernel {name}: a tensor was passed as the tl.constexpr {p}; constexpr "
                            "arguments are compile-time scalars")


class _RotatingInputs:
    """The inputs of timing round r: set r mod P, refilled in place from seed(master, r) before reuse, so contents
    never repeat while pointers do (the same for the candidate's rounds and the reference's), drawn with the
    perturbation the trusted side chose for timing (`musacoder.judge.inputs`)."""

    def __init__(self, worker, master: int, n_sets: int, perturb: str | None = None):
        self.worker, self.master, self.n_sets, self.sets = worker, master, max(1, n_sets), []
        self.perturb = perturb

    def __call__(self, r: int):
        from musacoder.judge.inputs import make_inputs, seed_for

        w = self.worker
        fresh = make_inputs(w.task_module, seed_for(self.master, r), perturb=self.perturb, device=w.device)
        if len(self.sets) < self.n_sets:
            self.sets.append(fresh)
            return fresh
        cur = self.sets[r % self.n_sets]
        with w.torch.no_grad():
            for dst, src in zip(cur, fresh):
                if isinstance(dst, w.torch.Tensor):
                    dst.copy_(src)
        return cur

    def clear(self) -> None:
        self.sets.clear()


class CandidateError(Exception):
    """What the candidate's own code raised (its forward, or a kernel fault seen at the synchronise after it)."""

    def __init__(self, error: BaseException):
        super().__init__(type(error).__qualname__)  # not str(error): the candidate's object, formatted by `_trim_tb`
        self.error = error


# environment variables a candidate may set (for its own build, before load_inline); any other change can alter
# how the reference, timed in this process, runs (MKL_CBWR, OMP_*, CUBLAS_WORKSPACE_CONFIG …)
_BUILD_ENV = {"TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "NVCC_APPEND_FLAGS",
              "NVCC_PREPEND_FLAGS", "TORCH_EXTENSIONS_DIR"}


# the dispatch keys whose kernels compute (or route to those that do) on the devices verified here
_COMPUTE_KEYS = frozenset({
    "CPU", "CUDA", "PrivateUse1", "AutogradCPU", "AutogradCUDA", "AutogradPrivateUse1", "AutogradOther", "Autograd",
    "CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional",
    "ADInplaceOrView", "BackendSelect", "AutocastCPU", "AutocastCUDA", "Undefined"})


def _dispatcher(torch) -> dict[str, int]:
    """Per operator, a digest of the kernels the dispatcher holds for the compute keys (each line names where its
    kernel was registered): a candidate's `TORCH_LIBRARY_IMPL(aten, CPU, m)` replacing `detach` (so outputs were
    computed only when the harness read them) shows as a change, however its registration was reached. Ops added
    later are not compared. About 60 ms for PyTorch's ~3,600 ops."""
    try:
        names = torch._C._dispatch_get_all_op_names()
        dump = torch._C._dispatch_dump
    except AttributeError:  # a torch without these: the check is skipped, the binary and source rules remain
        return {}
    out = {}
    for name in names:
        lines = [line for line in dump(name).splitlines() if line.split(":", 1)[0] in _COMPUTE_KEYS]
        out[name] = hash("\n".join(lines))
    return out


def _allocators(torch) -> dict[str, int]:
    """The address of each allocator PyTorch hands out memory through (CPU; the CUDA caching allocator where it is
    loaded), read through libc10's exported getters and globals: a candidate that registered an allocator of its own
    (`c10::SetCPUAllocator`) ran the work it owed inside the harness's next allocation, billed to the reference. Empty
    where the libraries or names are not found (the binary rule still rejects the registration)."""
    import ctypes

    lib = Path(torch.__file__).parent / "lib"
    out: dict[str, int] = {}
    try:
        c10 = ctypes.CDLL(str(lib / "libc10.so"), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        get_cpu = c10._ZN3c1015GetCPUAllocatorEv  # c10::GetCPUAllocator(), always set
        get_cpu.restype, get_cpu.argtypes = ctypes.c_void_p, []
        out["CPU"] = get_cpu() or 0
    except (OSError, AttributeError):
        pass
    try:  # std::atomic<CUDAAllocator*> c10::cuda::CUDACachingAllocator::allocator, set when libc10_cuda is loaded
        c10_cuda = ctypes.CDLL(str(lib / "libc10_cuda.so"), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        out["CUDA caching"] = ctypes.c_void_p.in_dll(c10_cuda, "_ZN3c104cuda20CUDACachingAllocator9allocatorE").value or 0
    except (OSError, ValueError, AttributeError):
        pass
    return out


# modules whose functions the harness calls around the candidate's (their callables are compared by identity), and
# classes whose whole namespace is (a property or method patched there ran when the harness next touched a tensor)
_WATCHED_MODULES = ("builtins", "time", "torch", "torch.nn.functional", "torch.profiler", "torch.autograd",
                    "torch.autograd.profiler", "torch.autograd.grad_mode", "torch.cuda")
_WATCHED_CLASSES = ("Tensor", "_C.TensorBase", "nn.Module", "no_grad", "enable_grad", "inference_mode",
                    "profiler.profile", "autograd.profiler.record_function", "cuda.Event")


def _watched(torch) -> tuple[list, list]:
    """What the harness runs around the candidate's calls, as (namespace, key, value, label) entries compared by
    identity and (label, getter, value) entries compared by value: the functions and classes of the verifier's own
    modules in this worker (and the namespaces of its classes, and the code and defaults of its own functions) and of
    the PyTorch modules it calls, the whole namespace of `torch.Tensor` and the other classes above, the worker's
    Triton hooks, the interpreter's profile and trace hooks and PyTorch's torch-function and dispatch mode stacks (a
    class's names as a frozenset, so one it gains shows as itself). Native code that reached the interpreter
    replaced the worker's clock (`timing._perf_ns`), `Tensor.untyped_storage` (run by the layout check before the
    clock starts) and
    `Tensor.detach` (run when the harness reads an output), each doing the candidate's work where no clock or
    profiler saw it. Modules and names that appear later are not compared."""
    spaces: list = []
    calls: list = [("sys.getprofile()", sys.getprofile, sys.getprofile()), ("sys.gettrace()", sys.gettrace, sys.gettrace()),
                   ("threading.getprofile()", threading.getprofile, threading.getprofile()),
                   ("threading.gettrace()", threading.gettrace, threading.gettrace())]

    def space(d, label: str, only_callables: bool) -> None:
        spaces.extend((d, k, v, f"{label}.{k}") for k, v in list(d.items()) if not only_callables or callable(v))
        if not only_callables:  # a class gains no names: one added shadows a base class's (`Tensor.untyped_storage`
            # over TensorBase's)
            calls.append((label, functools.partial(frozenset, d), frozenset(d)))

    if torch is not None:
        for label, fn in (("torch-function modes", "_len_torch_function_stack"),
                          ("dispatch modes", "_len_torch_dispatch_stack")):
            get = getattr(torch._C, fn, None)
            if get is not None:
                calls.append((label, get, get()))
        for dotted in _WATCHED_CLASSES:
            cls = torch
            for part in dotted.split("."):
                cls = getattr(cls, part, None)
                if cls is None:
                    break
            if isinstance(cls, type):
                space(cls.__dict__, f"torch.{dotted}", False)
    for modname, clsname, attr in (("triton.runtime.jit", "JITFunction", "run"),
                                   ("triton.compiler.compiler", "CompiledKernel", "__init__")):
        cls = getattr(sys.modules.get(modname), clsname, None)  # the worker's Triton hooks, where installed
        if isinstance(cls, type) and attr in cls.__dict__:
            spaces.append((cls.__dict__, attr, cls.__dict__[attr], f"{modname}.{clsname}.{attr}"))
    for name, mod in list(sys.modules.items()):
        if name.startswith("musacoder.") or name in _WATCHED_MODULES:
            d = getattr(mod, "__dict__", {})
            space(d, name, True)
            if name.startswith("musacoder."):
                own = [(f"{name}.{k}", v) for k, v in list(d.items())]
                for k, v in list(d.items()):  # its own classes' methods (pydantic records, which fill in their
                    # schema lazily, hold no harness logic)
                    if isinstance(v, type) and getattr(v, "__module__", None) == name \
                            and not hasattr(v, "model_fields"):
                        spaces.extend((v.__dict__, a, f, f"{name}.{k}.{a}") for a, f in list(v.__dict__.items())
                                      if not a.startswith("__"))
                        own += [(f"{name}.{k}.{a}", f) for a, f in list(v.__dict__.items())]
                # and the code and defaults inside its own functions (a function kept, its code swapped)
                calls.extend((f"{label} (its code or defaults)", functools.partial(_code_of, f), _code_of(f))
                             for label, f in own if isinstance(f, types.FunctionType) and f.__module__ == name)
    return spaces, calls


def _code_of(f) -> tuple:
    return f.__code__, f.__defaults__, f.__kwdefaults__


def _environment() -> list[str]:
    """The environment as name=value lines, the build variables left out (a digest would do; the lines name what
    changed)."""
    return sorted(f"{k}={v}" for k, v in os.environ.items() if k not in _BUILD_ENV)


def _layout(args) -> list:
    """What of each input tensor the candidate could change in place without touching its values: shape, strides,
    offset and storage (pointer and size). Compared around every timed call, since the reference is timed on the same
    tensors right after (a `resize_` to a larger batch made the reference do 12 times the work)."""
    out = []
    for a in args:
        if type(a) is not type(None) and hasattr(a, "untyped_storage"):
            st = a.untyped_storage()
            out.append((tuple(a.shape), a.stride(), a.storage_offset(), st.data_ptr(), st.nbytes(), a.dtype))
    return out


def _scheduling() -> dict:
    """The CPU sets and scheduling (policy, nice) of this process's threads, each as the set of distinct values over
    its threads: a thread pinned to fewer cores or made to yield (the reference's too, timed in this process) adds a
    value; a new thread, which inherits its creator's, does not."""
    masks, sched = set(), set()
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return {}
    for tid in tids:
        try:
            masks.add(tuple(sorted(os.sched_getaffinity(tid))))
            sched.add((os.sched_getscheduler(tid), os.getpriority(os.PRIO_PROCESS, tid)))
        except OSError:  # a thread that ended meanwhile
            continue
    return {"thread CPU sets": sorted(masks), "thread scheduling (policy, nice)": sorted(sched)}


def _seal_array_exits(torch) -> None:
    """Take from candidate code every way a tensor's data reaches NumPy (`Tensor.numpy`, the array and DLPack
    protocols, `torch.from_numpy` back): computation there is not the candidate's kernel and no profiler sees it.
    The static rules reject these names in the candidate's Python; this holds also for native code that calls back
    into Python (pybind11's object API). The protocol bound its own `Tensor.numpy` when it was imported."""

    def refused(*_a, **_k):
        raise RuntimeError("MooreEval: tensor data may not be handed to NumPy in a candidate; compute it in your "
                           "own kernel")

    for name in ("numpy", "__array__", "__array_wrap__", "__dlpack__", "__dlpack_device__"):
        setattr(torch.Tensor, name, refused)
    torch.from_numpy = refused


def _all_threads(torch):
    """The profiler's option to record ops on every thread, where this torch has it: an op the candidate's native
    code runs on another thread (an OpenMP region's workers) is then seen too, not only the calling thread's."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return _ExperimentalConfig(profile_all_threads=True)
    except (ImportError, TypeError):
        return None


def _guarded(fn, *args):
    try:
        return fn(*args)
    except BaseException as e:  # noqa: BLE001 - anything the candidate's code raises is its own error
        raise CandidateError(e) from e


def _candidate_error(e: BaseException, where: str) -> dict:
    return {"ok": False, "kind": "runtime_error", "error": _trim_tb(e), "where": where,
            "oom": _is_oom(e)}


def _is_oom(e: BaseException) -> bool:
    try:
        text = f"{type(e).__name__}: {str(e)[:4000]}"
    except BaseException:  # noqa: BLE001 - a candidate's exception whose message cannot be made
        return False
    return "OutOfMemoryError" in text or "out of memory" in text


def _to_host(out):
    from musacoder.judge.inputs import to_cpu

    return to_cpu(out)


def _to_device(out, device: str):
    """Large host tensors of `out` back on `device` (for a CUDA IPC export); everything else as it is."""
    import torch

    if isinstance(out, torch.Tensor) and not out.is_cuda and device.startswith("cuda") \
            and out.numel() * out.element_size() >= (64 << 20):
        return out.to(device)
    if isinstance(out, (list, tuple)):
        return type(out)(_to_device(x, device) for x in out)
    return out


def _clone(out):
    """A copy on the same device, so a candidate that reuses one output buffer cannot change a kept output later."""
    import torch

    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (list, tuple)):
        return type(out)(_clone(x) for x in out)
    return out


def input_mutation(pristine: list, after: list) -> str | None:
    """Whether any input differs from a fresh copy after the call (bit for bit; NaN equals NaN), compared in chunks
    so the check needs little memory beside a large input."""
    import torch

    for i, (b, a) in enumerate(zip(pristine, after)):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
                return f"input {i} changed shape or dtype during forward"
            fb, fa = b.reshape(-1), a.reshape(-1)
            for s in range(0, fb.numel(), 1 << 26):
                cb, ca = fb[s:s + (1 << 26)], fa[s:s + (1 << 26)]
                same = ca == cb
                if b.is_floating_point():
                    same |= torch.isnan(ca) & torch.isnan(cb)
                if not bool(same.all()):
                    return f"input {i} was modified in place by forward (inputs must be left unchanged)"
    return None


def _trim_tb(e: BaseException, limit: int = 4000) -> str:
    """The traceback of `e`, its last `limit` characters. `e` may be the candidate's: an exception with a message of
    gigabytes, or one whose message cannot be made, must not make this harness code fail (that would be the verifier's
    fault, which carries no reward), so a long message is cut before anything is formatted around it."""
    try:
        msg = str(e)
        if len(msg) <= limit:
            text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        else:
            frames = "".join(traceback.format_tb(e.__traceback__))[-(limit // 2):]
            text = f"Traceback (most recent call last):\n{frames}{type(e).__qualname__}: {msg[:limit // 5]} … " \
                   f"[{len(msg) - 2 * (limit // 5)} characters left out] … {msg[-(limit // 5):]}"
    except BaseException:  # noqa: BLE001 - whatever the object does when asked for its text
        return f"{type(e).__qualname__} (its message could not be formatted)"
    return text if len(text) <= limit else "…" + text[-limit:]


def _drop_writable_import_paths() -> None:
    """Take the working directory off the import path (`python -m` put it first, and a forked worker's `""` means
    it too): the candidate's folder, where its native code can write, must not hold a module that a later import of
    the harness's would find first."""
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # no working directory at all: nothing there to import from
        here = None
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != here]
    sys.path_importer_cache.clear()


def main(fd_in: int | None = None, fd_out: int | None = None) -> None:
    """Serve one candidate over the protocol pipes (from argv, or given by the fork server's child)."""
    t0 = time.perf_counter()
    from musacoder.judge import isolation

    isolation.enter_worker()  # namespaces, read-only files, seccomp, limits: before any candidate code exists
    _drop_writable_import_paths()
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
        worker.channel = (fd_in, fd_out)
        from musacoder.judge import timing

        timing.capture(worker.torch)  # timers as they are before any candidate code runs
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
        worker.reply_key = msg.pop(protocol.REPLY_KEY, None)  # echoed in every message of this request
        if worker._exports:  # the trusted side copied the last exports before sending this request
            from musacoder.judge import ipc as cuda_ipc

            try:
                cuda_ipc.release(worker._exports)
                worker.give_back()  # the released exports' memory; the rest went back after the last request
            except BaseException:  # noqa: BLE001 - a device the candidate broke: the next request reports it
                worker._exports.clear()
        if op == "exit":
            protocol.send(fd_out, {"ok": True, protocol.REPLY_KEY: worker.reply_key})
            return
        try:
            reply = getattr(worker, f"op_{op}")(msg)
        except BaseException as e:  # noqa: BLE001 - harness code: a verifier fault, never the candidate's
            reply = {"ok": False, "kind": "infra_error", "error": _trim_tb(e), "where": op, "oom": _is_oom(e),
                     **worker.memory_facts()}
        try:
            worker.give_back()
        except BaseException:  # noqa: BLE001 - a device the candidate broke: the reply says what happened
            pass
        protocol.send(fd_out, {**reply, protocol.REPLY_KEY: worker.reply_key})


if __name__ == "__main__":
    main()
