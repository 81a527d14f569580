"""Static legality: AST rules on the candidate before anything of it runs.

The rules reject what a kernel-writing answer never needs and a reward hacker always does: PyTorch compute in the
forward path, calling the reference, swallowing kernel failures, threads and side streams, patching torch/time/builtins,
introspection of the process, and native sources that spawn threads, touch files or call back into Python. The runtime
profiler (`musacoder.legality.runtime`) backs these rules up for everything an AST cannot see.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

# Module imports a candidate may use. Everything else (sys, gc, inspect, ctypes, threading, time, …) is illegal.
ALLOWED_IMPORTS = {
    "torch", "triton", "math", "typing", "os", "functools", "itertools", "operator", "numbers", "dataclasses",
    "collections", "enum", "__future__", "warnings", "typing_extensions",
}
# Sub-packages of allowed imports that are still off limits (introspection, graph capture, fallbacks).
FORBIDDEN_MODULE_PREFIXES = (
    "torch._", "torch.profiler", "torch.autograd", "torch.library", "torch.jit", "torch.compiler", "torch.fx",
    "torch.cuda.graphs", "torch.utils.benchmark", "torch.testing", "torch.multiprocessing", "torch.distributed",
    "torch.backends", "torch.ops", "torch.export", "torch.overrides", "torch.utils._python_dispatch",
)
# Attributes of allowed modules that may never be referenced (introspection and escape hatches).
FORBIDDEN_ATTRS = {
    "torch": {"_C", "_dynamo", "_inductor", "compile", "jit", "profiler", "autograd", "library", "ops", "fx",
              "backends", "testing", "set_default_device", "use_deterministic_algorithms", "cuda.graphs",
              "load", "frombuffer", "Stream", "stream", "set_default_dtype", "initial_seed", "get_rng_state",
              "set_rng_state", "random.get_rng_state", "cuda.get_rng_state", "utils.dlpack", "_utils"},
    "os": {"system", "popen", "fork", "forkpty", "spawnl", "spawnv", "execv", "execl", "kill", "remove", "unlink",
           "rmdir", "open", "write", "read", "dup", "dup2", "pipe", "chdir", "_exit", "walk", "listdir", "scandir",
           "symlink", "rename", "replace", "makedirs", "mkdir", "getpid", "getppid", "killpg", "setsid"},
}
# torch.* calls allowed inside the forward path: allocation and shape plumbing only.
TORCH_PLUMBING = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "arange",
    "rand", "randn", "randint", "as_strided", "broadcast_to", "flatten", "reshape", "permute", "transpose",
    "squeeze", "unsqueeze", "select", "narrow", "clone", "is_tensor", "numel", "device", "dtype", "Size",
    "no_grad", "inference_mode", "is_floating_point", "finfo", "iinfo", "result_type", "promote_types",
    "float32", "float16", "bfloat16", "float64", "int32", "int64", "int8", "uint8", "bool", "Tensor",
    "contiguous_format", "channels_last", "strided",
}
TORCH_SUBMODULE_PLUMBING = {
    ("cuda",): {"current_device", "synchronize", "is_available", "device_count", "current_stream", "get_device_name",
                "get_device_capability", "device", "set_device"},
    ("utils", "cpp_extension"): {"load_inline"},
}
# Tensor methods allowed in the forward path (views, allocation, metadata, casts, copies).
TENSOR_PLUMBING = {
    "size", "stride", "shape", "dim", "ndim", "numel", "nelement", "element_size", "item", "data_ptr", "storage_offset",
    "view", "view_as", "reshape", "reshape_as", "permute", "transpose", "t", "T", "mT", "squeeze", "unsqueeze",
    "expand", "expand_as", "flatten", "unflatten", "contiguous", "is_contiguous", "clone", "copy_", "detach",
    "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided", "zero_", "fill_", "to", "type", "float",
    "half", "bfloat16", "double", "int", "long", "bool", "cuda", "cpu", "is_cuda", "device", "dtype", "get_device",
    "select", "narrow", "as_strided", "split", "chunk", "unbind", "movedim", "requires_grad_", "is_floating_point",
    "type_as", "broadcast_to", "storage", "untyped_storage", "data", "weight", "bias",
}
# Python builtins allowed as calls in the forward path.
BUILTIN_CALLS = {
    "len", "range", "int", "float", "bool", "min", "max", "tuple", "list", "dict", "isinstance", "enumerate", "zip",
    "abs", "divmod", "round", "str", "super", "print", "sorted", "reversed", "all", "any", "type", "map", "slice",
    "ValueError", "RuntimeError", "TypeError", "AssertionError", "NotImplementedError", "pow", "hash", "id", "set",
}
FORBIDDEN_BUILTINS = {
    "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "setattr", "delattr", "getattr", "open",
    "input", "breakpoint", "memoryview", "__builtins__", "__loader__", "__spec__",
}
ALLOWED_DUNDERS = {"__init__", "__name__", "__future__", "__all__", "__doc__"}
THREAD_STREAM_NAMES = {
    "Thread", "Timer", "ThreadPoolExecutor", "ProcessPoolExecutor", "Process", "Stream", "stream", "set_stream",
    "ExternalStream", "record_stream", "CUDAGraph", "graph", "make_graphed_callables", "Event",
}
VENDOR_PATTERNS = re.compile(r"\b(cublas\w*|cublasLt\w*|cudnn\w*|cusparse\w*|cufft\w*|cusolver\w*|hipblas\w*|miopen\w*|"
                             r"cblas_\w+|mkl_\w+|mkl\.h|dnnl\w*|openblas\w*|lapack\w*)\b", re.I)
# CUDA helpers a kernel wrapper legitimately takes from the at::cuda namespace; the rest of it (at::cuda::mm …) are
# ATen ops that bypass the dispatcher and so the profiler.
_AT_CUDA_OK = ("getCurrentCUDAStream|getDefaultCUDAStream|getStreamFromExternal|CUDAGuard|OptionalCUDAGuard|"
               "getCurrentDeviceProperties|getDeviceProperties|current_device|device_count|CUDAStream|warp_size|"
               "OptionalCUDAStreamGuard|getCurrentCUDASparseHandle_DISALLOWED")
# Tokens that have no place in a kernel's native source: threads, processes, files, sockets, dynamic loading, calling
# back into Python, side streams/graphs, and profiler introspection.
NATIVE_FORBIDDEN = [
    (re.compile(r"std::thread|pthread_\w+|std::async|std::jthread|#\s*include\s*<thread>|#\s*include\s*<future>"), "spawns threads"),
    (re.compile(r"\bfork\s*\(|\bvfork\s*\(|\bsystem\s*\(|\bpopen\s*\(|\bexecv\w*\s*\(|\bexecl\w*\s*\(|posix_spawn"), "spawns processes"),
    (re.compile(r"\bfopen\s*\(|std::[io]?fstream|\bopen\s*\(\s*\"|#\s*include\s*<fstream>|\bunlink\s*\(|\bremove\s*\(\s*\""), "touches files"),
    (re.compile(r"\bsocket\s*\(|\bconnect\s*\(|#\s*include\s*<sys/socket\.h>|\bsyscall\s*\(|\bptrace\b|\bmmap\s*\(|/proc/"), "uses sockets, syscalls or /proc"),
    (re.compile(r"\bdlopen\b|\bdlsym\b|LoadLibrary|\bsetenv\s*\(|\bputenv\s*\("), "loads code or changes the environment"),
    (re.compile(r"py::module_?::import|pybind11::module_?::import|py::eval|py::exec|PyRun_\w+|PyImport_\w+|PyObject_Call\w*|py::globals|\.attr\s*\("), "calls back into Python"),
    (re.compile(r"cudaStreamCreate\w*|getStreamFromPool|setCurrentCUDAStream|cudaLaunchHostFunc|cudaStreamAddCallback|cudaGraph\w*|CUDAStreamGuard"), "uses side streams, graphs or host callbacks"),
    (re.compile(r"RecordFunction|profiler|\bkineto\b|cupti", re.I), "inspects the profiler"),
    (re.compile(r"accessPolicyWindow|PersistingL2|cudaStreamSetAttribute|cuStreamSetAttribute|cudaCtxResetPersisting|"
                r"cudaDeviceSetCacheConfig|cudaDeviceSetSharedMemConfig|cuCtxSetCacheConfig|\bnvml\w*", re.I),
     "changes device-wide cache, L2 persistence or clock settings (they outlive the call and affect the reference "
     "and the L2 flush)"),
    (re.compile(r"\bcudaMalloc\w*|\bcuMemAlloc\w*|\bcuMemCreate\b|\bcudaHostAlloc\b|\bcuMemHostAlloc\b"),
     "allocates device memory outside PyTorch's allocator (use torch::empty, so the harness can account for it)"),
    (re.compile(r"at::native::|at::cpu::|at::_ops::|at::redispatch::|at::compositeexplicitautograd\w*::|"
                r"at::compositeimplicitautograd\w*::|c10::Dispatcher|at::meta::|at::cuda::(?!(?:" + _AT_CUDA_OK + r")\b)\w+\s*\("),
     "calls ATen kernels directly, bypassing the dispatcher (compute ops must be your own)"),
    (re.compile(r"globalContext\s*\(|set_num_threads|set_num_interop_threads|omp_set_num_threads|omp_set_dynamic|"
                r"setAllowTF32|setBenchmarkCuDNN|setDeterministic|cudaDeviceSetLimit|cudaSetDevice\b|cudaDeviceReset"),
     "changes global PyTorch/OpenMP/CUDA state"),
    (re.compile(r"#\s*pragma\s+omp\s+(?:parallel\s+)?(?:task|single\s+nowait|master)\b|\bnowait\b|\.detach\s*\(\s*\)"),
     "leaves work running after returning (omp task/nowait/detached threads)"),
    (re.compile(r"\bsleep\s*\(|usleep\s*\(|nanosleep|std::chrono|clock_gettime|gettimeofday|\brdtsc\b"), "reads or manipulates time"),
]


@dataclass
class StaticReport:
    violations: list[str] = field(default_factory=list)
    kernel_defs: list[str] = field(default_factory=list)  # native kernels/functions the code defines
    kernel_calls: list[str] = field(default_factory=list)  # those the forward path calls

    @property
    def legal(self) -> bool:
        return not self.violations


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Analysis:
    """Collects module structure: import aliases, extension modules, Triton kernels, functions and ModelNew."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.aliases: dict[str, str] = {}  # local name -> dotted module/object path
        self.functions: dict[str, ast.FunctionDef] = {}
        self.triton_kernels: set[str] = set()
        self.extensions: set[str] = set()  # names bound to load_inline results
        self.load_inline_calls: list[ast.Call] = []
        self.modelnew: ast.ClassDef | None = None
        self.classes: dict[str, ast.ClassDef] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
                if any(self.resolve(d if not isinstance(d, ast.Call) else d.func) in ("triton.jit", "triton.autotune")
                       for d in node.decorator_list):
                    self.triton_kernels.add(node.name)
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
                if node.name == "ModelNew":
                    self.modelnew = node
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (self.resolve(node.func) or "").endswith("load_inline"):
                self.load_inline_calls.append(node)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value in self.load_inline_calls:
                for t in node.targets:
                    d = _dotted(t)
                    if d:
                        self.extensions.add(d)
        # names bound to extension modules through a helper returning load_inline(...)
        for name, fn in self.functions.items():
            if any(isinstance(n, ast.Return) and isinstance(n.value, ast.Call) and n.value in self.load_inline_calls
                   for n in ast.walk(fn)):
                for node in ast.walk(tree):
                    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _dotted(node.value.func) == name:
                        for t in node.targets:
                            d = _dotted(t)
                            if d:
                                self.extensions.add(d)

    def resolve(self, node: ast.AST) -> str | None:
        """Dotted path with the first component resolved through import aliases (`F.relu` → torch.nn.functional.relu)."""
        d = _dotted(node)
        if d is None:
            return None
        head, _, rest = d.partition(".")
        if head in self.aliases:
            base = self.aliases[head]
            return f"{base}.{rest}" if rest else base
        return d


