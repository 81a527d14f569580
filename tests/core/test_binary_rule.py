"""The binary rule (`musacoder.legality.binary`): an extension library's imports, read from its ELF symbol table,
judged whatever its source looked like."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from musacoder.build.cache import built_libraries, entry_dir
from musacoder.legality.binary import (
    NotALibrary, library_violations, needed_libraries, nested_name, symbol_violation, undefined_symbols,
)

CXX = shutil.which("g++") or shutil.which("c++")


@pytest.mark.parametrize("symbol,names", [
    ("_ZN2at4_ops2mm4callERKNS_6TensorES4_", ("at", "_ops", "mm", "call")),
    ("_ZNK2at10TensorBase8data_ptrIfEEPT_v", ("at", "TensorBase", "data_ptr")),
    ("_ZN2at6native7cpublas4gemmENS1_13TransposeTypeES2_lllfPKflS4_lfPfl", ("at", "native", "cpublas", "gemm")),
    ("_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE",
     ("std", "thread", "_M_start_thread")),
    ("_Z4gemmPKfS0_Pfi", ("gemm",)),
    ("cublasSgemm_v2", ()),
    ("_ZN2at99", ("at",)),  # a length running past the end stops the walk
])
def test_nested_name(symbol, names):
    assert nested_name(symbol) == names


@pytest.mark.parametrize("symbol,phrase", [
    ("_ZN2at4_ops2mm4callERKNS_6TensorES4_", "aten::mm"),
    ("_ZN2at4_ops8addmm_out4callE", "aten::addmm"),
    ("_ZN2at4_ops4relu4callERKNS_6TensorE", "aten::relu"),
    ("_ZN2at6native7cpublas4gemmENS1_13TransposeTypeES2_lllfPKflS4_lfPfl", "at::native"),
    ("_ZN2at3cpu9clamp_minERKNS_6TensorERKN3c106ScalarE", "at::cpu"),
    ("_ZN2at4cuda4blas4gemmIfEEvcclllN3c1013opmath_typeIT_E4typeEPKS5_lS9_lS6_PS5_l", "at::cuda::blas"),
    ("_ZN3c1010Dispatcher9singletonEv", "dispatcher"),
    ("_ZN5torch3jit7compileERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE", "TorchScript"),
    ("_ZN5torch2nn10LinearImpl7forwardERKN2at6TensorE", "torch::nn"),
    ("_ZN2at20enableRecordFunctionEb", "profiler"),
    # clocks by their C++ names: libstdc++'s and libc++'s out-of-line now(), c10's exported clock pair
    ("_ZNSt6chrono3_V212steady_clock3nowEv", "reads a clock"),
    ("_ZNSt6chrono3_V212system_clock3nowEv", "reads a clock"),
    ("_ZNSt3__16chrono12steady_clock3nowEv", "reads a clock"),
    ("_ZN3c1035ApproximateClockToUnixTimeConverter11measurePairEv", "reads a clock"),
    ("_ZN4c10d8TCPStoreC1Ev", "distributed runtime"),
    ("_ZN5torch11distributed3rpc14TensorPipeAgent14addGilWaitTimeEv", "distributed runtime"),
    ("_ZN2at4cuda7tunable20TuningResultsManager18InitRealtimeAppendEv", "GEMM tuner"),
    ("_ZN2at22addThreadLocalCallbackENS_22RecordFunctionCallbackE", "profiler"),
    ("cuptiActivityEnable", "profiler"),
    ("cublasSgemm_v2", "vendor"),
    ("cudnnConvolutionForward", "vendor"),
    ("cblas_sgemm", "vendor"),
    ("PyRun_SimpleString", "runs Python"),
    ("PyImport_ImportModule", "runs Python"),
    ("dlsym", "by name at run time"),
    ("dl_iterate_phdr", "by name at run time"),
    ("_ZN3c1014DynamicLibrary3symEPKc", "by name at run time"),
    ("dladdr", "by name at run time"),  # a library's base, from which its own symbol table can be walked
    ("sched_setaffinity", "scheduling"),
    ("setpriority", "scheduling"),
    ("_ZN2at15set_num_threadsEi", "scheduling"),
    ("_ZN2at12hasCallbacksEv", "profiler"),  # true only while the profiler watches: a watched-call detector
    # tenth round: the dispatcher's own test for a watched call, and the heap the profiler's records grow
    ("_ZN2at27getStepCallbacksUnlessEmptyENS_11RecordScopeE", "profiler"),
    ("mallinfo2", "profiler"),
    # fifth round: the interpreter reached from native code (the worker's clock replaced, the profiler's state read)
    ("PySys_GetObject", "reaches into the Python interpreter"),
    ("PyMapping_GetItemString", "reaches into the Python interpreter"),
    ("PyModule_GetDict", "reaches into the Python interpreter"),
    ("PyCFunction_NewEx", "reaches into the Python interpreter"),
    ("PyObject_Vectorcall", "reaches into the Python interpreter"),
    ("PyEval_SetProfile", "reaches into the Python interpreter"),
    # fifth round: PyTorch's process-wide registries (an allocator of the candidate's did its owed work later)
    ("_ZN3c1015SetCPUAllocatorEPNS_9AllocatorEh", "process-wide registry"),
    ("_ZN3c1012SetAllocatorENS_10DeviceTypeEPNS_9AllocatorEh", "process-wide registry"),
    ("scipy_cblas_sgemm64_", "vendor"),  # a prefixed spelling of CBLAS (NumPy's OpenBLAS)
    ("_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE", "thread of its own"),
    ("aio_write", "works outside forward's call"),
    ("GOMP_parallel_start", "works outside forward's call"),  # an OpenMP region left open when forward returns
    ("GOMP_task", "works outside forward's call"),
    ("_ZN3c1013DebugInfoKindE", "profiler"),
    ("clock_gettime", "clock"),
    ("timespec_get", "clock"),
    ("madvise", "state of the process"),
    ("mallopt", "state of the process"),
    ("environ", "state of the process"),
    ("sigaction", "state of the process"),
    ("pthread_create", "state of the process"),
    ("cuModuleLoadData", "loads code by name at run time"), ("cudaGetDriverEntryPoint", "loads code by name"),
    ("cuGetProcAddress_v2", "loads code by name"), ("cudaLibraryLoadData", "loads code by name"),
])
def test_forbidden_imports(symbol, phrase):
    why = symbol_violation(symbol)
    assert why is not None and phrase in why, why


@pytest.mark.parametrize("symbol", [
    "_ZN2at4_ops10empty_like4callERKNS_6TensorE",
    "_ZN2at4_ops19empty_memory_format4callEN3c108ArrayRefINS2_6SymIntEEE",  # torch::empty
    "_ZN2at4_ops5zeros4callE", "_ZN2at4_ops5fill__6Scalar4callE", "_ZN2at4_ops8to_dtype4callE",
    "_ZNK2at10TensorBase21__dispatch_contiguousEN3c1012MemoryFormatE",
    "_ZNK2at10TensorBase8data_ptrIfEEPT_v",
    "_ZN3c104cuda20getCurrentCUDAStreamEa", "_ZN3c104cuda17getStreamFromPoolEba",  # emitted by CUDAGuard.h
    "_ZN3c104impl23ExcludeDispatchKeyGuardC1ENS_14DispatchKeySetE",  # emitted by torch/python.h
    "_ZN2at4cuda26getCurrentDevicePropertiesEv", "_ZN3c106detail14torchCheckFailEPKcS2_jS2_",
    "cudaEventElapsedTime",  # CUDAGuardImpl::elapsedTime, emitted by CUDAGuard.h in every CUDA extension
    "GOMP_parallel", "omp_get_thread_num", "cudaLaunchKernel", "__cudaRegisterFunction", "cudaFuncSetAttribute",
    "PyObject_CallFunctionObjArgs", "PyEval_GetBuiltins", "memcpy", "expf",
])
def test_what_every_extension_imports_is_allowed(symbol):
    assert symbol_violation(symbol) is None


def test_vendor_libraries_follow_the_policy_switch():
    assert symbol_violation("cublasSgemm_v2", allow_vendor_libs=True) is None
    assert symbol_violation("_ZN2at4_ops2mm4callERKNS_6TensorES4_", allow_vendor_libs=True) is not None


@pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")
def test_a_compiled_object_is_judged_by_what_it_calls_not_by_how_its_source_names_it(tmp_path):
    """The source hides its calls behind an alias and token pasting; the object's symbol table still names them."""
    src = tmp_path / "k.cpp"
    src.write_text("""
namespace at { namespace _ops { struct mm { static void call(); }; struct empty_like { static void call(); }; } }
namespace at { namespace native { namespace cpublas { void gemm(int); } } }
namespace hidden = at::native;
#define CAT(a, b) a##b
extern "C" void CAT(cublas, Sgemm_v2)();
extern "C" float expf(float);
void kernel(float* x) {
    at::_ops::empty_like::call();
    at::_ops::mm::call();
    hidden::cpublas::gemm(3);
    CAT(cublas, Sgemm_v2)();
    x[0] = expf(x[0]);
}
""")
    obj = tmp_path / "k.o"
    subprocess.run([CXX, "-c", "-O1", str(src), "-o", str(obj)], check=True)
    symbols = undefined_symbols(obj)
    assert "expf" in symbols and "_ZN2at4_ops10empty_like4callEv" in symbols
    got = " | ".join(library_violations(obj))
    assert "aten::mm" in got and "at::native::cpublas::gemm" in got and "cublasSgemm_v2" in got, got
    assert "empty_like" not in got and "expf" not in got


