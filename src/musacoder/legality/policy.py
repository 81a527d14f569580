"""What a candidate may and may not use: the tables behind the static legality rules (`musacoder.legality.static`).

Python-side tables list the imports, torch functions, tensor methods and builtins a candidate may use; the native-side
patterns list what a kernel's C++/CUDA source may never contain.
"""

import re

# Module imports a candidate may use. Everything else (sys, gc, inspect, ctypes, threading, time, …) is illegal.
ALLOWED_IMPORTS = {
    "torch", "triton", "math", "typing", "os", "functools", "itertools", "operator", "numbers", "dataclasses",
    "collections", "enum", "__future__", "warnings", "typing_extensions", "torch_musa", "numpy",
}
# What a candidate may use of NumPy: `prod`, to multiply a tensor's sizes (the static rules refuse it on anything
# else in the forward path).
NUMPY_ALLOWED = {"prod"}
# Sub-packages of allowed imports that are still off limits (introspection, graph capture, fallbacks).
FORBIDDEN_MODULE_PREFIXES = (
    "torch._", "torch.profiler", "torch.autograd", "torch.library", "torch.jit", "torch.compiler", "torch.fx",
    "torch.cuda.graphs", "torch.utils.benchmark", "torch.testing", "torch.multiprocessing", "torch.distributed",
    "torch.backends", "torch.ops", "torch.export", "torch.overrides", "torch.utils._python_dispatch",
    # torch_musa (the musa backend) may only be imported to register the device and for its extension builder
    "torch_musa._", "torch_musa.core", "torch_musa.profiler", "torch_musa.distributed", "torch_musa.musa_graph",
    "torch_musa.utils.compare_tool", "torch_musa.utils.ext_loader", "torch.musa.graphs",
    # Triton's compiler called directly (its kernels then launch past the worker's launch hook), its benchmarking
    # timers, its profiler and its process-wide settings (launch hooks among them)
    "triton.compiler", "triton.testing", "triton.profiler", "triton.knobs",
    # code loaded from elsewhere, worker processes, exporters that run the model through PyTorch
    "torch.hub", "torch.package", "torch.utils.data", "torch.utils.model_zoo", "torch.onnx", "torch.utils.collect_env",
    "torch.utils.bottleneck", "torch.utils.tensorboard", "torch.utils.show_pickle", "torch.serialization",
)
# Attributes of allowed modules that may never be referenced (introspection and escape hatches).
FORBIDDEN_ATTRS = {
    "torch": {"_C", "_dynamo", "_inductor", "compile", "jit", "profiler", "autograd", "library", "ops", "fx",
              "backends", "testing", "set_default_device", "use_deterministic_algorithms", "cuda.graphs",
              "load", "frombuffer", "Stream", "stream", "set_default_dtype", "initial_seed", "get_rng_state",
              "set_rng_state", "random.get_rng_state", "cuda.get_rng_state", "utils.dlpack", "_utils"},
    "os": {"system", "popen", "fork", "forkpty", "spawnl", "spawnv", "execv", "execl", "kill", "remove", "unlink",
           "rmdir", "open", "write", "read", "dup", "dup2", "pipe", "chdir", "_exit", "walk", "listdir", "scandir",
           "symlink", "rename", "replace", "mkdir", "getpid", "getppid", "killpg", "setsid"},
}
FORBIDDEN_ATTRS.update({
    "triton": {"compile", "compiler", "testing", "profiler", "knobs"},
})
# What a candidate may use of `typing` and `typing_extensions` (allow-lists): names for annotations. Their other
# functions evaluate strings (`get_type_hints`, `ForwardRef`, `evaluate_forward_ref`, `get_args` of a `List["…"]`):
# `eval` under other names, which reach anything by a string no name rule reads.
TYPING_ALLOWED = {
    "Any", "AnyStr", "Callable", "ClassVar", "Dict", "DefaultDict", "Deque", "Final", "FrozenSet", "Generic",
    "Iterable", "Iterator", "List", "Literal", "Mapping", "MutableMapping", "MutableSequence", "NamedTuple",
    "NoReturn", "Optional", "Protocol", "Sequence", "Set", "Tuple", "Type", "TypeVar", "TypedDict", "Union",
    "TYPE_CHECKING", "cast", "overload", "final", "override", "Self", "Never", "TypeAlias", "Annotated", "Hashable",
    "Sized", "Collection", "Container", "Generator", "ParamSpec", "Concatenate", "Required", "NotRequired",
}
# What a candidate may use of `operator` (an allow-list): its arithmetic functions are PyTorch compute on tensors
# passed around as values (`functools.reduce(operator.matmul, [a, b])`), which no operator rule sees, and
# `attrgetter`/`methodcaller` are getattr by a string.
OPERATOR_ALLOWED = {"index", "itemgetter", "length_hint", "is_", "is_not", "truth", "not_", "contains", "getitem"}
# What a candidate may use of `os` (an allow-list: the rest starts processes, touches files or changes scheduling).
OS_ALLOWED = {"environ", "path", "getenv", "cpu_count", "sep", "pathsep", "linesep", "name", "fspath", "PathLike",
              "devnull", "curdir", "pardir", "extsep", "getcwd", "makedirs"}
