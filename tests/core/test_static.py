"""Static legality rules on small snippets (no build)."""

import pytest

from musacoder.legality.static import check_static

HEAD = """import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
src = r'''#include <torch/extension.h>
torch::Tensor f(torch::Tensor x) { return x; }'''
ext = load_inline(name="e", cpp_sources=src, functions=["f"])
"""


def rules(body, backend="cpu", head=HEAD, **kw):
    return check_static(head + body, backend, **kw).violations


def test_legit_plumbing_passes():
    body = """
class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)

    def forward(self, x):
        x = x.contiguous().view(x.size(0), -1)
        out = torch.empty_like(x)
        return self._run(x, out)

    def _run(self, x, out):
        return ext.f(x, self.linear.weight, self.linear.bias, out)
"""
    assert rules(body) == []


@pytest.mark.parametrize("expr,phrase", [
    ("torch.matmul(x, x)", "torch.matmul"),
    ("x.sum()", ".sum()"),
    ("x @ x", "@ operator"),
    ("torch.nn.functional.gelu(x)", "torch.nn.functional.gelu"),
    ("self.helper(x)", "torch.softmax"),
])
def test_compute_in_forward_path(expr, phrase):
    body = f"""
class ModelNew(nn.Module):
    def helper(self, x):
        return torch.softmax(x, 0)

    def forward(self, x):
        ext.f(x)
        return {expr}
"""
    assert any(phrase in v for v in rules(body)), rules(body)


def test_module_level_helper_is_followed():
    body = """
def fallback(x):
    return torch.relu(x)

class ModelNew(nn.Module):
    def forward(self, x):
        ext.f(x)
        return fallback(x)
"""
    assert any("torch.relu" in v for v in rules(body))


def test_no_kernel_called_is_a_decoy():
    body = """
class ModelNew(nn.Module):
    def forward(self, x):
        return x.view(-1)
"""
    assert any("decoy" in v for v in rules(body))


def test_backend_requirements():
    body = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
    assert any("cuda_sources" in v for v in rules(body, backend="cuda"))
    assert any("@triton.jit" in v for v in rules(body, backend="triton"))
    head = HEAD.replace('functions=["f"])', 'cuda_sources="__global__ void k(float* p) {}", functions=["f"])')
    assert rules(body, backend="cuda", head=head) == []
    assert any("C++ only" in v for v in rules(body, backend="cpu", head=head))


def test_triton_launch_counts():
    head = """import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass
"""
    body = """
class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 128),)](x, x.numel(), BLOCK=128)
        return out
"""
    assert rules(body, backend="triton", head=head) == []


@pytest.mark.parametrize("snippet,phrase", [
    ("import gc\n", "'gc'"),
    ("import ctypes\n", "'ctypes'"),
    ("import torch._dynamo\n", "torch._dynamo"),
    ("torch.allclose = lambda *a: True\n", "monkey-patching"),
    ("torch.cuda.Event.elapsed_time = lambda *a: 1.0\n", "monkey-patching"),
    ("nn.Module.__call__ = None\n", "monkey-patching"),
    ("s = torch.cuda.Stream()\n", "torch.cuda.Stream"),
    ("p = torch.profiler\n", "torch.profiler"),
    ("x = __import__('os')\n", "__import__"),
    ("import os\nos.system('ls')\n", "os.system"),
])
def test_forbidden_anywhere(snippet, phrase):
    body = snippet + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
    assert any(phrase in v for v in rules(body)), rules(body)


@pytest.mark.parametrize("native,phrase", [
    ("std::thread t([]{});", "threads"),
    ("system(\"ls\");", "processes"),
    ("FILE* f = fopen(\"/x\", \"w\");", "files"),
    ("cudaStreamCreate(&s);", "side streams"),
    ("cudaEvent_t a; cudaEventCreate(&a); float ms; cudaEventElapsedTime(&ms, a, a);", "events"),
    # GPU code loaded from a string at run time, and driver entry points looked up by name
    ("CUmodule m; cuModuleLoadData(&m, ptx);", "loads code"),
    ("void* f; cudaGetDriverEntryPoint(\"cuLaunchKernel\", &f, 0);", "loads code"),
    ("auto g = c10::impl::getDeviceGuardImpl(x.device().type()); g->elapsedTime(e0, e1, 0);", "events"),
    # the guard's timer reached through the registry, its method's name passed through a macro
    ("#define CALL(o, m) o->m(e0, e1, 0)\nauto g = c10::impl::device_guard_impl_registry[1].load(); CALL(g, record);",
     "events"),
    ("py::module_::import(\"torch\");", "Python"),
    ("#include <cublas_v2.h>", "vendor library"),
])
def test_native_sources(native, phrase):
    head = HEAD.replace("{ return x; }", "{ " + native + " return x; }")
    body = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
    assert any(phrase in v for v in rules(body, head=head)), rules(body, head=head)


