"""Binary legality: what a candidate's built extension library links against, read from its ELF symbol table.

The static rules read the source and the runtime rules read the profiler, and both can be got round: a namespace alias
(`namespace an = at::native;`) or token pasting hides a name from the source rules, and ATen entry points that are not
dispatcher ops (`at::native::cpublas::gemm`, `at::native::…` kernels) or ops called on a thread the profiler does not
follow (an OpenMP worker) never appear in the profiler's events. Whatever the source says, a call into PyTorch's
library from the extension is an undefined symbol of the built library, resolved by the dynamic linker at import; so
the trusted side reads the library's imports and rejects:

- ATen operators that are not plumbing (`at::_ops::<op>::call`, the one way the public C++ API reaches an op), judged
  by the same whitelist as the runtime rule (`musacoder.legality.runtime.aten_allowed`);
- the implementations behind the dispatcher (`at::native`, `at::cpu`, `at::cuda::blas`, `at::meta`, the composite
  and redispatch namespaces), the dispatcher itself (`c10::Dispatcher`, operator handles), and the C++ frontend's
  modules and TorchScript (`torch::nn`, `torch::jit`, `torch::autograd`);
- anything that switches off or reads the profiler's callbacks (`RecordFunction`, `at::enableRecordFunction`,
  Kineto, CUPTI);
- vendor math libraries (cuBLAS, cuDNN, MKL, oneDNN, OpenBLAS …), unless the policy allows them, and whatever
  PyTorch's compute libraries export outside PyTorch's own API (the BLAS, Sleef, NNPACK, FBGEMM … they bundle, under
  any spelling such as `SGEMM`, and the AOTInductor C shims), read from those libraries;
- the dispatcher's registration API (`torch::Library`, `TORCH_LIBRARY…`: a kernel registered for `aten::detach` ran
  each output's work only when the harness read it) and PyTorch's thread pools (`at::launch`);
- code that calls back into the Python interpreter to run source (`PyImport_*`, `PyRun_*`, `Py_CompileString*`);
- looking up or loading code by a name made at run time (`dlopen`, `dlsym`, `dl_iterate_phdr`, `dladdr` …), the way
  round an import table;
- changing the scheduling or threads of the process the reference is timed in (`sched_setaffinity`, `setpriority`,
  `at::set_num_threads` …), its environment (`setenv`, libc's `environ`) or its allocator (`mallopt`), handling
  signals or protecting memory (`sigaction`, `mprotect`: a fault handler can fill an output after forward returned),
  and starting threads of its own (`pthread_create`, `clone`; OpenMP is the way to use several cores).

What the library does with files, processes and syscalls is left to the sandbox, which contains it whatever the
binary holds; the rules here are about what the kernel computes with and what would blind the verifier. Symbols that
headers pull in for every extension (stream and guard helpers that `c10/cuda/CUDAGuard.h` emits, the dispatch key
guards of `torch/python.h`) are not judged.
"""

from __future__ import annotations

import functools
import re
import struct
from pathlib import Path

from musacoder.legality.policy import VENDOR_PATTERNS
from musacoder.legality.runtime import aten_allowed

MAX_LIBRARY_BYTES = 1 << 30