def test_a_real_shared_library_is_read():
    """torch's Python bindings: their dynamic imports include the interpreter's API (and agree with `nm`)."""
    import torch

    lib = Path(torch.__file__).parent / "lib" / "libtorch_python.so"
    symbols = undefined_symbols(lib)
    assert any(s.startswith("PyObject_") for s in symbols)
    if shutil.which("nm"):
        nm = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True, text=True,
                            check=True).stdout
        names = {line.split()[-1].split("@")[0] for line in nm.splitlines() if line.strip()}
        assert names == set(symbols) - {""}


@pytest.mark.parametrize("content", [b"not an elf", b"\x7fELF\x02\x01" + b"\0" * 10, b"\x7fELF\x01\x01" + b"\0" * 60])
def test_what_is_not_a_library_is_refused_and_named(tmp_path, content):
    lib = tmp_path / "mc_ext.so"
    lib.write_bytes(content)
    with pytest.raises(NotALibrary):
        undefined_symbols(lib)
    got = library_violations(lib)
    assert len(got) == 1 and "mc_ext.so could not be inspected" in got[0]


def test_truncated_real_library_is_refused(tmp_path):
    data = Path(sys.executable).read_bytes()
    lib = tmp_path / "cut.so"
    lib.write_bytes(data[: len(data) // 3])
    with pytest.raises(NotALibrary):
        undefined_symbols(lib)


def test_built_libraries_reads_only_a_finished_entry_s_own_files(tmp_path):
    elf = b"\x7fELF..."
    key = "ab" * 32
    entry = entry_dir(tmp_path / "cache", key)
    (entry / "lite" / "deps").mkdir(parents=True)
    (entry / "lite" / "mc_ext.so").write_bytes(elf)
    (entry / "lite" / "deps" / "helper.bin").write_bytes(elf)  # a library it links, under any name
    (entry / "lite" / "main.cpp").write_text("// source")
    (entry / "lite" / "alias.so").symlink_to(entry / "lite" / "mc_ext.so")
    assert built_libraries(key, [tmp_path / "cache"]) is None  # not finished
    (entry / "done").write_text(str(entry / "lite"))
    assert built_libraries(key, [tmp_path / "cache"]) == [entry / "lite" / "deps" / "helper.bin",
                                                          entry / "lite" / "mc_ext.so"]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "other.so").write_bytes(elf)
    (entry / "done").write_text(str(outside))  # a `done` naming a folder outside its entry is not followed
    assert built_libraries(key, [tmp_path / "cache"]) is None
    private = tmp_path / "work" / "mc-build" / key  # a worker's private build: `root/key`
    private.mkdir(parents=True)
    (private / "mc_ext.so").write_bytes(elf)
    (private / "done").write_text("")
    assert built_libraries(key, [tmp_path / "cache", tmp_path / "work" / "mc-build"]) == [private / "mc_ext.so"]


@pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")
def test_the_verification_judges_every_library_its_candidate_loaded(tmp_path, monkeypatch):
    """`stages.binary.check_binaries`: libraries found by build key in the cache, a key only the broker served, and a
    library another builder (torch_musa's) left in the worker's folder; one named outside that folder is not read. The
    glue baseline is asked for only when something is forbidden, and one that could not be built is flagged."""
    from types import SimpleNamespace

    import musacoder.legality.glue as glue

    asked = []

    def baseline(cache_dir):
        asked.append(cache_dir)
        return glue.Baseline(frozenset(), frozenset(), "the glue baseline did not build: no compiler")

    monkeypatch.setattr(glue, "glue_baseline", baseline)

    from musacoder.config import VerifyConfig
    from musacoder.judge.stages import RunContext, Stop
    from musacoder.judge.stages.binary import check_binaries
    from musacoder.records import Task

    def library(where: Path, calls: str) -> Path:
        src = tmp_path / f"{where.name}.cpp"
        src.write_text(f"namespace at {{ namespace _ops {{ struct {calls} {{ static void call(); }}; }} }}\n"
                       f"void k() {{ at::_ops::{calls}::call(); }}\n")
        where.mkdir(parents=True, exist_ok=True)
        subprocess.run([CXX, "-c", str(src), "-o", str(where / "mc_ext.so")], check=True)
        return where / "mc_ext.so"

    cache, work = tmp_path / "cache", tmp_path / "work"
    clean, served = "ab" * 32, "cd" * 32
    for key, op in ((clean, "empty_like"), (served, "mm")):
        library(entry_dir(cache, key) / "lite", op)
        (entry_dir(cache, key) / "done").write_text(str(entry_dir(cache, key) / "lite"))
    musa_lib = library(work / "torch_extensions" / "m", "bmm")

    def run(builds, served_keys=()):
        ctx = RunContext.new(Task(name="t", source="", overrides={}), "", "cpu", VerifyConfig(cache_dir=cache))
        sb = SimpleNamespace(served_keys=list(served_keys), workdir=work)  # what the rule reads of the worker
        try:
            check_binaries(ctx, builds, sb)
        except Stop as stop:
            return stop.status, ctx.verdict
        return "passed", ctx.verdict

    status, v = run([{"key": clean, "ok": True}])
    assert status == "passed" and v.stages["binary_legality"] == "ok" and asked == []
    status, v = run([{"key": clean, "ok": True}], served_keys=[served])
    assert status == "illegal" and "aten::mm" in " ".join(v.violations) and asked == [cache]
    assert any("without its glue baseline" in f and "no compiler" in f for f in v.flags)
    status, v = run([{"key": None, "ok": True, "library": str(musa_lib)}])
    assert status == "illegal" and "aten::bmm" in " ".join(v.violations)
    status, v = run([{"key": None, "ok": True, "library": str(tmp_path / "elsewhere.so")}])
    assert status == "passed" and any("elsewhere.so" in f for f in v.flags)
    # a library the verifier cannot read (a cache cleared meanwhile) is its own problem, not the candidate's
    import musacoder.legality.binary as binary

    def unreadable(path, allow_vendor_libs=False, glue=None):
        raise PermissionError(13, "Permission denied", str(path))

    real, binary.library_violations = binary.library_violations, unreadable
    try:
        status, v = run([{"key": clean, "ok": True}], served_keys=[served])
    finally:
        binary.library_violations = real
    assert status == "passed" and any("mc_ext.so" in f for f in v.flags)


def _elf(names: list[str], strtab: bytes | None = None) -> bytes:
    """A minimal ELF64 library: a `.dynstr` and a `.dynsym` importing `names` (undefined global functions)."""
    import struct

    table = strtab if strtab is not None else b"\0" + b"".join(n.encode() + b"\0" for n in names)
    syms, at = [b"\0" * 24], 1
    for n in names:
        syms.append(struct.pack("<IBBHQQ", at, 0x12, 0, 0, 0, 0))
        at += len(n) + 1
    symtab = b"".join(syms)
    str_off, sym_off = 64, 64 + len(table)
    sh_off = sym_off + len(symtab)
    sections = [b"\0" * 64,
                struct.pack("<IIQQQQIIQQ", 0, 11, 0, 0, sym_off, len(symtab), 2, 1, 8, 24),  # SHT_DYNSYM
                struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, str_off, len(table), 0, 0, 1, 0)]  # SHT_STRTAB
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, sh_off, 0, 64, 0, 0,
                                                               64, len(sections), 0)
    return header + table + symtab + b"".join(sections)