def test_vendor_policy_switch():
    head = HEAD.replace("{ return x; }", "{ /* cublasSgemm */ return x; }")
    body = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
    assert rules(body, head=head, allow_vendor_libs=True) == []


def test_narrow_except_outside_forward_is_fine_but_broad_is_not():
    ok = "try:\n    import triton\nexcept ImportError:\n    triton = None\n"
    body = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
    assert not any("try" in v for v in rules(ok + body))
    bad = "try:\n    y = 1\nexcept Exception:\n    y = 2\n"
    assert any("broad try/except" in v for v in rules(bad + body))


def test_kernel_names_wherever_launch_bounds_and_qualifiers_stand():
    from musacoder.legality.static import kernel_names

    src = """
__global__ void __launch_bounds__(THREADS) gemm_kernel(const float* a) {}
template <int B> __global__ __launch_bounds__(256, (B > 1 ? 2 : 1)) void tiled (float* x) {}
extern "C" __global__ static void __noinline__ k3(int n) {}
__global__ void k4(float* __restrict__ a) {}
"""
    assert kernel_names(src) == ["gemm_kernel", "tiled", "k3", "k4"]


def test_raw_device_allocation_and_peak_reset_are_rejected():
    from pathlib import Path

    base = (Path(__file__).resolve().parents[2] / "examples" / "candidates" / "relu_cuda.py").read_text()
    raw = base.replace("auto out = torch::empty_like(xc);",
                       "float* hog; cudaMalloc(&hog, 1ull << 36);\n    auto out = torch::empty_like(xc);")
    r = check_static(raw, "cuda", False)
    assert any("outside PyTorch's allocator" in v for v in r.violations), r.violations
    reset = base.replace("import torch.nn as nn\n", "import torch.nn as nn\ntorch.cuda.reset_peak_memory_stats()\n")
    r = check_static(reset, "cuda", False)
    assert any("reset_peak_memory_stats" in v for v in r.violations), r.violations


def test_device_wide_cache_and_clock_settings_are_rejected():
    from pathlib import Path

    base = (Path(__file__).resolve().parents[2] / "examples" / "candidates" / "relu_cuda.py").read_text()
    for call in ("cudaStreamAttrValue a; a.accessPolicyWindow.num_bytes = 1 << 20;",
                 "cudaDeviceSetCacheConfig(cudaFuncCachePreferShared);",
                 "nvmlDeviceSetGpuLockedClocks(0, 300, 300);"):
        code = base.replace("auto out = torch::empty_like(xc);", call + "\n    auto out = torch::empty_like(xc);")
        r = check_static(code, "cuda", False)
        assert any("device-wide cache" in v for v in r.violations), (call, r.violations)


@pytest.mark.parametrize("init,call", [
    ("self.ext = ext", "self.ext.f(x)"),
    ("self.ext = ext", "self.ext.sum(x)"),  # a tensor-method name on the extension is the extension's function
    ("self.ops = {'a': ext}", "self.ops['a'].f(x)"),
    ("self.run = ext.f", "self.run(x)"),
    ("self.kernel = ext", "self.kernel.forward(x)"),
    ("self.ext = load_inline(name='g', cpp_sources=src, functions=['f'])", "self.ext.relu(x)"),
])
def test_extension_reached_through_self_is_a_kernel_call(init, call):
    body = f"""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, x):
        return {call}
"""
    rep = check_static(HEAD + body, "cpu")
    assert rep.violations == [] and rep.kernel_calls and rep.deferred == [], rep


def test_unresolved_call_is_deferred_not_rejected():
    body = """
def run(module, x):
    return module.fused_bias_gelu(x)

class ModelNew(nn.Module):
    def forward(self, x):
        return run(self.handle, x)
"""
    rep = check_static(HEAD + body, "cpu")
    assert rep.violations == [], rep.violations  # no provable decoy either: the run counts the kernel calls
    assert any("module.fused_bias_gelu" in d for d in rep.deferred), rep.deferred