# nested-name prefixes (Itanium ABI) whose functions compute with PyTorch's own kernels or reach them around the
# dispatcher and so around the profiler
_FORBIDDEN_NAMESPACES = {
    ("at", "native"): "an ATen kernel implementation (at::native), which bypasses the dispatcher",
    ("at", "cpu"): "an ATen CPU kernel (at::cpu), which bypasses the dispatcher",
    ("at", "cuda", "blas"): "PyTorch's cuBLAS wrapper (at::cuda::blas)",
    ("at", "cuda", "sparse"): "PyTorch's cuSPARSE wrapper (at::cuda::sparse)",
    ("at", "cuda", "solver"): "PyTorch's cuSOLVER wrapper (at::cuda::solver)",
    ("at", "cuda", "jit"): "PyTorch's jiterator (at::cuda::jit)",
    ("at", "cpublas"): "PyTorch's CPU BLAS wrapper",
    ("at", "meta"): "an ATen meta function",
    ("at", "redispatch"): "an ATen redispatch entry point",
    ("at", "compositeexplicitautograd"): "an ATen composite kernel",
    ("at", "compositeexplicitautogradnonfunctional"): "an ATen composite kernel",
    ("at", "compositeimplicitautograd"): "an ATen composite kernel",
    ("at", "compositeimplicitautogradnestedtensor"): "an ATen composite kernel",
    ("at", "functionalization"): "an ATen functionalization kernel",
    ("at", "mkldnn"): "PyTorch's oneDNN wrapper",
    ("at", "functorch"): "a functorch batching rule",
    ("c10", "Dispatcher"): "the operator dispatcher",
    ("c10", "OperatorHandle"): "the operator dispatcher",
    ("c10", "TypedOperatorHandle"): "the operator dispatcher",
    ("c10", "KernelFunction"): "the operator dispatcher",
    ("c10", "impl", "OperatorEntry"): "the operator dispatcher",
    ("torch", "jit"): "TorchScript",
    ("torch", "nn"): "a torch::nn module or functional",
    ("torch", "autograd"): "autograd or its profiler",
    ("torch", "optim"): "torch::optim",
    ("torch", "profiler"): "the profiler",
    ("torch", "inductor"): "TorchInductor",
    ("torch", "aot_inductor"): "TorchInductor",
    ("libkineto",): "the profiler (Kineto)",
    ("torch", "Library"): "the dispatcher's registration API (torch::Library, TORCH_LIBRARY…), which changes what "
                          "PyTorch's ops do in the whole process",
    ("torch", "CppFunction"): "the dispatcher's registration API (torch::CppFunction)",
    ("torch", "detail", "TorchLibraryInit"): "the dispatcher's registration API (TORCH_LIBRARY…)",
    ("torch", "RegisterOperators"): "the dispatcher's registration API (RegisterOperators)",
    ("c10", "RegisterOperators"): "the dispatcher's registration API (RegisterOperators)",
    ("at", "launch"): "PyTorch's inter-op thread pool (at::launch), whose work outlives the call",
    ("at", "intraop_launch"): "PyTorch's intra-op thread pool (at::intraop_launch), whose work outlives the call",
    ("at", "intraop_launch_future"): "PyTorch's intra-op thread pool, whose work outlives the call",
    ("at", "get_thread_pool"): "PyTorch's thread pool",
    ("at", "PTThreadPool"): "PyTorch's thread pool",
    ("c10", "ThreadPool"): "PyTorch's thread pool",
    ("c10d",): "PyTorch's distributed runtime (c10d: process groups, stores, sockets and timers)",
    ("torch", "distributed"): "PyTorch's distributed runtime (torch::distributed: RPC agents, their threads and timers)",
    ("at", "cuda", "tunable"): "PyTorch's GEMM tuner (at::cuda::tunable), which times kernels and calls cuBLAS",
    ("c10", "TaskThreadPoolBase"): "PyTorch's thread pool",
    ("c10", "TaskThreadPool"): "PyTorch's thread pool",
    # libstdc++ starts std::thread (std::jthread, std::async) out of line: the extension imports this, not
    # pthread_create (a thread started at import did the work after the clock stopped)
    ("std", "thread", "_M_start_thread"): "a thread of its own (std::thread), whose work outlives the call",
    ("std", "__future_base"): "a thread of its own (std::async), whose work outlives the call",
}
# PyTorch's compute libraries export, besides PyTorch's own C++ API, the entry points of the code they bundle: BLAS and
# LAPACK in every spelling (SGEMM, sgemm_, cblas_sgemm …) and the rest of MKL, Sleef, NNPACK, XNNPACK, FBGEMM,
# oneDNN, CUTLASS-based kernels, and the AOTInductor C shim of every ATen op (aoti_torch_cpu_mm …). An extension may
# import from them only PyTorch's API (the namespaces below, judged by the rules above) and C++ runtime support;
# everything else they define is someone else's kernel. Read from the libraries themselves, so no list of names
# can fall behind a new release.
_TORCH_COMPUTE_LIBS = ("libtorch_cpu", "libtorch_cuda", "libtorch_cuda_linalg", "libtorch_hip")
_TORCH_API_NAMESPACES = {"at", "c10", "torch", "caffe2", "std", "__gnu_cxx", "__cxxabiv1", "fmt"}
_OPS = ("at", "_ops")
_PROFILER_NAME = re.compile(r"Record_?Function|ThreadLocalCallback|GlobalCallback|clearCallbacks|removeCallback|"
                            r"disableCallback|reenableCallback|hasCallbacks|ThreadLocalDebugInfo|DebugInfoKind|"
                            r"kineto|cupti|profiler|StepCallbacks|RecordScope|CallbackHandle|"
                            # the heap's statistics: the profiler's event records grow it
                            r"^(?:mallinfo2?|malloc_stats|malloc_info|malloc_usable_size)$",
                            re.I)