# What a candidate may use of `warnings`: its `warn` (catching warnings reads back the caller's stack: which file
# called forward, the timer's or the profiler's).
WARNINGS_ALLOWED = {"warn"}
# What a candidate may use of `torch.utils.cpp_extension`: its builders, which the verifier hooks (`load` builds
# source files the candidate wrote from string literals of its own file, see `legality.static`).
CPP_EXTENSION_ALLOWED = {"load_inline", "load", "include_paths", "CUDA_HOME"}
# File names a candidate may write (its native sources, for `cpp_extension.load`).
NATIVE_SOURCE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".mu", ".muh")
# Modules that allowed ones import and so expose as attributes (`torch.sys`, `os.sys`, `typing.sys`,
# `torch.utils.cpp_extension.subprocess` …): an attribute by one of these names is rejected on any receiver, since
# an alias of an allowed module (`t = torch; t.sys`) hides the receiver from the analysis.
ESCAPE_MODULE_NAMES = {
    "sys", "builtins", "importlib", "ctypes", "inspect", "gc", "subprocess", "threading", "_thread", "multiprocessing",
    "socket", "pickle", "marshal", "code", "codeop", "runpy", "pdb", "signal", "shutil", "tempfile", "mmap",
    "resource", "posix", "traceback", "weakref", "linecache", "tokenize", "dis", "site", "sysconfig", "atexit",
    "faulthandler", "tracemalloc", "pty", "fcntl", "asyncio", "concurrent", "sched", "urllib", "http", "ssl",
    "pathlib", "glob", "zipimport", "pkgutil", "importlib_metadata", "ctypes_util", "cffi", "scipy",
}
# Attributes that lead from generators, coroutines, tracebacks and functions to interpreter frames and code objects
# (and from a frame to its caller's, the harness's): rejected on any receiver.
FRAME_ATTRS = {"gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code",
               "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "tb_frame", "tb_next", "co_consts",
               "co_code", "func_globals"}