@pytest.mark.parametrize("init,call,phrase", [
    ("self.f = torch.matmul", "self.f(x, x)", "torch.matmul"),
    ("self.f = nn.functional.relu", "self.f(x)", "torch.nn.functional.relu"),
    ("self.f = lambda t: t.exp()", "self.f(x)", ".exp()"),
    ("self.act = nn.ReLU()", "self.act.forward(x)", "calling submodule"),
    ("self.ops = [torch.sigmoid]", "self.ops[0](x)", "torch.sigmoid"),
    ("self.ext = ext", "x.softmax(0)", ".softmax()"),
])
def test_torch_compute_behind_an_alias_is_still_rejected(init, call, phrase):
    body = f"""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, x):
        ext.f(x)
        return {call}
"""
    rep = check_static(HEAD + body, "cpu")
    assert any(phrase in v for v in rep.violations), rep.violations


def test_local_variable_holding_the_extension_is_resolved():
    body = """
class ModelNew(nn.Module):
    def forward(self, x):
        torch_ops = ext
        return torch_ops.relu(x)
"""
    assert rules(body) == []


def test_a_call_the_analysis_cannot_follow_is_rejected_unless_a_parameter_hands_it_over():
    """Runtime evidence is collected in the profiled calls alone, and a candidate can tell those apart (the tenth
    round): a forward-path call the analysis cannot resolve is rejected, save one through a parameter of the function
    it stands in (a module or kernel handed over by a caller, which the caller's own call shows)."""
    body = """
class ModelNew(nn.Module):
    def __init__(self, ops):
        super().__init__()
        self.relu = ops[0]

    def forward(self, x):
        return self.relu(x)
"""
    rep = check_static(HEAD + body, "cpu")
    assert any("self.relu(...) is a call the analysis cannot follow" in v for v in rep.violations), rep
    handed = """
def run(module, x):
    return module.f(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return run(ext, x)
"""
    rep = check_static(HEAD + handed, "cpu")
    assert rep.violations == [] and rep.deferred == ["line 9: module.f(...)"], rep


_FWD = """
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
"""


@pytest.mark.parametrize("code,phrase", [
    # modules an allowed module imports, reached as its attributes: the way to sys.modules and the verifier itself
    ("import os\nm = os.sys.modules\n", "'sys'"),
    ("import typing\nm = typing.sys\n", "'sys'"),
    ("m = torch.sys.modules['importlib']\n", "'sys'"),
    ("t = torch\nm = t.sys\n", "'sys'"),  # an alias of an allowed module: caught by the name
    ("from torch import sys as s\n", "'sys'"),
    ("import warnings\nb = warnings.sys\n", "'sys'"),
    ("c = torch.utils.cpp_extension.subprocess\n", "'subprocess'"),
    ("o = torch.nn.functional.torch.overrides\n", "torch.overrides"),
    ("import os\ng = os.path.genericpath\n", "genericpath"),
    # private API and the builders the verifier does not hook
    ("w = torch.utils.cpp_extension._maybe_write\n", "private API"),
    ("from torch.utils.cpp_extension import BuildExtension\n", "cpp_extension.BuildExtension"),
    # load() builds only sources the candidate wrote from its own string literals
    ("e2 = torch.utils.cpp_extension.load(name='x', sources=['x.cpp'])\n", "not a file this candidate writes"),
    # getattr and eval under other names
    ("import operator\ns = operator.attrgetter('sys')(torch)\n", "attrgetter"),
    ("import typing\nh = typing.get_type_hints\n", "get_type_hints"),
    # tenth round: a string evaluated through a forward reference (any name, private ones included), and the
    # arithmetic of `operator` handed around as values
    ("import typing\nimport typing_extensions\nR = typing.get_args(typing.List['torch.ops.mkldnn'])[0]\n"
     "O = typing_extensions.evaluate_forward_ref(R)\n", "typing.get_args"),
    ("from typing_extensions import evaluate_forward_ref\n", "evaluate_forward_ref"),
    ("import functools\nimport operator\nmm = functools.partial(functools.reduce, operator.matmul)\n",
     "operator.matmul"),
    ("from operator import mul\n", "operator.mul"),
    # code loaded from elsewhere and worker processes
    ("h = torch.hub.load\n", "torch.hub"),
    ("from torch.utils.data import DataLoader\n", "torch.utils.data"),
    # scheduling of the process the reference is timed in
    ("import os\nos.sched_setaffinity(0, {0})\n", "sched_setaffinity"),
    ("import os\nos.nice(5)\n", "os.nice"),
    # tensor data out to NumPy or Python, behind any receiver
    ("def h(a):\n    return min([a]).numpy()\n", "NumPy"),
    ("def h(a):\n    return a.tolist()\n", "NumPy"),
    ("def h(a):\n    return torch.from_numpy(a)\n", "NumPy"),
    # an allowed module bound to another name first: followed through the assignment
    ("import enum\n_e = enum\n_b = _e.bltns\n", "'builtins'"),
    ("P = torch\nprof = P.profiler.profile\n", "torch.profiler"),
    # a PyTorch compute function kept as a value, out of the analysis' sight, for a fallback
    ("F = next(iter([torch.relu]))\n", "kept as a value"),
    ("import functools\nG = functools.partial(torch.nn.functional.gelu, approximate='tanh')\n", "kept as a value"),
    # reading the caller's stack: which code called forward (the timer, the profiler)
    ("import warnings\nc = warnings.catch_warnings\n", "warnings.catch_warnings"),
    ("def g():\n    yield 1\nh = g()\nf = h.gi_frame\n", "frames"),
    # a module handed on as a value (a list, an argument, a default) is past every rule keyed on its name
    ("import enum\nE = next(iter([enum]))\n", "used as a value"),
    ("def f(m=torch):\n    return m\n", "used as a value"),
])