# looking up or loading code by a name made at run time: the way round an import table
_DYNAMIC_LOOKUP = re.compile(r"^(dlopen|dlmopen|dlsym|dlvsym|dlinfo|dl_iterate_phdr|dladdr1?|_r_debug|"
                             # ... and the GPU driver's own: its entry points by name, and GPU code loaded from memory
                             # at run time (PTX in a string: kernels no source or machine-code rule reads)
                             r"cuGetProcAddress\w*|cudaGetDriverEntryPoint\w*|cuModuleLoad\w*|cuLibraryLoad\w*|"
                             r"cudaLibraryLoad\w*|cuLinkCreate\w*|cuLinkAdd\w*|muModuleLoad\w*|musaLibraryLoad\w*|"
                             r"muGetProcAddress\w*|musaGetDriverEntryPoint\w*)$")
# the scheduling of the process the reference is timed in
_SCHEDULING = re.compile(r"^(sched_setaffinity|pthread_setaffinity_np|sched_setscheduler|sched_setparam|"
                         r"pthread_setschedparam|setpriority|nice|setrlimit|prlimit64?|omp_set_num_threads|"
                         r"omp_set_dynamic|omp_set_max_active_levels|setenv|putenv|unsetenv|clearenv)$")
# the environment, the allocator, signals and memory protection, threads: state of the process the reference is
# timed in, and ways to compute an output after forward returned (a page-fault handler filling it when read)
_PROCESS_STATE = re.compile(r"^(environ|__environ|_environ|mallopt|malloc_trim|__malloc_hook|__free_hook|"
                            r"__realloc_hook|__memalign_hook|sigaction|signal|__sysv_signal|bsd_signal|sigaltstack|"
                            r"mprotect|pkey_mprotect|pthread_create|clone|clone3|thrd_create|madvise|posix_madvise|"
                            r"mmap|mmap64|munmap|mremap|brk|sbrk|aio_\w+|lio_listio\w*|mq_notify|"
                            # libgomp's entry points that leave work running when the call returns: a region opened
                            # with the old GOMP_parallel_start (its team wrote the output after the clock stopped),
                            # tasks, target and teams regions; `#pragma omp parallel [for]` compiles to GOMP_parallel*,
                            # which joins its team before returning
                            r"GOMP_parallel_start|GOMP_parallel_end|GOMP_task\w*|GOMP_taskloop\w*|GOMP_target\w*|"
                            r"GOMP_teams\w*|omp_fulfill_event)$")
# clocks: a kernel that times itself can tell a watched (profiled) call from a timed one
_CLOCKS = re.compile(r"^(clock_gettime|clock_getres|clock|time|gettimeofday|timespec_get|ftime|getrusage|times|"
                     r"omp_get_wtime|omp_get_wtick|timer_create)$")
