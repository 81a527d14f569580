"""The Triton launch hook: every launch of a candidate's Triton kernel counted, named for the profiler, checked.

`install` wraps `JITFunction.run` (and the interpreter's `InterpretedFunction.run`, the triton backend on a CPU): each
launch is counted in the worker's `triton_launches` (a timed round that launched nothing of the candidate's is
illegal), runs inside a `musacoder::triton::<name>` profiler range while a call is profiled, and is refused when a
tensor is passed as a `tl.constexpr`. It also wraps `CompiledKernel.__init__`, so every kernel Triton compiles,
however it is launched, has its PTX read for clock reads (`read_compiled_kernel`). The hooks themselves are watched by
the harness guard (`musacoder.judge.worker.guard.watched`).
"""

from __future__ import annotations

import functools


def install(worker) -> None:
    """Hook Triton's launches and compiles in this process for `worker` (nothing where Triton is absent)."""
    try:
        import triton  # noqa: F401
        from triton.runtime import jit as tjit
    except Exception:  # noqa: BLE001 - triton absent: nothing to hook
        return
    classes = [tjit.JITFunction]
    try:
        from triton.runtime import interpreter

        if hasattr(interpreter, "InterpretedFunction"):
            classes.append(interpreter.InterpretedFunction)
    except Exception:  # noqa: BLE001
        pass
    for cls in classes:
        cls.run = _counted_run(worker, cls.run)
    try:  # every compiled kernel, however it was compiled or launched, has its PTX read
        from triton.compiler.compiler import CompiledKernel
    except Exception:  # noqa: BLE001 - a Triton without it: launches through JITFunction.run still count
        return
    init = CompiledKernel.__init__

    def read_after_init(self_, *args, _init=init, **kw):
        _init(self_, *args, **kw)
        read_compiled_kernel(worker, getattr(self_, "name", "triton_kernel"), self_)

    CompiledKernel.__init__ = read_after_init


def _counted_run(worker, orig):
    """`orig` (a `run` method of Triton's) counting each launch, refusing tensor constexprs, named for the profiler."""
    torch = worker.torch
    counts = worker.triton_launches

    def run(self_, *args, _orig=orig, **kw):
        if kw.get("warmup"):  # `kernel.warmup(...)` compiles without launching: not a call of the kernel
            return _orig(self_, *args, **kw)
        fn = getattr(self_, "fn", None)
        name = getattr(fn, "__name__", None) or getattr(self_, "__name__", "triton_kernel")
        counts[name] = counts.get(name, 0) + 1
        refuse_tensor_constexprs(torch, fn, name, args, kw)
        if not worker.record.profiling:
            return _orig(self_, *args, **kw)
        with torch.profiler.record_function(f"musacoder::triton::{name}"):
            return _orig(self_, *args, **kw)

    return run


def read_compiled_kernel(worker, name: str, kernel) -> None:
    """Note a compiled Triton kernel that reads a GPU clock (`musacoder.legality.machine_code`), once per compiled
    kernel (called as Triton makes each `CompiledKernel`); reported with every call and timing request
    (`worker.device_clocks`)."""
    key = getattr(kernel, "hash", None)
    if key is None or key in worker.kernels_read:
        return
    worker.kernels_read.add(key)
    from musacoder.legality.machine_code import ptx_clock_reads

    try:
        asm = getattr(kernel, "asm", None)
        ptx = asm.get("ptx") if isinstance(asm, dict) else None
        regs = sorted({reg for _, reg in ptx_clock_reads(ptx)}) if isinstance(ptx, str) else []
    except Exception:  # noqa: BLE001 - a kernel object of another Triton: nothing read, nothing held against it
        regs = []
    if regs:
        worker.device_clocks.add(f"the Triton kernel {name} reads the GPU's clock ({', '.join(regs)}): a kernel that "
                                 "times itself can tell the rounds the profiler watches from the timed ones")


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


def refuse_tensor_constexprs(torch, fn, name: str, args, kw) -> None:
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