def test_a_hand_made_library_is_read_and_judged(tmp_path):
    lib = tmp_path / "mc_ext.so"
    lib.write_bytes(_elf(["expf", "_ZN2at4_ops2mm4callEv", "_ZN2at4_ops10empty_like4callEv"]))
    assert undefined_symbols(lib) == ["expf", "_ZN2at4_ops2mm4callEv", "_ZN2at4_ops10empty_like4callEv"]
    assert [v for v in library_violations(lib) if "aten::mm" in v] and len(library_violations(lib)) == 1


def _elf_loaded_with(listed: list[str], bound: list[str]) -> bytes:
    """A library whose section headers list `listed` (a harmless `.dynsym`) while its dynamic segment, which the
    loader reads, binds `bound` through relocations."""
    import struct

    def tables(names):
        strtab = b"\0" + b"".join(n.encode() + b"\0" for n in names)
        syms, at = [b"\0" * 24], 1
        for n in names:
            syms.append(struct.pack("<IBBHQQ", at, 0x12, 0, 0, 0, 0))
            at += len(n) + 1
        return strtab, b"".join(syms)

    decoy_str, decoy_sym = tables(listed)
    real_str, real_sym = tables(bound)
    rela = b"".join(struct.pack("<QQq", 0, (i << 32) | 7, 0) for i in range(1, len(bound) + 1))
    off = 64 + 2 * 56
    layout = {}
    for name, blob in (("decoy_str", decoy_str), ("decoy_sym", decoy_sym), ("real_str", real_str),
                       ("real_sym", real_sym), ("rela", rela)):
        layout[name] = off
        off += len(blob)
    dyn = b"".join(struct.pack("<qQ", t, v) for t, v in (
        (5, layout["real_str"]), (6, layout["real_sym"]), (10, len(real_str)), (11, 24),
        (7, layout["rela"]), (8, len(rela)), (9, 24), (0, 0)))
    dyn_off = off
    sh_off = dyn_off + len(dyn)
    phdrs = (struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, sh_off, sh_off, 4096) +
             struct.pack("<IIQQQQQQ", 2, 6, dyn_off, dyn_off, dyn_off, len(dyn), len(dyn), 8))
    sections = [b"\0" * 64,
                struct.pack("<IIQQQQIIQQ", 0, 11, 0, 0, layout["decoy_sym"], len(decoy_sym), 2, 1, 8, 24),
                struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, layout["decoy_str"], len(decoy_str), 0, 0, 1, 0)]
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, sh_off, 0, 64, 56, 2,
                                                               64, len(sections), 0)
    return header + phdrs + decoy_str + decoy_sym + real_str + real_sym + rela + dyn + b"".join(sections)