# ... and the C++ names of clocks: the standard library's (`std::chrono::steady_clock::now`, out of line in libstdc++
# and libc++, named without `std::` in source after `using namespace std`) and c10's exported clock pair
_CLOCK_NAMES = (("std", "chrono"), ("std", "__1", "chrono"), ("c10", "ApproximateClockToUnixTimeConverter"))
# (the GPU's event timer, cudaEventElapsedTime, is imported by every extension that includes c10/cuda/CUDAGuard.h,
# whose CUDAGuardImpl::elapsedTime is emitted with its vtable; the machine-code rule judges who calls it)
_PYTHON_EXEC = re.compile(r"^(PyImport_\w+|PyRun_\w+|Py_CompileString\w*|PyEval_EvalCode\w*|PyEval_EvalFrame\w*|"
                          r"PyMarshal_\w+|Py_RunMain|Py_Main)$")

# the Python C-API beyond what pybind11's glue imports: reaching the interpreter's modules, frames and hooks (a kernel
# that patched the worker's clock, or read whether the profiler was on and called torch.mm when it was not), calling
# Python objects, making function objects
_PYTHON_REACH = re.compile(
    r"^(PySys_\w+|_PySys_\w+|PyMapping_\w+|PyModule_GetDict\w*|PyModule_GetState|"
    r"PyEval_(?:SetProfile|SetTrace|GetGlobals|GetLocals|GetFrame|GetFuncName|GetFuncDesc|CallObject|CallFunction|"
    r"CallMethod|MergeCompilerFlags)\w*|_PyEval_\w+|PyThreadState_(?:SetAsyncExc|GetDict)|"
    r"PyCFunction_New\w*|PyFunction_\w+|_PyFunction_\w+|PyCode_\w+|PyGC_\w+|Py_AtExit|Py_AddPendingCall|"
    r"PyObject_(?:Call|CallNoArgs|CallOneArg|CallMethod\w*|CallFunction|Vectorcall\w*|Dir)|"
    r"_PyObject_(?:Call\w*|Vectorcall\w*|FastCall\w*|MakeTpCall)|"
    r"PyDict_(?:GetItemString|SetItemString|Keys|Values|Items|Merge\w*|Update)|"
    r"PyFrame_(?:GetGlobals|GetLocals|GetBuiltins|FastToLocals\w*|LocalsToFast))$")
# PyTorch's process-wide registries (allocators, hooks, handlers): a kernel that installed its own CPU allocator ran
# the work it owed whenever the harness next allocated, so the reference's clock paid for it
_TORCH_REGISTRY = re.compile(r"^(?:[Ss]et[A-Z_]?\w*(?:Allocator|Hooks?|Handler|Create|Callback|Registry|Interpreter)"
                             r"\w*|set_\w*(?:allocator|hooks?|handler|callback)\w*|[Rr]egister\w*)$")
# the shared libraries an extension may load with it: the C and C++ runtimes, OpenMP, PyTorch's own, the device
# runtimes and the interpreter; vendor math libraries only where the policy allows them
_ALLOWED_NEEDED = re.compile(
    r"^(?:libc|libm|libdl|librt|libpthread|libutil|libatomic|libstdc\+\+|libgcc_s|libgomp|libiomp5|libomp|"
    r"ld-linux-x86-64|ld-linux-aarch64|libc10|libc10_cuda|libc10_hip|libtorch|libtorch_cpu|libtorch_cuda|"
    r"libtorch_hip|libtorch_python|libtorch_global_deps|libshm|libcudart|libcuda|libamdhip64|libmusart|libmusa|"
    r"libtorch_musa|libpython3\.\d+)\.so(?:\.\d+)*$")
_VENDOR_LIBRARY = re.compile(r"cublas|cudnn|cusparse|cufft|cusolver|curand|cutensor|nccl|nvrtc|mkl|dnnl|blas|lapack|"
                             r"hipblas|miopen|rocblas|mublas|mudnn|musparse|mufft|musolver", re.I)


class NotALibrary(ValueError):
    """The file is not a 64-bit little-endian ELF object this reader understands."""