def _string_constants(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _native_sources(tree: ast.AST) -> str:
    """Every string literal that looks like C/C++/CUDA (the sources passed to load_inline)."""
    return "\n".join(s for s in _string_constants(tree)
                     if re.search(r"#\s*include|__global__|torch::|at::|\bvoid\b|\{", s))


def _forward_path(an: _Analysis) -> list[ast.AST]:
    """ModelNew.forward and every method/module function reachable from it by name."""
    assert an.modelnew is not None
    methods = {n.name: n for n in an.modelnew.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    seen: dict[str, ast.AST] = {}
    todo = [("ModelNew.forward", methods.get("forward"))]
    while todo:
        name, fn = todo.pop()
        if fn is None or name in seen:
            continue
        seen[name] = fn
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                d = _dotted(node.func)
                if d and d.startswith("self.") and d.count(".") == 1 and d[5:] in methods:
                    todo.append((f"ModelNew.{d[5:]}", methods[d[5:]]))
                elif d in an.functions and d not in an.triton_kernels:
                    todo.append((d, an.functions[d]))
            elif isinstance(node, ast.Name) and node.id in an.functions and node.id not in an.triton_kernels:
                todo.append((node.id, an.functions[node.id]))
    return list(seen.values())


_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)")
_KERNEL_NAME = re.compile(r"__global__\s+(?:[\w:]+\s+|\*\s*)*?(\w+)\s*\(")


def kernel_names(native: str) -> list[str]:
    """Names of the `__global__` functions in CUDA source, wherever `__launch_bounds__` and qualifiers stand."""
    return _KERNEL_NAME.findall(_LAUNCH_BOUNDS.sub(" ", native))


def check_static(code: str, backend: str, allow_vendor_libs: bool = False) -> StaticReport:
    """Apply every static rule; returns violations (human-readable, each naming the line) and the kernels found."""
    rep = StaticReport()
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        rep.violations.append(f"syntax error at line {e.lineno}: {e.msg}")
        return rep
    an = _Analysis(tree)
    v = rep.violations

    if an.modelnew is None:
        v.append("no class ModelNew defined")
        return rep
    for base in an.modelnew.bases:
        b = an.resolve(base) or ""
        if b not in ("torch.nn.Module", "torch.nn.modules.module.Module", "nn.Module", "Module"):
            v.append(f"line {base.lineno}: ModelNew must subclass torch.nn.Module directly, not {ast.unparse(base)}")

    # Imports.
    for node in ast.walk(tree):
        mods = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            if node.level:
                v.append(f"line {node.lineno}: relative imports are not allowed")
        for m in mods:
            root = m.split(".")[0]
            if root not in ALLOWED_IMPORTS:
                v.append(f"line {node.lineno}: import of {m!r} is not allowed (allowed: {', '.join(sorted(ALLOWED_IMPORTS))})")
            elif m.startswith(FORBIDDEN_MODULE_PREFIXES) or any(m == p.rstrip(".") for p in FORBIDDEN_MODULE_PREFIXES):
                v.append(f"line {node.lineno}: import of {m!r} is not allowed (introspection/fallback module)")

    # Whole-file rules: introspection, patching, escape hatches, threads/streams.
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_BUILTINS:
            v.append(f"line {node.lineno}: use of {node.id!r} is not allowed")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ALLOWED_DUNDERS:
                v.append(f"line {node.lineno}: dunder attribute access {node.attr!r} is not allowed")
            r = an.resolve(node) or ""
            head = r.split(".")[0]
            if head in FORBIDDEN_ATTRS:
                rest = r[len(head) + 1:]
                for bad in FORBIDDEN_ATTRS[head]:
                    if rest == bad or rest.startswith(bad + "."):
                        v.append(f"line {node.lineno}: {r} is not allowed in a candidate")
                        break
            last = r.rsplit(".", 1)[-1]
            if head == "torch" and (last.startswith("set_") and last != "set_device" or "memory" in r.split(".")[1:-1]
                                    or last.startswith("reset_")
                                    or last in ("empty_cache", "caching_allocator_alloc", "manual_seed_all")):
                v.append(f"line {node.lineno}: {r} changes global PyTorch state (threads, precision, memory); not allowed")
            if node.attr in THREAD_STREAM_NAMES and head in ("torch", "threading", "concurrent", "multiprocessing"):
                v.append(f"line {node.lineno}: threads, streams, events and graphs ({r}) are not allowed")
            if node.attr in ("record_stream", "CUDAGraph", "make_graphed_callables"):
                v.append(f"line {node.lineno}: {node.attr} is not allowed")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Attribute):
                        root = sub
                        while isinstance(root, ast.Attribute):
                            root = root.value
                        if isinstance(root, ast.Name) and root.id in an.aliases and root.id != "self":
                            v.append(f"line {node.lineno}: assigning to {ast.unparse(sub)} patches an imported "
                                     "module (monkey-patching is not allowed)")
                            break
                    if isinstance(sub, ast.Name) and sub.id in an.aliases and isinstance(node, ast.Assign) \
                            and node.lineno > 0 and sub is t:
                        v.append(f"line {node.lineno}: rebinding imported name {sub.id!r} is not allowed")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("__") \
                and node.name.endswith("__") and node.name != "__init__":
            v.append(f"line {node.lineno}: defining {node.name} is not allowed (dispatch and operator overrides "
                     "can fake results)")
        elif isinstance(node, ast.ClassDef) and node is not an.modelnew:
            for base in node.bases:
                if (an.resolve(base) or "").split(".")[-1] in ("Tensor",):
                    v.append(f"line {node.lineno}: subclassing torch.Tensor is not allowed (outputs must be plain tensors)")
        elif isinstance(node, ast.Try):
            for h in node.handlers:
                broad = h.type is None or (an.resolve(h.type) or "") in ("Exception", "BaseException", "RuntimeError")
                if isinstance(h.type, ast.Tuple):
                    broad = any((an.resolve(e) or "") in ("Exception", "BaseException", "RuntimeError") for e in h.type.elts)
                if broad:
                    v.append(f"line {h.lineno}: broad try/except ({ast.unparse(h.type) if h.type else 'bare except'}) "
                             "can hide a failing kernel behind a fallback; let errors propagate")
        # references to the reference model
        if isinstance(node, ast.Name) and node.id == "Model" and not isinstance(node.ctx, ast.Store):
            v.append(f"line {node.lineno}: ModelNew may not use the reference Model")

    # Forward path rules.
    fwd = _forward_path(an)
    if not fwd:
        v.append("ModelNew has no forward method")
    init = next((n for n in an.modelnew.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    nn_submodules = set()
    if init is not None:
        for node in ast.walk(init):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                callee = an.resolve(node.value.func) or ""
                if callee.startswith("torch.nn.") or callee in an.classes:
                    for t in node.targets:
                        d = _dotted(t)
                        if d and d.startswith("self."):
                            nn_submodules.add(d)
    ext_bound = set(an.extensions)
    for fn in fwd:
        for node in ast.walk(fn):
            if isinstance(node, ast.Try):
                v.append(f"line {node.lineno}: try/except in the forward path is not allowed")
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                v.append(f"line {node.lineno}: the @ operator runs a PyTorch matmul; write a kernel")
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            d = _dotted(f)
            r = an.resolve(f) or ""
            if isinstance(f, ast.Subscript):  # triton launch kernel[grid](...)
                k = _dotted(f.value)
                if k in an.triton_kernels:
                    rep.kernel_calls.append(k)
                continue
            if d is None:
                continue
            if d in nn_submodules:
                v.append(f"line {node.lineno}: calling submodule {d} runs PyTorch's implementation; read its "
                         "parameters and pass them to your kernel instead")
                continue
            base = d.rsplit(".", 1)[0] if "." in d else None
            if base and base in ext_bound:
                rep.kernel_calls.append(d)
                continue
            if r.startswith("torch.nn.functional") or r.startswith("torch.special") or r.startswith("torch.linalg") \
                    or r.startswith("torch.fft"):
                v.append(f"line {node.lineno}: {r} is a PyTorch compute op; forward must use your own kernels")
                continue
            if r.startswith("torch."):
                parts = tuple(r.split(".")[1:])
                allowed = len(parts) == 1 and parts[0] in TORCH_PLUMBING
                for prefix, names in TORCH_SUBMODULE_PLUMBING.items():
                    if parts[:len(prefix)] == prefix and len(parts) == len(prefix) + 1 and parts[-1] in names:
                        allowed = True
                if parts and parts[0] == "nn" and not r.startswith("torch.nn.functional"):
                    allowed = parts[-1] in ("Parameter",)
                if not allowed:
                    v.append(f"line {node.lineno}: {r}(...) is a PyTorch op outside the plumbing whitelist")
                continue
            if r.startswith("triton.") or r.startswith("math."):
                continue
            if "." not in d:
                if d in BUILTIN_CALLS or d in an.functions or d in an.classes:
                    continue
                if d in an.aliases:
                    continue
                continue  # local callables (e.g. a variable holding an extension function) are checked at runtime
            method = d.rsplit(".", 1)[1]
            if d.startswith("self.") and d.count(".") == 1:
                continue  # a ModelNew method (already on the path) or an attribute holding a kernel function
            if method not in TENSOR_PLUMBING and method not in ("append", "extend", "get", "items", "keys", "values",
                                                                "format", "join", "split"):
                v.append(f"line {node.lineno}: .{method}() in the forward path is not in the plumbing whitelist; "
                         "compute must happen in your kernels")

    # Native kernels for the backend.
    native = _native_sources(tree)
    if backend in ("cpu", "cuda"):
        if not an.load_inline_calls:
            v.append(f"backend {backend}: no torch.utils.cpp_extension.load_inline(...) call builds a native kernel")
        for call in an.load_inline_calls:
            kws = {k.arg for k in call.keywords}
            if backend == "cpu" and "cuda_sources" in kws:
                v.append(f"line {call.lineno}: the cpu backend builds C++ only (cpp_sources); cuda_sources given")
            if backend == "cuda" and "cuda_sources" not in kws:
                v.append(f"line {call.lineno}: the cuda backend needs cuda_sources in load_inline")
            for kw in call.keywords:
                if kw.arg == "extra_ldflags" and VENDOR_PATTERNS.search(ast.unparse(kw.value)) and not allow_vendor_libs:
                    v.append(f"line {call.lineno}: linking vendor libraries ({ast.unparse(kw.value)}) is not allowed "
                             "under the strict policy")
        if backend == "cuda":
            rep.kernel_defs = kernel_names(native)
            if not rep.kernel_defs:
                v.append("backend cuda: no __global__ kernel is defined in the CUDA sources")
        else:
            rep.kernel_defs = sorted(an.extensions)
    elif backend == "triton":
        rep.kernel_defs = sorted(an.triton_kernels)
        if not an.triton_kernels:
            v.append("backend triton: no @triton.jit kernel is defined")
    if not rep.kernel_calls and fwd:
        v.append(f"ModelNew.forward never calls a native kernel ({'a @triton.jit kernel launched as kernel[grid](...)' if backend == 'triton' else 'a function of the load_inline extension'}); a kernel defined but not called is a decoy")
    for pattern, what in NATIVE_FORBIDDEN:
        m = pattern.search(native)
        if m:
            v.append(f"native source {what} ({m.group(0)!r}); kernels may not")
    if not allow_vendor_libs:
        m = VENDOR_PATTERNS.search(native)
        if m:
            v.append(f"native source uses a vendor library ({m.group(0)}); forbidden under the strict policy")
    # De-duplicate, keep order.
    rep.violations = list(dict.fromkeys(v))
    rep.kernel_calls = list(dict.fromkeys(rep.kernel_calls))
    return rep