def test_imports_are_read_the_way_the_loader_reads_them(tmp_path):
    """A `.dynsym` section that lists only harmless names does not hide what the dynamic segment binds."""
    lib = tmp_path / "mc_ext.so"
    lib.write_bytes(_elf_loaded_with(["expf"], ["_ZN2at4_ops2mm4callEv", "memcpy"]))
    assert set(undefined_symbols(lib)) == {"expf", "_ZN2at4_ops2mm4callEv", "memcpy"}
    assert any("aten::mm" in v for v in library_violations(lib))


def test_a_string_table_without_its_terminator_is_refused(tmp_path):
    lib = tmp_path / "mc_ext.so"
    lib.write_bytes(_elf(["cublasSgemm_v2"], strtab=b"\0cublasSgemm_v2"))  # the name runs off the table's end
    with pytest.raises(NotALibrary):
        undefined_symbols(lib)


def test_a_corrupted_library_is_refused_never_a_crash(tmp_path):
    """Bytes of a real library overwritten at random (headers included): the reader either reads a symbol list or
    refuses the file; it never raises anything else."""
    import random

    import torch

    original = (Path(torch.__file__).parent / "lib" / "libc10.so").read_bytes()
    rng = random.Random(7)
    lib = tmp_path / "mc_ext.so"
    for _ in range(60):
        data = bytearray(original)
        for _ in range(rng.randint(1, 8)):
            at = rng.choice([rng.randrange(0, 64), rng.randrange(len(data) - 4096, len(data)), rng.randrange(len(data))])
            data[at] = rng.randrange(256)
        lib.write_bytes(bytes(data))
        try:
            assert isinstance(undefined_symbols(lib), list)
        except NotALibrary:
            pass