def test_escapes_through_allowed_modules_are_rejected(code, phrase):
    got = rules(code + _FWD)
    assert any(phrase in v for v in got), got


def test_what_candidates_use_of_allowed_modules_still_passes():
    code = ("import warnings\nwarnings.warn('building')\nact = nn.ReLU\nkind = torch.float32\nmake = torch.empty\n"
            "import os\nimport math\narch = os.environ.get('TORCH_CUDA_ARCH_LIST', '9.0')\nroot = os.path.join(os.getcwd(), 'b')\n"
            "from torch.utils.cpp_extension import CUDA_HOME\nn = max(1, min(4, math.ceil(2.5)))\n")
    assert rules(code + _FWD) == []


_OPS = """
class ModelNew(nn.Module):
    def forward(self, x, y):
        n = x.size(0) * 2 + len(x.shape) - 1
        out = torch.empty_like(x)
        if n > 4 and x.dim() == 2:
            ext.f(out)
        return {expr}
"""


@pytest.mark.parametrize("expr", ["x * (x > 0)", "out + y", "-x", "x.view(-1) * 2", "out[0] / 3", "abs(x) ** 2"])
def test_python_operators_on_tensors_in_forward_are_compute(expr):
    got = rules(_OPS.replace("{expr}", expr))
    assert any("arithmetic on the tensor" in v for v in got), got


def test_operators_on_sizes_are_plumbing():
    assert rules(_OPS.replace("{expr}", "out")) == []


_KERNEL_RESULT = """
class ModelNew(nn.Module):
    def forward(self, x):
        y = ext.f(x)
        if ext.watched():
            return y
        n = ext.count(x) + 1
        return {expr}
"""


@pytest.mark.parametrize("expr", ["y * (y > 0)", "ext.f(x) + 1", "-y[0]", "max(y, x.new_zeros(1))"])
def test_python_operators_on_what_a_kernel_returns_are_compute(expr):
    """An extension function's result is a tensor to the operator rules (tenth round: a kernel that returned its
    input untouched, then `y * (y > 0)` in the calls the profiler did not watch), unless its C++ returns a scalar."""
    head = HEAD.replace("torch::Tensor f(torch::Tensor x) { return x; }",
                        "torch::Tensor f(torch::Tensor x) { return x; }\nbool watched() { return false; }\n"
                        "static inline int64_t count(torch::Tensor x) { return x.numel(); }")
    got = rules(_KERNEL_RESULT.replace("{expr}", expr), head=head)
    assert any("arithmetic on the tensor" in v for v in got), got
    assert rules(_KERNEL_RESULT.replace("{expr}", "y.view(n - 1)"), head=head) == []


_HELPERS = """
import functools
import itertools


def h(t):
    return t * (t > 0)


class Helper:
    def run(self, t):
        return t * (t > 0)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        {body}
"""


@pytest.mark.parametrize("body", [
    "return h(x)", "return h(t=ext.f(x))", "return h(*[ext.f(x)])", "return Helper().run(ext.f(x))",
    "return (lambda t: t * (t > 0))(ext.f(x))",
    "a, b = ext.f(x), 1\n        return a * (a > 0)",
    "return [t * (t > 0) for t in [ext.f(x)]][0]",
    "self.y = ext.f(x)\n        return self.y * (self.y > 0)",
    "for t in (x,):\n            return t * (t > 0)",
])
def test_tensors_are_followed_into_helpers_loops_unpacking_and_attributes(body):
    """Tenth round: with a test for a watched call in hand, a candidate computed with Python operators only where
    the profiler did not look, on values the operator rules did not follow (a helper's parameter, a lambda's, a
    loop's or an unpacking's target, `self.y`, an input rebound by `x = x.contiguous()`)."""
    got = rules(_HELPERS.replace("{body}", body))
    assert any("arithmetic on the tensor" in v for v in got), got