# Ways out of torch into NumPy or Python lists, where any computation is invisible to the profiler and is not the
# candidate's kernel: rejected on any receiver, anywhere in the file.
ARRAY_EXITS = {"numpy", "from_numpy", "tolist", "as_array", "ctypeslib", "frombuffer", "asarray"}
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
    ("musa",): {"current_device", "synchronize", "is_available", "device_count", "current_stream", "get_device_name",
                "get_device_capability", "device", "set_device"},
    ("utils", "cpp_extension"): {"load_inline", "load"},
}
# Tensor methods allowed in the forward path (views, allocation, metadata, casts, copies).
TENSOR_PLUMBING = {
    "size", "stride", "shape", "dim", "ndim", "numel", "nelement", "element_size", "item", "data_ptr", "storage_offset",
    "view", "view_as", "reshape", "reshape_as", "permute", "transpose", "t", "T", "mT", "squeeze", "unsqueeze",
    "expand", "expand_as", "flatten", "unflatten", "contiguous", "is_contiguous", "clone", "copy_", "detach",
    "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided", "zero_", "fill_", "to", "type", "float",
    "half", "bfloat16", "double", "int", "long", "bool", "cuda", "musa", "cpu", "is_cuda", "device", "dtype", "get_device",
    "select", "narrow", "as_strided", "split", "chunk", "unbind", "movedim", "requires_grad_", "is_floating_point",
    "type_as", "broadcast_to", "data", "weight", "bias",
}
# A GPU clock named anywhere in the candidate: PTX's clock registers (Triton's `tl.inline_asm_elementwise` strings,
# CUDA's inline `asm`), SASS's special registers, and Triton's `tl.extra.cuda.globaltimer` (an attribute by this name
# on any receiver). The compiled code is read for the same registers (`musacoder.legality.machine_code`).
DEVICE_CLOCK = re.compile(r"%(?:clock64|clock_hi|clock|globaltimer\w*)\b|\bSR_(?:CLOCK|GLOBALTIMER)\w*|globaltimer")
DEVICE_CLOCK_ATTRS = {"globaltimer"}
# Loading GPU code from bytes at run time (Triton's driver utilities): kernels no source or machine-code rule reads.
CODE_LOADING_ATTRS = {"load_binary", "launcher_cls"}
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
# `(?:\b|_)`: a prefixed spelling (`scipy_cblas_sgemm64_`, NumPy's `libscipy_openblas64_`) is the same library
VENDOR_PATTERNS = re.compile(r"(?:\b|_)(cublas\w*|cublasLt\w*|cudnn\w*|cusparse\w*|cufft\w*|cusolver\w*|hipblas\w*|miopen\w*|"
                             r"mublas\w*|mudnn\w*|musparse\w*|mufft\w*|musolver\w*|"
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
    (re.compile(r"\bdlopen\b|\bdlsym\b|\bdladdr\w*|LoadLibrary|\bsetenv\s*\(|\bputenv\s*\(|#\s*include\s*<(?:link|elf|dlfcn)\.h>|"
                r"\bElfW\b|\bElf(?:32|64)_\w+|\blink_map\b|\b_r_debug\b|dl_iterate_phdr|"
                r"\bcu(?:da)?GetProcAddress\w*|\bcudaGetDriverEntryPoint\w*|\bcuModuleLoad\w*|\bcu(?:da)?LibraryLoad\w*|"
                r"\bcuLink(?:Create|AddData|AddFile)\w*"),
     "loads code, looks up symbols by name or changes the environment"),
    # the Python C-API and pybind11's object API: a kernel has no use for the interpreter (PYBIND11_MODULE, m.def,
    # py::arg and py::call_guard stay allowed); through it native code reached the worker's clock and profiler state
    (re.compile(r"py::module_?::import|pybind11::module_?::import|py::eval|py::exec|PyRun_\w+|PyImport_\w+|PyObject_Call\w*|py::globals|\.attr\s*\(|"
                r"(?:py|pybind11)::(?:getattr|hasattr|setattr|delattr|globals|builtins|reinterpret_borrow|reinterpret_steal|"
                r"handle|object|function|dict|list|tuple|str|bytes|capsule|cast|cpp_function|none|type|iterable|"
                r"iterator|sequence|isinstance|print|detail|module_?)\b|"
                r"PyObject_(?:Get|Set)Attr\w*|PyEval_GetBuiltins|PyDict_GetItem\w*|PyObject_Vectorcall\w*|"
                r"\bPy[A-Z][A-Za-z]*_[A-Za-z]\w*|\b_Py[A-Z]\w*|\bPy_[A-Z]\w*|\bPyObject\b|#\s*include\s*[<\"]Python\.h|"
                r"\btp_(?:call|dict|getattro|setattro|getattr|setattr|methods|base|mro|new|init|dealloc|as_\w+)\b"),
     "calls back into Python"),
    # token pasting and namespace aliases of pybind11 make names the rules above cannot read (`J(PyObject_, SetAttr…)`)
    # ... and so do asm labels and weakref/alias attributes, which give a declaration another symbol's name
    # (`int f() __asm__("op" "en");`)
    (re.compile(r"##|%:%:|\bnamespace\s+\w+\s*=\s*(?:::)?(?:pybind11|py|torch|at|c10)\b|"
                r"\)\s*(?:__asm__|__asm|asm)\s*\(\s*\"[A-Za-z_$][\w$.@]*\"(?:\s*\"[\w$.@]*\")*\s*\)\s*[;,={]|"
                r"\b(?:weakref|alias|symver)\s*\(\s*\""),
     "builds names by token pasting (##), asm labels or weakref/alias attributes, or aliases a PyTorch or pybind11 "
     "namespace; write names out"),
    (re.compile(r"cudaStreamCreate\w*|getStreamFromPool|setCurrentCUDAStream|cudaLaunchHostFunc|cudaStreamAddCallback|cudaGraph\w*|CUDAStreamGuard|"
                r"\bcu(?:da)?Event\w*|\bCUDAEvent\b|\bc10::Event\b|\belapsed_?[Tt]ime\b|getDeviceGuardImpl|"
                r"VirtualGuardImpl|DeviceGuardImplInterface|device_guard_impl_registry|DeviceGuardImplRegistrar"),
     "uses side streams, events (a timer between two points of a stream), graphs or host callbacks"),
    (re.compile(r"Record_?Function|profiler|\bkineto\b|cupti|hasCallbacks|hasGlobalCallbacks|hasThreadLocalCallbacks|"
                r"ThreadLocalDebugInfo|DebugInfoKind|ThreadLocalState|StepCallbacks|RecordScope|CallbackHandle|"
                # the heap's own statistics: the profiler's event records grow it, so they tell a profiled call
                r"\bmallinfo2?\b|\bmalloc_(?:stats|info|usable_size|trim)\b|\bsbrk\b|\bmallopt\b", re.I),
     "inspects the profiler"),
    (re.compile(r"accessPolicyWindow|PersistingL2|cudaStreamSetAttribute|cuStreamSetAttribute|cudaCtxResetPersisting|"
                r"cudaDeviceSetCacheConfig|cudaDeviceSetSharedMemConfig|cuCtxSetCacheConfig|\bnvml\w*", re.I),
     "changes device-wide cache, L2 persistence or clock settings (they outlive the call and affect the reference "
     "and the L2 flush)"),
    (re.compile(r"\bcudaMalloc\w*|\bcuMemAlloc\w*|\bcuMemCreate\b|\bcudaHostAlloc\b|\bcuMemHostAlloc\b"),
     "allocates device memory outside PyTorch's allocator (use torch::empty, so the harness can account for it)"),
    (re.compile(r"at::native::|at::cpu::|at::_ops::|at::redispatch::|at::compositeexplicitautograd\w*::|"
                r"at::compositeimplicitautograd\w*::|c10::Dispatcher|at::meta::|at::cuda::(?!(?:" + _AT_CUDA_OK + r")\b)\w+\s*\("),
     "calls ATen kernels directly, bypassing the dispatcher (compute ops must be your own)"),
    (re.compile(r"sched_setaffinity|pthread_setaffinity_np|sched_setscheduler|sched_setparam|pthread_setschedparam|"
                r"\bsetpriority\s*\(|\bnice\s*\(|\bsetrlimit\s*\("),
     "changes the scheduling of the process the reference is timed in (CPU affinity, priority)"),
    (re.compile(r"globalContext\s*\(|set_num_threads|set_num_interop_threads|omp_set_num_threads|omp_set_dynamic|"
                r"setAllowTF32|setBenchmarkCuDNN|setDeterministic|cudaDeviceSetLimit|cudaSetDevice\b|cudaDeviceReset|"
                r"\bSet\w*Allocator\b|\bset_\w*allocator\b|CUDACachingAllocator::allocator\b|REGISTER_ALLOCATOR|"
                r"\b[Ss]et\w*Hooks?\b|\bRegister\w*Hooks?\b|REGISTER_\w*HOOKS|set_warning_handler|"
                r"SetStorageImplCreate|C10_REGISTER_\w+"),
     "changes global PyTorch/OpenMP/CUDA state (threads, settings, allocators, hooks and handlers)"),
    (re.compile(r"#\s*pragma\s+omp\s+(?:parallel\s+)?(?:task|single\s+nowait|master)\b|\bnowait\b|\.detach\s*\(\s*\)|"
                r"\bGOMP_\w+|\b__kmpc_\w+|omp_fulfill_event|#\s*pragma\s+omp\s+(?:target|teams)\b"),
     "leaves work running after returning (omp task/nowait/target, detached threads, OpenMP's runtime called "
     "directly)"),
    (re.compile(r"\bsleep\s*\(|usleep\s*\(|nanosleep|\bchrono\b|_clock\s*::\s*now\b|clock_gettime|gettimeofday|rdtsc|rdpmc|readcyclecounter|"
                r"\bclock\s*\(|\btime\s*\(|getrusage|\btimes\s*\(|omp_get_wtime|omp_get_wtick|timespec_get|\bftime\b|"
                r"clock_getres|timer_create|ApproximateClock|\bgetApproximateTime\b|\bc10::getTime\b|"
                # the GPU's clock64() and ARM's counters (PTX's clock registers, named in any string: DEVICE_CLOCK)
                r"\bclock64\s*\(|\bcnt[vp]ct|__builtin_arm_rsr"),
     "reads or manipulates time (a kernel that times itself can tell a watched call from a timed one)"),
    (re.compile(r"\benviron\b|__environ"), "changes the environment"),
    (re.compile(r"\bmallopt\b|malloc_trim|__malloc_hook|__free_hook|__realloc_hook|__memalign_hook|madvise|MADV_|"
                r"\bmunmap\b|\bmremap\b|\bs?brk\s*\("),
     "changes the memory allocator's settings (they slow the reference timed in the same process)"),
    (re.compile(r"\bsigaction\b|\bsignal\s*\(|sigaltstack|\bmprotect\b|pkey_mprotect|userfaultfd|\bfrom_blob\b"),
     "handles signals, protects memory or wraps foreign memory as a tensor (an output must be computed, in memory "
     "PyTorch allocated, when forward returns)"),
    (re.compile(r"\bclone3?\s*\(|pthread_create|thrd_create"), "spawns threads"),
    (re.compile(r"TORCH_LIBRARY\w*|\bRegisterOperators\b|torch::Library\b|\bCppFunction\b|\bregisterKernel\b|"
                r"\bregisterFallback\b"),
     "registers kernels with PyTorch's dispatcher (that changes what every PyTorch op does in the process, the "
     "harness's and the reference's too); expose plain functions through the extension module"),
    (re.compile(r"\bat::launch\s*\(|\bintraop_launch\w*|\bget_thread_pool\b|\bTaskThreadPool\w*|c10::ThreadPool\b|"
                r"\bPTThreadPool\b"),
     "runs work on PyTorch's thread pools, which outlive the call (OpenMP is the way to use several cores)"),
]
# Methods of plain Python values (lists, dicts, strings) that a forward path may call on a receiver the analysis cannot
# type; `index` and `count` are also list methods, so they are not read as tensor compute.
PYTHON_METHODS = {
    "append", "extend", "insert", "pop", "remove", "clear", "copy", "count", "index", "get", "items", "keys", "values",
    "update", "setdefault", "format", "join", "split", "strip", "replace", "startswith", "endswith", "lower", "upper",
}
# `operator` functions that are the `@` operator under another name.
OPERATOR_MATMUL = {"operator.matmul", "operator.imatmul", "operator.__matmul__"}
# Tensor compute methods, for when torch cannot be imported to ask `torch.Tensor` itself.
TENSOR_COMPUTE_FALLBACK = {
    "abs", "add", "addmm", "amax", "amin", "argmax", "argmin", "bmm", "clamp", "clamp_min", "clamp_max", "clip",
    "conv2d", "cos", "cumsum", "div", "exp", "gelu", "index_select", "log", "log_softmax", "matmul", "max", "mean",
    "min", "mm", "mul", "neg", "norm", "pow", "prod", "relu", "rsqrt", "sigmoid", "sin", "softmax", "sort", "sqrt",
    "std", "sub", "sum", "tanh", "topk", "var", "where", "tolist", "numpy",
}