@pytest.mark.parametrize("symbol,phrase", [
    ("SGEMM", "code PyTorch's libraries bundle"),            # MKL's Fortran spelling, exported by libtorch_cpu
    ("sgemm_", "code PyTorch's libraries bundle"),
    ("_ZN5torch7LibraryC1ENS0_4KindESsSt8optionalIN3c1011DispatchKeyEEPKcj", "registration API"),
    ("_ZN2at6launchESt8functionIFvvEE", "thread pool"),
])
def test_bundled_code_registrations_and_thread_pools_are_rejected(symbol, phrase):
    import torch  # noqa: F401 - the bundled symbols are read from the libraries of the torch installed here

    why = symbol_violation(symbol)
    assert why is not None and phrase in why, why


# Every Python C-API name a CUDA extension built against torch 2.11 (its pybind11) imported on the H200: pybind11's glue
# differs between versions, and four of these (PyDict_Next, PyObject_CallObject, PyObject_GenericGetDict/SetDict) were
# once on the deny-list, which made every such extension `illegal`.
PYBIND11_GLUE_TORCH_2_11 = """
    PyBaseObject_Type PyBool_Type PyByteArray_AsString PyByteArray_Size PyByteArray_Type PyBytes_AsString
    PyBytes_AsStringAndSize PyBytes_Size PyCapsule_GetPointer PyCapsule_New PyCFunction_Type PyCMethod_New
    _Py_Dealloc PyDict_Contains PyDict_Copy PyDict_DelItemString PyDict_GetItemWithError PyDict_New PyDict_Next
    PyDict_Size PyDict_Type PyErr_Clear PyErr_Fetch PyErr_Format PyErr_NormalizeException PyErr_Occurred
    PyErr_Restore PyErr_SetObject PyErr_SetString PyErr_WarnEx PyEval_AcquireThread PyEval_GetBuiltins
    PyEval_SaveThread PyException_SetCause PyException_SetContext PyException_SetTraceback PyExc_FutureWarning
    PyExc_ImportError PyExc_IndexError PyExc_MemoryError PyExc_OverflowError PyExc_RuntimeError
    PyExc_SystemError PyExc_TypeError PyExc_ValueError PyFloat_AsDouble PyFloat_Type PyFrame_GetBack
    PyFrame_GetCode PyFrame_GetLineNumber Py_GetVersion PyGILState_Check PyGILState_Ensure
    PyGILState_GetThisThreadState PyGILState_Release PyIndex_Check PyInstanceMethod_New PyInstanceMethod_Type
    PyInterpreterState_Get PyInterpreterState_GetDict PyList_Size PyLong_AsLong PyLong_Type PyMem_Calloc
    PyMem_Free PyModule_AddObject PyModuleDef_Init PyModule_NewObject PyModule_Type _Py_NoneStruct
    _Py_NotImplementedStruct PyNumber_Add PyNumber_Check PyNumber_Float PyNumber_Long
    PyObject_CallFunctionObjArgs PyObject_CallObject PyObject_ClearWeakRefs PyObject_GC_UnTrack
    PyObject_GenericGetDict PyObject_GenericSetDict PyObject_GetAttrString _PyObject_GetDictPtr PyObject_GetItem
    PyObject_HasAttrString PyObject_IsInstance _PyObject_New PyObject_Repr PyObject_SetAttrString
    PyObject_SetItem PyObject_Str PyProperty_Type PyThreadState_Clear PyThreadState_DeleteCurrent
    PyThreadState_Get PyThreadState_New _PyThreadState_UncheckedGet PyThread_tss_create PyThread_tss_delete
    PyThread_tss_get PyThread_tss_set PyTuple_GetItem PyTuple_New PyTuple_SetItem PyTuple_Size PyType_FromSpec
    PyType_IsSubtype _PyType_Lookup PyType_Ready PyType_Type PyUnicode_AsEncodedString PyUnicode_AsUTF8AndSize
    PyUnicode_AsUTF8String PyUnicode_DecodeUTF8 PyUnicode_FromString PyWeakref_NewRef
""".split()