@pytest.mark.parametrize("body,phrase", [
    ("return next(itertools.starmap(type(x).matmul, [(x, x)]))", "type(x).matmul"),
    ("return functools.reduce(max, [ext.f(x), x.new_zeros(())])", "builtin max passed as a function"),
])
def test_tensor_ops_taken_as_values_are_rejected(body, phrase):
    got = rules(_HELPERS.replace("{body}", body))
    assert any(phrase in v for v in got), got


def test_a_helper_given_sizes_stays_plumbing():
    body = "n = x.numel()\n        blocks = (lambda m, b: (m + b - 1) // b)(n, 256)\n        return ext.f(x, blocks)"
    assert rules(_HELPERS.replace("{body}", body)) == []


def test_the_storage_of_a_tensor_is_not_plumbing():
    got = rules(_OPS.replace("{expr}", "out").replace("return out", "s = out.untyped_storage()\n        return out"))
    assert any(".untyped_storage()" in v for v in got), got


@pytest.mark.parametrize("native,phrase", [
    ("unsigned long long t = __rdtsc();", "time"),
    ("double t = omp_get_wtime();", "time"),
    ("extern char** environ; environ[0] = 0;", "environment"),
    ("mallopt(-3, 65536);", "allocator"),
    ("struct sigaction sa; sigaction(11, &sa, nullptr);", "signals"),
    ("mprotect(p, 4096, 0);", "signals"),
    ("auto t = torch::from_blob(p, {4});", "foreign memory"),
    ("clone(fn, stack, 0, nullptr);", "threads"),
    ("bool watched = at::hasCallbacks();", "profiler"),
    # tenth round: the dispatcher's own test for a watched call, its header, and the heap the profiler's records grow
    ("bool watched() { return at::getStepCallbacksUnlessEmpty(at::RecordScope::FUNCTION).has_value(); }", "profiler"),
    ("#include <ATen/record_function.h>", "profiler"),
    ("size_t heap() { return mallinfo2().uordblks; }", "profiler"),
    ("struct timespec ts; timespec_get(&ts, 1);", "time"),
    # the standard library's clocks named without std:: (using namespace std), and c10's clock helpers
    ("} using namespace std; void g() { auto t0 = chrono::steady_clock::now();", "time"),
    ("auto t0 = high_resolution_clock::now();", "time"),
    ("auto pair = c10::ApproximateClockToUnixTimeConverter::measurePair();", "time"),
    ("auto t0 = c10::getTime();", "time"),
    ("madvise(p, 1 << 20, 4);", "allocator"),
    # the device's and the CPU's own counters, in CUDA code or inline assembly
    ("long long t = clock64();", "time"),
    ("unsigned long long t; asm volatile(\"mov.u64 %0, %%global\" \"timer;\" : \"=l\"(t));", "GPU's clock"),
    ("unsigned int c; asm volatile(\"mov.u32 %0, %%clock;\" : \"=r\"(c));", "GPU's clock"),
    ("uint64_t v; asm volatile(\"mrs %0, cntvct_el0\" : \"=r\"(v));", "time"),
    # names hidden from the rules (rounds six and seven): token pasting and its digraph, a line splice, asm labels,
    # weakref attributes, namespace aliases; the Python C-API and pybind11's object API; registry setters
    ("PyObject* m = PySys_GetObject(\"modules\");", "calls back into Python"),
    ("pybind11::handle h(nullptr);", "calls back into Python"),
    ("c10::SetCPUAllocator(nullptr, 255);", "allocators"),
    ("int v = J(a, b);\n#define J(a, b) a##b", "token pasting"),
    ("int v = J(a, b);\n#define J(a, b) a%:%:b", "token pasting"),
    ("std::thr\\\nead t;", "spawns threads"),
    ("} extern \"C\" int my_open(const char*, int) __asm__(\"op\" \"en\"); void g() {", "asm labels"),
    ("} static int w() __attribute__((weakref(\"op\" \"en\"))); void g() {", "asm labels"),
    ("} namespace q = pybind11; void g() {", "aliases a PyTorch or pybind11 namespace"),
])
def test_native_sources_that_time_themselves_or_change_the_process_are_rejected(native, phrase):
    head = HEAD.replace("torch::Tensor f(torch::Tensor x) { return x; }",
                        "torch::Tensor f(torch::Tensor x) { " + native + " return x; }")
    got = check_static(head + _FWD, "cpu").violations
    assert any(phrase in v for v in got), got