def read_library(path: Path) -> bytes:
    """The bytes of the file at `path`; `NotALibrary` for one larger than `MAX_LIBRARY_BYTES`."""
    path = Path(path)
    if path.stat().st_size > MAX_LIBRARY_BYTES:
        raise NotALibrary(f"{path.name} is larger than {MAX_LIBRARY_BYTES >> 20} MB")
    return path.read_bytes()


def _read(path: Path, *readers, data: bytes | None = None):
    """Each reader's answer on the bytes of the 64-bit little-endian ELF file at `path` (`data`: those bytes, already
    read), read once. Raises `NotALibrary` for anything else, truncated or inconsistent files included."""
    path = Path(path)
    if data is None:
        data = read_library(path)
    if data[:4] != b"\x7fELF" or data[4:5] != b"\x02" or data[5:6] != b"\x01":
        raise NotALibrary("not a 64-bit little-endian ELF file")
    try:
        return [read(data) for read in readers]
    except NotALibrary:
        raise
    except (struct.error, IndexError, ValueError) as e:  # a file made to be read wrong: refused, never a crash
        raise NotALibrary(f"{path.name}: malformed ELF ({e})") from None


def is_relocatable(data: bytes) -> bool:
    """Whether the ELF bytes `data` are a relocatable object (`e_type` `ET_REL`, a `.o` file): the linker's input,
    which the dynamic loader never maps. Its code reaches a process only inside the library linked from it."""
    return data[:4] == b"\x7fELF" and data[5:6] == b"\x01" and data[16:18] == b"\x01\x00"


def undefined_symbols(path: Path) -> list[str]:
    """The names a 64-bit ELF shared library or object file imports: the undefined symbols its section headers list
    (`.dynsym` for a library, `.symtab` for an object file) and, for a library, those the dynamic loader binds through
    its relocations (`_dynamic_view`). Raises `NotALibrary` for anything else, truncated or inconsistent files
    included."""
    return _read(path, _undefined)[0]


def _undefined(data: bytes) -> list[str]:
    listed = _section_view(data)
    seen = set(listed)
    return listed + [s for s in dict.fromkeys(_dynamic_view(data) or []) if s not in seen]


def _string(data: bytes, table: int, size: int, at: int) -> str:
    """The NUL-terminated name at offset `at` of the string table at `table` (`size` bytes); ValueError (a malformed
    file) when it runs off the table's end."""
    end = data.find(b"\0", table + at, table + size)  # `find`: bytes and memory maps alike
    if end < 0:
        raise ValueError("a symbol name runs off its string table")
    return data[table + at:end].decode("ascii", "replace")


def _dynamic_segment(data: bytes):
    """(entries, at) of the `PT_DYNAMIC` segment, read the way the dynamic loader reads it: `entries` the (tag, value)
    pairs up to DT_NULL, `at(vaddr, size)` the file offset of a virtual address. None for a file without program
    headers (an object file); ([], at) for one without a dynamic segment."""
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    if phnum == 0:
        return None
    if phentsize < 56 or phoff + phnum * phentsize > len(data):
        raise NotALibrary("inconsistent program headers")
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 1:  # PT_LOAD
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:  # PT_DYNAMIC
            dynamic = (p_offset, p_filesz)

    def at(vaddr: int, size: int = 1) -> int:
        for v, o, n in loads:
            if v <= vaddr and vaddr + size <= v + n and o + (vaddr - v) + size <= len(data):
                return o + (vaddr - v)
        raise NotALibrary(f"address {vaddr:#x} lies in no loaded segment")

    entries: list[tuple[int, int]] = []
    if dynamic is not None:
        off, size = dynamic
        for pos in range(off, min(off + size, len(data)) - 15, 16):
            tag, val = struct.unpack_from("<qQ", data, pos)
            if tag == 0:  # DT_NULL
                break
            entries.append((tag, val))
    return entries, at