def test_what_pybind11s_glue_imports_under_torch_2_11_is_allowed():
    assert len(PYBIND11_GLUE_TORCH_2_11) == 116
    assert {s: why for s in PYBIND11_GLUE_TORCH_2_11 if (why := symbol_violation(s))} == {}


@pytest.mark.parametrize("symbol", ["memcpy", "expf", "GOMP_parallel", "omp_get_thread_num", "THPVariableClass",
                                    "_ZN3c105ErrorC1ENS_14SourceLocationESs", "_ZTIN3c105ErrorE", "__cxa_throw"])
def test_runtime_support_and_torch_api_stay_allowed(symbol):
    assert symbol_violation(symbol) is None


@pytest.mark.parametrize("symbol", [
    "PyObject_GetAttrString", "PyObject_CallFunctionObjArgs", "PyEval_GetBuiltins", "PyEval_SaveThread",
    "PyGILState_Ensure", "PyCMethod_New", "PyDict_GetItemWithError", "_PyObject_GetDictPtr",  # pybind11's own glue
    "_ZN3c1015GetCPUAllocatorEv", "_ZN3c104cuda9SetDeviceEab",  # reading the allocator; CUDAGuard's device switch
    "_ZN3c104cuda20CUDACachingAllocator9allocatorE",  # read inline by CUDA headers (a golden candidate imports it)
    "GOMP_parallel", "omp_get_thread_num", "GOMP_barrier",  # what `#pragma omp parallel for` compiles to
    "_ZN3c1010TensorImpl17set_autograd_metaESt10unique_ptrINS_21AutogradMetaInterfaceESt14default_deleteIS2_EE",
])
def test_what_every_extension_imports_is_not_judged(symbol):
    assert symbol_violation(symbol) is None


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_only_runtime_and_pytorch_libraries_may_be_loaded(tmp_path):
    """DT_NEEDED is read as the loader reads it: a library linked by file name (a foreign BLAS) is named and
    rejected, whatever its symbols are called; the C runtime and OpenMP are not. A vendor library is allowed where
    the policy allows vendor libraries, and an unknown one never."""
    dep = tmp_path / "libfoo_blas.so"
    other = tmp_path / "libsneaky.so"
    for lib in (dep, other):
        (tmp_path / "d.c").write_text("int helper_fn(int x) { return x + 1; }\n")
        subprocess.run([CXX, "-shared", "-fPIC", str(tmp_path / "d.c"), "-o", str(lib)], check=True)
    (tmp_path / "k.cpp").write_text('extern "C" int helper_fn(int);\nint kernel(int x) { return helper_fn(x); }\n')
    ext = tmp_path / "mc_ext.so"
    subprocess.run([CXX, "-shared", "-fPIC", str(tmp_path / "k.cpp"), "-o", str(ext), "-Wl,--no-as-needed",
                    f"-L{tmp_path}", "-l:libfoo_blas.so", "-l:libsneaky.so", "-lgomp"], check=True)
    needed = needed_libraries(ext)
    assert {"libfoo_blas.so", "libsneaky.so"} <= set(needed) and any(n.startswith("libc.so") for n in needed)
    got = " | ".join(library_violations(ext))
    assert "loads the library libfoo_blas.so" in got and "loads the library libsneaky.so" in got, got
    assert "libc.so" not in got and "libgomp" not in got and "libstdc++" not in got, got
    lenient = " | ".join(library_violations(ext, allow_vendor_libs=True))
    assert "libfoo_blas.so" not in lenient and "libsneaky.so" in lenient, lenient
    obj = tmp_path / "k.o"
    subprocess.run([CXX, "-c", str(tmp_path / "k.cpp"), "-o", str(obj)], check=True)
    assert needed_libraries(obj) == []  # an object file loads nothing