@pytest.mark.parametrize("native", [
    'asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));',  # PTX in device code stays allowed
    'if (v > 0.f) asm("bar.sync 0;");',
])
def test_inline_asm_that_is_not_a_label_is_allowed(native):
    head = HEAD.replace("torch::Tensor f(torch::Tensor x) { return x; }",
                        "torch::Tensor f(torch::Tensor x) { float v = 0.f; const float* p = nullptr; " + native
                        + " return x; }")
    got = check_static(head + _FWD, "cpu").violations
    assert not any("asm labels" in v for v in got), got


@pytest.mark.parametrize("flags,phrase", [
    ('extra_ldflags=["-L/opt/lib", "-l:libfoo.so"]', "the link flag '-L/opt/lib'"),
    ('extra_ldflags=["-Wl,-rpath,/opt"]', "the link flag"),
    ('extra_ldflags=LDFLAGS', "must be a list of plain strings"),
    ('extra_cflags=["-fplugin=/tmp/p.so"]', "may not link, load plugins"),
    ('extra_cflags=["-include", "/tmp/x.h"]', "may not link, load plugins"),
])
def test_build_flags_beyond_compiling_the_candidates_own_source_are_rejected(flags, phrase):
    code = (HEAD + _FWD).replace("functions=[", flags + ", functions=[", 1)
    assert flags in code, "the test's candidate has no load_inline(functions=...) to add flags to"
    got = check_static("LDFLAGS = []\n" + code, "cpu").violations
    assert any(phrase in v for v in got), got


@pytest.mark.parametrize("flags", ['extra_ldflags=[""]', 'extra_ldflags=["-fopenmp"]', 'extra_ldflags=["-lcuda"]',
                                   'extra_cflags=["-O3", "-march=native", "-DNDEBUG"]'])
def test_ordinary_build_flags_are_allowed(flags):
    code = (HEAD + _FWD).replace("functions=[", flags + ", functions=[", 1)
    got = check_static(code, "cpu").violations
    assert not any("flag" in v for v in got), got


_TRITON = """import torch
import torch.nn as nn
import triton
import triton.language as tl
{pre}

@triton.jit
def relu_kernel(x_ptr, out_ptr, n, X: tl.constexpr, BLOCK: tl.constexpr):
    {body}


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        relu_kernel[(1,)](x, out, x.numel(), x, BLOCK=1024)
        return out
"""
_LOAD_STORE = ("offs = tl.arange(0, BLOCK)\n    v = tl.load(x_ptr + offs, mask=offs < n)\n"
               "    tl.store(out_ptr + offs, tl.where(v > 0, v, 0.0), mask=offs < n)")


@pytest.mark.parametrize("pre,body,phrase", [
    # Triton's interpreter (the triton backend on a CPU) runs a kernel's body as Python, with tensors passed as
    # tl.constexpr arriving as host tensors, and copies its own globals (`np`, `inspect` …) into the module
    ("", "np.maximum(np.array(X, copy=None), 0)", "the name 'np' is never defined"),
    ("", "X.copy_(torch.relu(X))", "the Triton kernel relu_kernel uses torch.relu"),
    ("import math", "X.copy_(torch.relu(X))", "uses torch.relu"),
    # Triton calls these with the launch's arguments, outside the forward path the rules walk
    ("def _hook(nargs):\n    nargs['out_ptr'].copy_(torch.relu(nargs['x_ptr']))\n",
     _LOAD_STORE, "torch.relu"),
])
def test_triton_kernel_bodies_and_launch_hooks_are_judged(pre, body, phrase):
    code = _TRITON.replace("{pre}", pre).replace("{body}", body)
    if "_hook" in pre:
        code = code.replace("@triton.jit", "@triton.autotune(configs=[triton.Config({'BLOCK': 1024}, pre_hook=_hook)], "
                                           "key=['n'])\n@triton.jit")
    got = check_static(code, "triton").violations
    assert any(phrase in v for v in got), got


def test_an_honest_triton_kernel_with_a_heuristic_passes():
    code = _TRITON.replace("{pre}", "").replace("{body}", _LOAD_STORE).replace(
        "@triton.jit", "@triton.heuristics({'EVEN': lambda args: args['n'] % args['BLOCK'] == 0})\n@triton.jit")
    assert check_static(code, "triton").violations == []


# --- forms real kernel answers use (issue 37.5): accepted, with their near-variants still rejected ------------------

CUDA_HEAD = '''import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline
src = r"""#include <torch/extension.h>
__global__ void k(float* y, const float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }
torch::Tensor f(torch::Tensor x) { auto y = torch::empty_like(x); return y; }"""
ext = load_inline(name="e", cpp_sources="torch::Tensor f(torch::Tensor x);", cuda_sources=src, functions=["f"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3)
        self.ln = nn.LayerNorm(8)

    def forward(self, x, w=None):
'''