def _dynamic_view(data: bytes) -> list[str] | None:
    """The undefined symbols the dynamic loader binds: those named by the relocations of the `PT_DYNAMIC` segment,
    read the way the loader reads them (section headers are not needed to load a library, so a library could carry
    a harmless `.dynsym` section beside the tables it is really loaded with). None for a file without program
    headers (an object file)."""
    seg = _dynamic_segment(data)
    if seg is None:
        return None
    entries, at = seg
    tags: dict[int, int] = {}
    for tag, val in entries:
        tags.setdefault(tag, val)
    if 6 not in tags or 5 not in tags:  # DT_SYMTAB, DT_STRTAB
        return []
    symtab, strtab, strsz, syment = tags[6], tags[5], tags.get(10, 0), tags.get(11, 24)
    if syment < 24 or strsz <= 0:
        raise NotALibrary("inconsistent dynamic symbol table")
    str_off = at(strtab, strsz)
    indices: set[int] = set()
    # DT_RELA/RELASZ/RELAENT, DT_REL/RELSZ/RELENT, DT_JMPREL/PLTRELSZ (its kind in DT_PLTREL)
    for table, size_tag, ent in ((7, 8, tags.get(9, 24)), (17, 18, tags.get(19, 16)),
                                 (23, 2, 24 if tags.get(20, 7) == 7 else 16)):
        if table not in tags or not tags.get(size_tag):
            continue
        if ent < 16:
            raise NotALibrary("inconsistent relocation table")
        base = at(tags[table], tags[size_tag])
        for pos in range(base, base + tags[size_tag] - ent + 1, ent):
            _, info = struct.unpack_from("<QQ", data, pos)
            if info >> 32:
                indices.add(info >> 32)
    out = []
    for idx in sorted(indices):
        name_at, _, _, shndx = struct.unpack_from("<IBBH", data, at(symtab + idx * syment, 24))
        if shndx != 0 or name_at == 0 or name_at >= strsz:
            continue
        out.append(_string(data, str_off, strsz, name_at))
    return out


def needed_libraries(path: Path) -> list[str]:
    """The shared libraries a library names for the dynamic loader to load with it (its `DT_NEEDED` entries). Empty
    for an object file. Raises `NotALibrary` like `undefined_symbols`."""
    return _read(path, _needed)[0]


def _needed(data: bytes) -> list[str]:
    seg = _dynamic_segment(data)
    if seg is None:
        return []
    entries, at = seg
    strtab = next((v for t, v in entries if t == 5), None)  # DT_STRTAB
    strsz = next((v for t, v in entries if t == 10), 0)  # DT_STRSZ
    if strtab is None or strsz <= 0:
        return []
    str_off = at(strtab, strsz)
    return [_string(data, str_off, strsz, val) for tag, val in entries if tag == 1]  # DT_NEEDED


def _section_view(data: bytes) -> list[str]:
    """The undefined symbols the section headers list: `.dynsym` for a library, `.symtab` for an object file."""
    # defined (shndx != 0) and local (binding 0) ones are left out
    return [name for name, info, shndx in _symbol_table(data, (11, 2)) if shndx == 0 and info >> 4 != 0]