def test_what_the_glue_baseline_imports_is_not_held_against_the_candidate(tmp_path):
    """A forbidden name that an extension with no code of its own imports (pybind11's glue of another torch) is the
    toolchain's; the rest stays forbidden, and the baseline is asked for only when something is."""
    from musacoder.legality.glue import Baseline

    lib = tmp_path / "mc_ext.so"
    lib.write_bytes(_elf(["expf", "PyEval_GetGlobals", "_ZN2at4_ops2mm4callEv"]))
    calls = []

    def glue(symbols):
        def get():
            calls.append(1)
            return Baseline(frozenset(symbols), frozenset())
        return get

    assert len(library_violations(lib)) == 2
    got = library_violations(lib, glue=glue({"PyEval_GetGlobals"}))
    assert len(got) == 1 and "aten::mm" in got[0] and calls == [1]
    assert len(library_violations(lib, glue=glue(set()))) == 2
    clean = tmp_path / "mc_clean.so"
    clean.write_bytes(_elf(["expf"]))
    calls.clear()
    assert library_violations(clean, glue=glue(set())) == [] and calls == []


def test_a_kept_glue_baseline_is_read_only_when_nobody_else_could_have_written_it(tmp_path, monkeypatch):
    import json
    import os

    from musacoder.legality import glue as g

    built = []

    def fake_build(workdir):
        built.append(workdir)
        return g.Baseline(frozenset({"PyDict_Next"}), frozenset())

    monkeypatch.setattr(g, "build_baseline", fake_build)
    g.glue_baseline.cache_clear()
    assert g.glue_baseline(tmp_path).symbols == {"PyDict_Next"} and len(built) == 1
    kept = tmp_path / "glue" / f"{g.environment_key()}.json"
    assert json.loads(kept.read_text())["symbols"] == ["PyDict_Next"]
    g.glue_baseline.cache_clear()
    assert g.glue_baseline(tmp_path).symbols == {"PyDict_Next"} and len(built) == 1  # read back, not rebuilt
    # widened by someone who could write it: not read, built again
    kept.write_text(json.dumps({"symbols": ["PyDict_Next", "_ZN2at4_ops2mm4callEv"], "needed": []}))
    os.chmod(kept, 0o666)
    g.glue_baseline.cache_clear()
    assert g.glue_baseline(tmp_path).symbols == {"PyDict_Next"} and len(built) == 2
    g.glue_baseline.cache_clear()