def cuda_rules(body, backend="cuda"):
    return check_static(CUDA_HEAD + body + "\n", backend).violations


@pytest.mark.parametrize("body", [
    "        if not x.is_cuda:\n            return F.conv2d(x, self.conv.weight)\n        return ext.f(x)",
    "        if not x.is_cuda:\n            return self.ln(x)\n        return ext.f(x)",
    "        if x.device.type != 'cuda':\n            return torch.relu(x)\n        return ext.f(x)",
    "        if x.device.type == 'cpu':\n            return torch.relu(x)\n        return ext.f(x)",
    "        if x.is_cpu:\n            return torch.relu(x)\n        return ext.f(x)",
    "        if not x.is_cuda or not w.is_cuda:\n            return torch.relu(x)\n        return ext.f(x)",
    "        if not x.is_cuda and x.numel() > 0:\n            return torch.relu(x)\n        return ext.f(x)",
    "        if x.is_cuda:\n            return ext.f(x)\n        else:\n            return F.relu(x)",
    "        return ext.f(x) if x.is_cuda else F.relu(x)",
    "        return F.relu(x) if not x.is_cuda else ext.f(x)",
])
def test_device_guard_on_an_input_is_dead_code_for_cuda(body):
    assert cuda_rules(body) == []


@pytest.mark.parametrize("body, phrase", [
    # the guarded branch is the one that runs on the GPU
    ("        if x.is_cuda:\n            return F.relu(x)\n        return ext.f(x)", "torch.nn.functional.relu"),
    # `or` with a test the verifier does not fix: the branch can run
    ("        if not x.is_cuda or x.numel() < 1024:\n            return torch.relu(x)\n        return ext.f(x)",
     "torch.relu"),
    # a guard on something other than an input's device
    ("        if not self.conv.weight.is_cuda:\n            return torch.relu(x)\n        return ext.f(x)", "torch.relu"),
    ("        if x.dtype != torch.float32:\n            return torch.relu(x)\n        return ext.f(x)", "torch.relu"),
    # the input moved to the CPU first: the guard is on a rebound name
    ("        x = x.cpu()\n        if not x.is_cuda:\n            return torch.relu(x)\n        return ext.f(x)",
     "torch.relu"),
    # a bare-except fallback stays illegal, guard or not
    ("        try:\n            return ext.f(x)\n        except Exception:\n            return F.relu(x)", "try/except"),
])
def test_device_guard_near_variants_stay_rejected(body, phrase):
    got = cuda_rules(body)
    assert any(phrase in v for v in got), got


