"""The harness guard: what the candidate may not change in its worker, read before its code exists and compared after.

The harness (timer, profiler, comparisons) and the eager reference run in the candidate's own process, so a candidate
that changed process-wide state could slow the reference, alter its numerics, or run its own work where no clock or
profiler sees it. `HarnessGuard.snapshot` reads, before the candidate's code is imported: the interpreter's and
PyTorch's settings (`global_state`: threads, default dtype, grad mode, matmul precision, thread CPU sets and
scheduling, the environment but for build variables, the dispatcher's kernels, the allocators) and what the harness
runs (`watched`: the verifier's own functions and their code, PyTorch's functions and classes it calls, the worker's
Triton hooks, the interpreter's hooks and mode stacks). `check` compares the latter as each candidate call returns,
`changes` both at the end of every request. The harness's own set-up (`musacoder.judge.worker.setup.prepare`) is done
before the snapshot on every path a worker starts by, so nothing the verifier itself changes is held against the
candidate.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import types
from pathlib import Path

# Captured before candidate code exists in this process.
thread_count = threading.active_count


def native_threads() -> int:
    """Threads of this process as the kernel counts them (Python's and native ones)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


class HarnessGuard:
    """The state read before candidate code (`snapshot`) and what moved since (`check`, `changes`)."""

    def __init__(self, torch):
        self.torch = torch
        self.state0: dict | None = None
        self.watch: tuple[list, list] | None = None
        self.moved: set[str] = set()  # what `check` found changed since the snapshot

    def snapshot(self) -> None:
        """Read the global state and what the harness runs, now, before candidate code."""
        self.state0 = global_state(self.torch)
        self.arm()

    def arm(self) -> None:
        """Read what `watched` names and its values now (`check` compares against it)."""
        self.watch = watched(self.torch)

    def check(self) -> bool:
        """Compare what `watched` names with its values at `arm` (the live namespaces are read back entry by entry);
        remember what moved. True when something did. Run as each candidate call returns and at the end of every
        request (`changes`)."""
        if self.watch is None:
            return False
        missing = object()
        moved = [label for space, key, value, label in self.watch[0] if space.get(key, missing) is not value]
        for label, get, value in self.watch[1]:
            now = get()
            if now != value:  # a changed hook or mode stack, or the names a class gained
                moved += [f"{label}.{k}" for k in sorted(now - value)] if type(value) is frozenset else [label]
        self.moved.update(moved)
        return bool(moved)

    def changes(self, dispatcher: bool = True) -> list[str]:
        """What changed since the snapshot, one sentence each (empty before any snapshot); `dispatcher` off leaves
        out the dispatcher's digest (`_dispatcher`, most of the check's time)."""
        before = self.state0
        if before is None:
            return []
        now = global_state(self.torch, before.get("dispatcher"), dispatcher=dispatcher)
        out = [f"{k} changed from {before[k]} to {now[k]}" for k in before
               if now[k] != before[k] and k not in ("environment", "dispatcher", "allocators")]
        swapped = sorted(k for k, a in before.get("allocators", {}).items() if a and now.get("allocators", {}).get(k) != a)
        if swapped:
            out.append(f"PyTorch's {', '.join(swapped)} allocator was replaced (an allocator of the candidate's runs its "
                       "code inside every allocation of the harness and the reference)")
        self.check()
        patched = sorted(self.moved)
        if patched:
            out.append(f"the code the harness runs in the worker was changed: {', '.join(patched[:5])} (PyTorch's "
                       "classes and functions, the verifier's own, the interpreter's hooks and mode stacks may not be "
                       "patched)")
        redone = sorted(op for op, (_, h) in before.get("dispatcher", {}).items()
                        if now.get("dispatcher", {}).get(op, (None, None))[1] != h) if dispatcher else []
        if redone:
            out.append(f"kernels registered with PyTorch's dispatcher for {', '.join(redone[:5])} (a registration "
                       "changes what that op does for every caller in the process, the harness and the reference "
                       "included)")
        if now.get("environment") != before.get("environment"):
            changed = sorted({line.split("=", 1)[0] for line in set(now["environment"]) ^ set(before["environment"])})
            out.append(f"environment variables changed: {', '.join(changed[:8])} (they can change how the reference "
                       "runs; only build variables such as TORCH_CUDA_ARCH_LIST may be set)")
        return out


def global_state(torch, dispatcher_before: dict | None = None, dispatcher: bool = True) -> dict:
    """Process-wide settings a candidate could change to slow the reference or alter its numerics
    (`dispatcher_before`: an earlier reading's dispatcher digests, which spare the unchanged operators' filtering;
    `dispatcher` off: no dispatcher digest)."""
    return {"intra-op threads": torch.get_num_threads(), "inter-op threads": torch.get_num_interop_threads(),
            "default dtype": str(torch.get_default_dtype()), "grad mode": torch.is_grad_enabled(),
            "float32 matmul precision": torch.get_float32_matmul_precision(), **scheduling(),
            "environment": _environment(), "dispatcher": _dispatcher(torch, dispatcher_before) if dispatcher else {},
            "allocators": _allocators(torch)}


# environment variables a candidate may set (for its own build, before load_inline); any other change can alter
# how the reference, timed in this process, runs (MKL_CBWR, OMP_*, CUBLAS_WORKSPACE_CONFIG …)
_BUILD_ENV = {"TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "NVCC_APPEND_FLAGS",
              "NVCC_PREPEND_FLAGS", "TORCH_EXTENSIONS_DIR"}


# the dispatch keys whose kernels compute (or route to those that do) on the devices verified here
_COMPUTE_KEYS = frozenset({
    "CPU", "CUDA", "PrivateUse1", "AutogradCPU", "AutogradCUDA", "AutogradPrivateUse1", "AutogradOther", "Autograd",
    "CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional",
    "ADInplaceOrView", "BackendSelect", "AutocastCPU", "AutocastCUDA", "Undefined"})


def _dispatcher(torch, before: dict | None = None) -> dict[str, tuple[int, int]]:
    """Per operator, (a hash of its whole dump, a digest of the kernels the dispatcher holds for the compute keys; each
    line names where its kernel was registered): a candidate's `TORCH_LIBRARY_IMPL(aten, CPU, m)` replacing `detach`
    (so outputs were computed only when the harness read them) shows as a change, however its registration was
    reached. Ops added later are not compared."""
    try:
        names = torch._C._dispatch_get_all_op_names()
        dump = torch._C._dispatch_dump
    except AttributeError:  # a torch without these: the check is skipped, the binary and source rules remain
        return {}
    out = {}
    before = before or {}
    for name in names:
        raw = dump(name)
        whole = hash(raw)
        known = before.get(name)
        if known is not None and known[0] == whole:  # the same dump: the same digest, no need to filter it again
            out[name] = known
            continue
        lines = [line for line in raw.splitlines() if line.split(":", 1)[0] in _COMPUTE_KEYS]
        out[name] = (whole, hash("\n".join(lines)))
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



def watched(torch) -> tuple[list, list]:
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



def layout(args) -> list:
    """What of each input tensor the candidate could change in place without touching its values: shape, strides,
    offset and storage (pointer and size). Compared around every timed call, since the reference is timed on the same
    tensors right after (a `resize_` to a larger batch made the reference do 12 times the work)."""
    out = []
    for a in args:
        if type(a) is not type(None) and hasattr(a, "untyped_storage"):
            st = a.untyped_storage()
            out.append((tuple(a.shape), a.stride(), a.storage_offset(), st.data_ptr(), st.nbytes(), a.dtype))
    return out


def scheduling() -> dict:
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


def seal_array_exits(torch) -> None:
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