def test_a_glue_baseline_that_does_not_build_leaves_the_rule_as_strict_as_its_lists(tmp_path, monkeypatch):
    from musacoder.legality import glue as g

    monkeypatch.setattr(g, "_CHILD", "raise SystemExit('no compiler here')")
    got = g.build_baseline(tmp_path / "b")
    assert got.symbols == frozenset() and "did not build" in got.error and "no compiler here" in got.error


@pytest.mark.slow
@pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")
def test_the_glue_of_the_installed_torch_imports_nothing_the_lists_forbid(tmp_path):
    """The deny-lists against the toolchain that runs the tests: an extension with no code of its own must pass
    them without a baseline. When a new torch (its pybind11) makes this fail, the baseline keeps verdicts right, and
    the lists need the names it prints."""
    from musacoder.legality.glue import build_baseline

    base = build_baseline(tmp_path / "glue")
    assert base.error is None, base.error
    assert any(s.startswith("Py") for s in base.symbols), sorted(base.symbols)[:20]
    assert {s: why for s in base.symbols if (why := symbol_violation(s))} == {}


def test_doctor_names_the_glue_imports_the_lists_forbid(tmp_path, monkeypatch):
    from musacoder.legality import glue

    def kept(symbols, error=None):
        return lambda cache_dir: glue.Baseline(frozenset(symbols), frozenset(), error)

    monkeypatch.setattr(glue, "glue_baseline", kept({"PyGILState_Ensure", "memcpy"}))
    assert glue.report(tmp_path).endswith("2 imports of an extension with no code of its own; none on the rule's lists")
    monkeypatch.setattr(glue, "glue_baseline", kept({"PyGILState_Ensure", "PyEval_GetGlobals"}))
    assert glue.report(tmp_path).endswith("1 on the rule's lists, not held against candidates: PyEval_GetGlobals")
    monkeypatch.setattr(glue, "glue_baseline", kept((), "the glue baseline did not build: no compiler"))
    assert "none (the glue baseline did not build: no compiler)" in glue.report(tmp_path)


def test_the_glue_baseline_is_kept_per_compiler(monkeypatch, tmp_path):
    from musacoder.legality.glue import environment_key

    fake = tmp_path / "c++"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CXX", str(fake))
    before = environment_key()
    fake.write_text("#!/bin/sh\n# upgraded in place\n")
    assert environment_key() != before
    monkeypatch.setenv("CXX", "/nowhere/c++")
    assert environment_key() != before


def test_a_glue_folder_of_another_user_is_not_used(tmp_path, monkeypatch):
    import os

    from musacoder.legality import glue as g

    built = []
    monkeypatch.setattr(g, "build_baseline", lambda workdir: built.append(workdir) or g.Baseline(frozenset({"x"}),
                                                                                                  frozenset()))
    (tmp_path / "glue").mkdir()
    monkeypatch.setattr(g.os, "getuid", lambda: os.stat(tmp_path / "glue").st_uid + 1)
    g.glue_baseline.cache_clear()
    assert g.glue_baseline(tmp_path).symbols == {"x"}
    assert len(built) == 1 and not built[0].is_relative_to(tmp_path)  # built elsewhere, nothing written there
    assert list((tmp_path / "glue").iterdir()) == []
    g.glue_baseline.cache_clear()


def test_a_glue_baseline_that_cannot_be_made_is_an_error_never_an_exception(tmp_path, monkeypatch):
    """The binary rule reads an OSError as an unreadable library (not judged), so the baseline may not raise one."""
    import tempfile

    from musacoder.legality import glue as g

    def no_room(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(g, "_kept_or_built", no_room)
    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_room)
    g.glue_baseline.cache_clear()
    got = g.glue_baseline(tmp_path)
    g.glue_baseline.cache_clear()
    assert got.symbols == frozenset() and "No space left" in got.error
    lib = tmp_path / "mc_ext.so"
    lib.write_bytes(_elf(["_ZN2at4_ops2mm4callEv"]))
    assert len(library_violations(lib, glue=lambda: got)) == 1