def test_device_guard_is_pruned_only_for_the_cuda_backend():
    body = "        if not x.is_cuda:\n            return F.relu(x)\n        return ext.f(x)"
    got = check_static(HEAD + "import torch.nn.functional as F\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                       + body + "\n", "cpu").violations
    assert any("torch.nn.functional.relu" in v for v in got), got


@pytest.mark.parametrize("line", [
    "n = math.prod(x.shape)",
    "n = x.numel()",
    "n = int(torch.prod(torch.tensor(x.shape)).item())",
    "n = torch.tensor(x.size()).prod().item()",
    "n = math.prod(x.shape[1:])",
    "rows = x.shape[0] * x.shape[1]",
    "n = torch.prod(torch.tensor([x.size(0), x.size(1)]))",
    "shape = x.shape\n        n = math.prod(shape)",
])
def test_arithmetic_on_shapes_passes(line):
    assert cuda_rules(f"        {line}\n        return ext.f(x)") == []


def test_numpy_prod_on_a_shape_passes_and_nothing_else_of_numpy():
    head = "import numpy as np\n" + CUDA_HEAD
    ok = check_static(head + "        n = int(np.prod(x.shape))\n        return ext.f(x)\n", "cuda").violations
    assert ok == []
    bad = check_static(head + "        n = np.prod(x)\n        return ext.f(x)\n", "cuda").violations
    assert any("numpy.prod" in v and "x.shape" in v for v in bad), bad
    bad = check_static(head + "        n = np.sum(x.shape)\n        return ext.f(x)\n", "cuda").violations
    assert any("numpy.sum is not allowed" in v for v in bad), bad


@pytest.mark.parametrize("line, phrase", [
    ("return torch.prod(x)", "torch.prod(...) over tensor data"),
    ("return torch.prod(torch.tensor(x))", "torch.tensor(...)"),
    ("return math.prod(x)", "math.prod(...) over x"),
    ("return x.prod()", ".prod()"),
    ("return torch.tensor(x.shape).prod() * x", "arithmetic on the tensor"),
])
def test_products_over_data_stay_rejected(line, phrase):
    got = cuda_rules(f"        ext.f(x)\n        {line}")
    assert any(phrase in v for v in got), got


LOAD_FILE = '''import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

cuda_src = r"""#include <torch/extension.h>
__global__ void relu_k(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] > 0 ? x[i] : 0; }
torch::Tensor relu(torch::Tensor x) { auto y = torch::empty_like(x); int n = x.numel(); relu_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); return y; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }
"""
build_dir = os.path.join(os.getcwd(), "relu_build")
os.makedirs(build_dir, exist_ok=True)
src_path = os.path.join(build_dir, "relu_kernel.cu")
with open(src_path, "w") as f:
    f.write(cuda_src)
ext = load(name="relu_ext", sources=[src_path], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
'''


def test_cpp_extension_load_of_a_written_source_passes():
    assert check_static(LOAD_FILE, "cuda").violations == []
    lazy = LOAD_FILE.replace("with open(src_path", "def build():\n    with open(src_path").replace(
        "    f.write(cuda_src)\next = load(", "        f.write(cuda_src)\n    return load(").replace(
        "        return ext.relu(x)", "        return build().relu(x)")
    assert check_static(lazy, "cuda").violations == [], check_static(lazy, "cuda").violations


@pytest.mark.parametrize("old, new, phrase", [
    ("f.write(cuda_src)", "f.write(cuda_src.replace('0', '1'))", "open() may only write a native source"),
    ("sources=[src_path]", "sources=['/opt/elsewhere/k.cu']", "not a file this candidate writes"),
    ('"w") as f', '"a") as f', "open() may only write"),
    ("relu_kernel.cu", "relu_kernel.py", "open() may only write"),
    ("class ModelNew", "cuda_src = open('k.cu').read()\n\n\nclass ModelNew", "open() may only write"),
    ("sources=[src_path]", "sources=src_list", "needs sources=[...]"),
])
def test_cpp_extension_load_near_variants_stay_rejected(old, new, phrase):
    code = LOAD_FILE.replace(old, new)
    assert code != LOAD_FILE
    got = check_static(code, "cuda").violations
    assert any(phrase in v for v in got), got


def test_cpp_extension_load_backend_rules():
    cpu = LOAD_FILE.replace("relu_kernel.cu", "relu_kernel.cpp")
    assert any("needs a .cu source" in v for v in check_static(cpu, "cuda").violations)
    assert any("C++ only" in v for v in check_static(LOAD_FILE, "cpu").violations)


def test_runtime_allows_prod_only_over_a_handful_of_sizes():
    from types import SimpleNamespace

    from musacoder.legality.runtime import analyse_events

    def ev(shapes):
        return SimpleNamespace(name="aten::prod", device_type="DeviceType.CPU", is_user_annotation=False,
                               time_range=SimpleNamespace(elapsed_us=lambda: 0.0), cpu_parent=None,
                               input_shapes=shapes, kernels=[])

    assert analyse_events([ev([[4], []])]).illegal_ops == []
    assert analyse_events([ev([[4096], []])]).illegal_ops  # a vector of data, not of sizes
    assert analyse_events([ev([[4, 4], []])]).illegal_ops
    assert analyse_events([ev([])]).illegal_ops  # shapes not recorded: nothing proves it is sizes


def test_lineinfo_is_a_compile_flag_not_a_library():
    ok = CUDA_HEAD.replace('functions=["f"])', 'functions=["f"], extra_cuda_cflags=["-O3", "-lineinfo"])')
    assert ok != CUDA_HEAD
    assert check_static(ok + "        return ext.f(x)\n", "cuda").violations == []
    bad = ok.replace('"-lineinfo"', '"-lineinfo", "-lcublas"')
    assert any("may not link" in v for v in check_static(bad + "        return ext.f(x)\n", "cuda").violations)


def test_sizes_the_candidate_set_on_itself_are_not_shapes():
    body = "        return ext.f(x)\n"
    head = CUDA_HEAD.replace("        self.ln = nn.LayerNorm(8)", "        self.ln = nn.LayerNorm(8)\n        self.shape = torch.ones(3)")
    got = check_static(head.replace("    def forward(self, x, w=None):\n",
                                    "    def forward(self, x, w=None):\n        n = math.prod(self.shape)\n") + body,
                       "cuda").violations
    assert any("math.prod(...) over self.shape" in v for v in got), got