def _symbol_table(data, kinds: tuple[int, ...]):
    """(name, st_info, st_shndx) of each named entry of the first symbol table of the section types `kinds` that the
    file has (11: SHT_DYNSYM, 2: SHT_SYMTAB), read through the section headers; `data` is bytes or a memory map.
    Raises `NotALibrary` for a file without such a table or with inconsistent headers."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shoff == 0 or shentsize < 64 or shoff + shnum * shentsize > len(data):
        raise NotALibrary("no section headers")
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    by_type = {}
    for sec in sections:
        by_type.setdefault(sec[1], sec)
    table = next((by_type[k] for k in kinds if k in by_type), None)
    if table is None:
        raise NotALibrary("no symbol table")
    _, _, _, _, off, size, link, _, _, entsize = table
    if link >= len(sections) or entsize < 24 or off + size > len(data):
        raise NotALibrary("inconsistent symbol table")
    str_off, str_size = sections[link][4], sections[link][5]
    if str_off + str_size > len(data):
        raise NotALibrary("inconsistent string table")
    for pos in range(off, off + size - entsize + 1, entsize):
        name_at, info, _, shndx = struct.unpack_from("<IBBH", data, pos)
        if name_at == 0 or name_at >= str_size:
            continue
        yield _string(data, str_off, str_size, name_at), info, shndx


def exported_symbols(path: Path) -> set[str]:
    """The functions and objects a (trusted) shared library exports: the defined, global or weak `FUNC`, `OBJECT` and
    `IFUNC` entries of its `.dynsym`, read through a memory map (PyTorch's libraries are hundreds of MB). Empty for a
    file that is not a 64-bit little-endian ELF library with one."""
    import mmap

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            return set()
        try:
            return {name for name, info, shndx in _symbol_table(data, (11,))
                    if shndx != 0 and info >> 4 != 0 and info & 0xF in (1, 2, 10)}
        except NotALibrary:
            return set()


@functools.lru_cache(maxsize=1)
def _bundled() -> frozenset[str]:
    """What PyTorch's compute libraries (of the torch this process imports) define outside PyTorch's own API: C
    symbols and C++ names in other namespaces (see `_TORCH_COMPUTE_LIBS`). Empty without torch."""
    try:
        import torch
    except ImportError:
        return frozenset()
    out: set[str] = set()
    lib = Path(torch.__file__).parent / "lib"
    for name in _TORCH_COMPUTE_LIBS:
        for path in sorted(lib.glob(f"{name}.so*")):
            try:
                symbols = exported_symbols(path)
            except (OSError, struct.error, ValueError):
                continue
            out |= {s for s in symbols if not s.startswith("_Z")
                    or ((top := nested_name(s)[:1]) and top[0] not in _TORCH_API_NAMESPACES)}
    return frozenset(out)


def nested_name(symbol: str) -> tuple[str, ...]:
    """The leading names of an Itanium-mangled symbol: `_ZN2at4_ops2mm4callE…` -> ("at", "_ops", "mm", "call"),
    `_Z4gemm…` -> ("gemm",); () for a C symbol. Stops at the first template argument or special name."""
    if not symbol.startswith("_Z"):
        return ()
    i, names = 2, []
    nested = symbol.startswith("_ZN")
    if nested:
        i = 3
        while i < len(symbol) and symbol[i] in "rVKRO":
            i += 1
        if symbol.startswith("St", i):
            names.append("std")
            i += 2
    while i < len(symbol) and symbol[i].isdigit():
        j = i
        while j < len(symbol) and symbol[j].isdigit():
            j += 1
        n = int(symbol[i:j])
        if n <= 0 or j + n > len(symbol):
            break
        names.append(symbol[j:j + n])
        i = j + n
        if not nested:
            break
    return tuple(names)


@functools.lru_cache(maxsize=1)
def _ops_structs() -> dict[str, str]:
    """`at::_ops` struct name -> aten op name (`empty_memory_format` -> `aten::empty`), from torch's own schemas."""
    try:
        import torch

        schemas = torch._C._jit_get_all_schemas()
    except Exception:  # noqa: BLE001 - without torch the struct name is judged as the op name itself
        return {}
    out = {}
    for s in schemas:
        if not s.name.startswith("aten::"):
            continue
        base = s.name[len("aten::"):]
        out[f"{base}_{s.overload_name}" if s.overload_name else base] = s.name
    return out


def symbol_violation(symbol: str, allow_vendor_libs: bool = False) -> str | None:
    """Why importing `symbol` is not allowed, or None."""
    parts = nested_name(symbol)
    if parts[:2] == _OPS and len(parts) >= 3:
        op = _ops_structs().get(parts[2], f"aten::{parts[2]}")
        return None if aten_allowed(op) else f"calls the ATen operator {op} (at::_ops::{parts[2]})"
    for n in (3, 2, 1):
        what = _FORBIDDEN_NAMESPACES.get(parts[:n]) if len(parts) >= n else None
        if what:
            return f"calls {what}: {'::'.join(parts)}"
    plain = "::".join(parts) if parts else symbol
    if _PROFILER_NAME.search(plain) or _PROFILER_NAME.search(symbol):  # the name, or a profiler type it takes
        return f"switches off or reads the profiler: {plain}"
    if not parts and _DYNAMIC_LOOKUP.match(symbol) or parts[:2] == ("c10", "DynamicLibrary"):
        return f"looks up or loads code by name at run time: {plain}"
    if not parts and _SCHEDULING.match(symbol) or parts[:2] in (("at", "set_num_threads"),
                                                                 ("at", "set_num_interop_threads")):
        return f"changes the scheduling or threads of the process the reference is timed in: {plain}"
    if not parts and _PROCESS_STATE.match(symbol):
        return (f"changes the state of the process the reference is timed in, or works outside forward's call: "
                f"{symbol}")
    if not parts and _CLOCKS.match(symbol) or any(parts[:len(n)] == n for n in _CLOCK_NAMES):
        return f"reads a clock (a kernel that times itself can tell a watched call from a timed one): {plain}"
    if not parts and _PYTHON_EXEC.match(symbol):
        return f"runs Python from native code: {symbol}"
    if not parts and _PYTHON_REACH.match(symbol):
        return (f"reaches into the Python interpreter (its modules, frames, hooks or callables) from native code: "
                f"{symbol}")
    # (not the CUDA caching allocator's global itself: CUDA headers read it inline in every extension that takes a
    # stream, so its import says nothing; the worker compares its value instead)
    if parts[:1] in (("c10",), ("at",)) and len(parts) >= 2 and _TORCH_REGISTRY.match(parts[-1]):
        return (f"changes a process-wide registry of PyTorch (allocators, hooks, handlers), which runs code of its "
                f"own inside the harness's and the reference's calls: {'::'.join(parts)}")
    if not allow_vendor_libs and VENDOR_PATTERNS.search(plain):
        return f"calls a vendor math library (strict policy): {plain}"
    if symbol in _bundled() and (not allow_vendor_libs or symbol.startswith("aoti_torch")):
        if symbol.startswith("aoti_torch"):
            return f"calls PyTorch's C shim for its ops or dispatcher ({symbol})"
        return (f"calls {plain}, code PyTorch's libraries bundle (BLAS/MKL, Sleef, NNPACK, FBGEMM …), not a kernel "
                "of its own")
    return None


def library_violations(path: Path, allow_vendor_libs: bool = False, glue=None, data: bytes | None = None) -> list[str]:
    """Each forbidden import of the library at `path`, as a message naming the library. A file that is not a library
    this reader understands is one violation; a file that cannot be read raises `OSError` (not the candidate's).
    `glue`, when given, is called (only if something is forbidden) for the `musacoder.legality.glue.Baseline` of this
    environment: what an extension with no code of its own imports and links is not held against the candidate.
    `data`: the file's bytes, already read (`read_library`), judged instead of reading it again."""
    try:
        symbols, needed = _read(path, _undefined, _needed, data=data)
    except NotALibrary as e:  # the build's bytes: the candidate's
        return [f"the extension library {Path(path).name} could not be inspected: {e}"]
    bad_libs = [lib for lib in needed
                if not (_ALLOWED_NEEDED.match(lib) or allow_vendor_libs and _VENDOR_LIBRARY.search(lib))]
    bad_symbols = [(s, why) for s in sorted(set(symbols)) if (why := symbol_violation(s, allow_vendor_libs))]
    if (bad_libs or bad_symbols) and glue is not None:
        base = glue()
        bad_libs = [lib for lib in bad_libs if lib not in base.needed]
        bad_symbols = [(s, why) for s, why in bad_symbols if s not in base.symbols]
    return [f"the built extension loads the library {lib}: only the C/C++ runtimes, OpenMP, PyTorch's own libraries "
            "and the device runtime may be linked (a kernel of its own, not another library's)" for lib in bad_libs] + \
        [f"the built extension {why}" for _, why in bad_symbols]
