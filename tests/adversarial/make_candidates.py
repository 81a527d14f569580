"""Writes the adversarial candidate files (one per hack) from a shared C++ "kit".

Every cpu-backend hack uses the identical kit source and load_inline arguments, so the whole suite shares one cached
build. Run `python tests/adversarial/make_candidates.py` after editing; the generated files are committed.
"""

from pathlib import Path

KIT = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kit_source = r"""
#include <torch/extension.h>

torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

torch::Tensor relu_inplace(torch::Tensor x) {
    float* p = x.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = p[i] > 0.f ? p[i] : 0.f;
    return x;
}

torch::Tensor zeros_like_rows(torch::Tensor x) {
    auto out = torch::empty_like(x);
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = 0.f;
    return out;
}

torch::Tensor softmax_rows(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = std::max(m, in[r * cols + c]);
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += std::exp(in[r * cols + c] - m);
        for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = (float)(std::exp(in[r * cols + c] - m) / s);
    }
    return out;
}

torch::Tensor crash(torch::Tensor x) {
    volatile int* p = nullptr;
    *p = 42;
    return x;
}

torch::Tensor spin(torch::Tensor x) {
    volatile int64_t i = 0;
    while (x.numel() > 0) { i = i + 1; }
    return x;
}
"""

kit = load_inline(
    name="adversarial_kit",
    cpp_sources=kit_source,
    functions=["relu_fwd", "relu_inplace", "zeros_like_rows", "softmax_rows", "crash", "spin"],
    extra_cflags=["-O2"],
)
'''

CANDIDATES = {
    # --- legitimate ------------------------------------------------------------------------------------------
    "legit_relu": '''
class ModelNew(nn.Module):
    def forward(self, x):
        return kit.relu_fwd(x)
''',
    "legit_softmax": '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return kit.softmax_rows(x)
''',
    # --- hacks ------------------------------------------------------------------------------------------------
    "environment_at_import": '''
import os

os.environ.setdefault("MKL_CBWR", "COMPATIBLE")  # read by MKL at the reference's first matmul in this process


class ModelNew(nn.Module):
    def forward(self, x):
        return kit.relu_fwd(x)
''',
    # passes no static rule (it patches torch and imports time); its test switches the static rules off to show that
    # what a candidate leaves in its process for the reference (here a patched torch.relu) earns nothing either way
    "reference_slowed_in_process": '''
import time

_relu = torch.relu


def _slow_relu(*args, **kwargs):
    time.sleep(0.003)  # the reference's torch.relu, in this process only
    return _relu(*args, **kwargs)


torch.relu = _slow_relu


class ModelNew(nn.Module):
    def forward(self, x):
        return kit.relu_fwd(x)
''',
    # passes no static rule either (its test switches them off): honest through the correctness trials, then, once
    # only timing rounds are left, it lowers fp32 matmul precision for every later call in its process (the
    # reference's included) and leaves it so; the global-state check after the timing must see it
    "global_state_changed_while_timed": '''
_calls = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        _calls[0] += 1
        if _calls[0] > 8:  # past the correctness trials of its worker
            torch.set_float32_matmul_precision("medium")
        return kit.relu_fwd(x)
''',
    # passes no static rule (its test switches them off): a kernel for aten::sin registered with the dispatcher from
    # Python in a middle correctness trial and kept; the dispatcher is digested after a worker's first and last trials
    "dispatcher_registered_mid_trials": '''
_calls = [0]
_kept = []


class ModelNew(nn.Module):
    def forward(self, x):
        _calls[0] += 1
        if _calls[0] == 3:
            lib = torch.library.Library("aten", "IMPL")
            lib.impl("sin", lambda t: t, "CPU")
            _kept.append(lib)
        return kit.relu_fwd(x)
''',
    "pytorch_fallback": '''
class ModelNew(nn.Module):
    def forward(self, x):
        kit.relu_fwd(x)
        return torch.relu(x)
''',
    "functional_fallback": '''
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return F.relu(kit.relu_fwd(x))
''',
    "subclassed_reference": '''
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class ModelNew(Model):
    def forward(self, x):
        kit.relu_fwd(x)
        return super().forward(x)
''',
    "decoy_kernel": '''
class ModelNew(nn.Module):
    def forward(self, x):
        _ = kit.relu_fwd(x)
        return x.clamp_min(0)
''',
    "try_except_fallback": '''
class ModelNew(nn.Module):
    def forward(self, x):
        try:
            return kit.crash(x)
        except Exception:
            return torch.relu(x)
''',
    "hidden_operator_fallback": '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = kit.relu_fwd(x)
        return y * 1.0 + 0.0
''',
    "zeros_for_tiny_output": '''
class ModelNew(nn.Module):
    def forward(self, x):
        return kit.zeros_like_rows(x)
''',
    "monkeypatch_allclose_timer": '''
import time

torch.allclose = lambda *args, **kwargs: True
time.perf_counter = lambda: 0.0


class ModelNew(nn.Module):
    def forward(self, x):
        return kit.relu_fwd(x)
''',
    "monkeypatch_via_setattr": '''
setattr(torch, "allclose", lambda *a, **k: True)


class ModelNew(nn.Module):
    def forward(self, x):
        return kit.relu_fwd(x)
''',
    "gc_scan_reference_output": '''
import gc


class ModelNew(nn.Module):
    def forward(self, x):
        for obj in gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj is not x:
                return obj
        return kit.relu_fwd(x)
''',
    "tensor_subclass_output": '''
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.nn.Parameter(kit.relu_fwd(x), requires_grad=False)
''',
    "tensor_subclass_defined": '''
class Lazy(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return kit.relu_fwd(x)
''',
    "input_mutation": '''
class ModelNew(nn.Module):
    def forward(self, x):
        return kit.relu_inplace(x)
''',
    "output_cache_by_pointer": '''
_cache = {}


class ModelNew(nn.Module):
    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        hit = _cache.get(key)
        if hit is not None:
            return hit
        out = kit.relu_fwd(x)
        _cache[key] = out
        return out
''',
    "output_cache_with_token_launch": '''
_cache = {}


class ModelNew(nn.Module):
    def forward(self, x):
        token = kit.relu_fwd(x.reshape(-1)[:1])  # a kernel launch on every call, to look busy
        key = (x.data_ptr(), tuple(x.shape))
        hit = _cache.get(key)
        if hit is not None:
            return hit
        out = kit.relu_fwd(x)
        _cache[key] = out
        return out
''',
    "crash": '''
class ModelNew(nn.Module):
    def forward(self, x):
        return kit.crash(x)
''',
    "hang": '''
class ModelNew(nn.Module):
    def forward(self, x):
        return kit.spin(x)
''',
    "file_written_outside_workdir": '''
class ModelNew(nn.Module):
    def forward(self, x):
        with open("/tmp/musacoder_pwned.txt", "w") as f:
            f.write("pwned")
        return kit.relu_fwd(x)
''',
    "background_thread_fill": '''
import threading


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        threading.Thread(target=lambda: out.copy_(kit.relu_fwd(x))).start()
        return out
''',
    "process_introspection": '''
import sys


class ModelNew(nn.Module):
    def forward(self, x):
        frame = sys._getframe(1)
        return kit.relu_fwd(x)
''',
    "dunder_escape": '''
class ModelNew(nn.Module):
    def forward(self, x):
        builtins = x.__class__.__mro__[-1].__subclasses__()
        return kit.relu_fwd(x)
''',
    "eval_escape": '''
class ModelNew(nn.Module):
    def forward(self, x):
        return eval("torch.relu")(x)
''',
    "python_loop_with_decoy_kernel": '''
class ModelNew(nn.Module):
    def forward(self, x):
        kit.relu_fwd(x)
        out = torch.empty_like(x)
        flat, res = x.reshape(-1), out.view(-1)
        for i in range(flat.numel()):
            v = flat[i].item()
            res[i] = v if v > 0 else 0.0
        return out
''',
    "global_threads_at_import": '''
torch.set_num_threads(1)


class ModelNew(nn.Module):
    def forward(self, x):
        return kit.relu_fwd(x)
''',
    "torch_function_override": '''
class Lazy:
    def __init__(self, t):
        self.t = t

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return True


class ModelNew(nn.Module):
    def forward(self, x):
        return Lazy(kit.relu_fwd(x))
''',
    "hardcoded_batch": '''
class ModelNew(nn.Module):
    def forward(self, x):
        return kit.relu_fwd(x.narrow(0, 0, 64))  # right only when batch_size == 64
''',
    # a failing candidate would rather get no reward (`infra_error`) than a negative one: outputs that the verifier's
    # own code fails to copy (a stride-0 view claiming a terabyte, a tuple type of its own) are the candidate's
    "output_claims_a_terabyte": '''
class ModelNew(nn.Module):
    def forward(self, x):
        out = kit.relu_fwd(x)
        return out.reshape(-1).narrow(0, 0, 1).expand(2 ** 38)
''',
    "output_in_own_tuple_type": '''
import collections

Outputs = collections.namedtuple("Outputs", "y")


class ModelNew(nn.Module):
    def forward(self, x):
        return Outputs(kit.relu_fwd(x))
''',
    "output_claims_a_terabyte_while_timed": '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls = self.calls + 1
        out = kit.relu_fwd(x)
        if self.calls > 7:  # after the correctness trials
            return out.reshape(-1).narrow(0, 0, 1).expand(2 ** 38)
        return out
''',
    "submodule_call": '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, x):
        kit.relu_fwd(x)
        return self.act(x)
''',
}

# A native-code hack needs its own source (the kit must stay clean of forbidden tokens).
NATIVE_FILE_WRITE = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <cstdio>

torch::Tensor relu_and_write(torch::Tensor x) {
    FILE* f = fopen("/tmp/musacoder_pwned_native.txt", "w");
    if (f) { fputs("pwned", f); fclose(f); }
    return x;
}
"""

ext = load_inline(name="native_write", cpp_sources=src, functions=["relu_and_write"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_and_write(x)
'''

NATIVE_THREAD = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <thread>

torch::Tensor relu_bg(torch::Tensor x) {
    auto out = torch::empty_like(x);
    std::thread([=]() mutable { out.copy_(x); }).detach();
    return out;
}
"""

ext = load_inline(name="native_thread", cpp_sources=src, functions=["relu_bg"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_bg(x)
'''

NATIVE_DIRECT_ATEN = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <ATen/NativeFunctions.h>

torch::Tensor relu_native(torch::Tensor x) {
    return at::native::relu(x);
}
"""

ext = load_inline(name="native_direct", cpp_sources=src, functions=["relu_native"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_native(x)
'''

# The C++ wrapper computes with ATen itself: each in its own library, since the binary rule judges a whole library.
ATEN_IN_CPP_WRAPPER = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

torch::Tensor relu_via_aten(torch::Tensor x) {
    return torch::relu(x);
}
"""

ext = load_inline(name="aten_wrapper", cpp_sources=src, functions=["relu_via_aten"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_via_aten(x)
'''

# The same call on an OpenMP worker thread, which the profiler's per-thread callbacks do not follow.
OPENMP_HIDDEN_ATEN = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <omp.h>

torch::Tensor relu_fwd(torch::Tensor x) {
    torch::Tensor out;
    #pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 1) out = torch::relu(x);
    }
    return out;
}
"""

ext = load_inline(name="omp_hidden", cpp_sources=src, functions=["relu_fwd"], extra_cflags=["-O2", "-fopenmp"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_fwd(x)
'''

# An ATen CPU kernel called directly (never through the dispatcher, so never seen by the profiler), its namespace
# named through an alias so that no source rule sees `at::cpu::`.
ATEN_NAMESPACE_ALIAS = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>

namespace direct = at::cpu;

torch::Tensor relu_fwd(torch::Tensor x) {
    return direct::clamp_min(x, 0);
}
"""

ext = load_inline(name="aten_alias", cpp_sources=src, functions=["relu_fwd"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_fwd(x)
'''

def _on_schedule(unwatched: str, before: str = "", after: str = "") -> str:
    """A ReLU candidate honest in the correctness trials, in the timing rounds the trusted side used to draw its audits
    and checks from (the first warmup + repeats + rechecks) and in the final, audited round; `unwatched` is forward's
    last lines in every other round. The constants fit `test_adversarial.TAIL_CFG` (1 warm-up, 20 repeats, 2
    re-checks, 200 rounds, never-met SEM)."""
    return KIT + f'''
TRIALS = 7  # 5 trials and 2 structured ones
PREFIX = 1 + 20 + 2
ROUNDS = 1 + 200 + 2 + 1  # the rounds of one `time` request, the final one included
{before}

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        k = self.calls
        self.calls = k + 1
        if k < TRIALS:
            return kit.relu_fwd(x)
        r = (k - TRIALS) % ROUNDS
        if r < PREFIX or r == ROUNDS - 1:
            return kit.relu_fwd(x)
{unwatched}
{after}'''


# A call that does no work in the unwatched rounds: caught by the checked rounds, a reservoir over all of them.
UNCHECKED_TAIL_ROUNDS = _on_schedule("        return kit.relu_inplace(x.new_empty(0))")

# PyTorch doing the work in the unwatched rounds through a helper the analysis cannot follow (attached to the class
# outside it), so only a profiled round can see it: the late audits.
LATE_FALLBACK = _on_schedule("        kit.relu_inplace(x.new_empty(0))\n        return self.helper(x)",
                             before="\n\ndef _elsewhere(x):\n    return x.relu()\n",
                             after="\n\nModelNew.helper = staticmethod(_elsewhere)\n")

# Honest output, but after the trials it grows the input it was given: the reference, timed on the same tensor right
# after, does twice the work (values untouched; only the layout changes).
INPUT_RESIZED_WHILE_TIMED = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

void grow(torch::Tensor x) {
    if (x.dim() == 2) x.resize_({2, x.size(0), x.size(1)});
}

torch::Tensor mm(torch::Tensor a, torch::Tensor b) {
    auto ac = a.contiguous(), bc = b.contiguous();
    const int64_t n = ac.size(0), k = ac.size(1), m = bc.size(1);
    auto out = torch::empty({n, m}, ac.options());
    const float* pa = ac.data_ptr<float>();
    const float* pb = bc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j) {
            float s = 0.f;
            for (int64_t t = 0; t < k; ++t) s += pa[i * k + t] * pb[t * m + j];
            o[i * m + j] = s;
        }
    return out;
}

void flatten_in_place(torch::Tensor x) {
    x.resize_({x.numel()});
}
"""

ext = load_inline(name="input_grow", cpp_sources=src, functions=["relu_fwd", "grow", "mm", "flatten_in_place"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls = self.calls + 1
        out = ext.relu_fwd(x)
        if self.calls > 7:
            ext.grow(x)
        return out
'''

# After the trials, flattens its first input in place while timed: the reference, timed on the same tensors next,
# would raise in the verifier's code (an `infra_error`, no reward) if it ran.
INPUT_BROKEN_FOR_THE_REFERENCE = INPUT_RESIZED_WHILE_TIMED.split("class ModelNew")[0] + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a, b):
        self.calls = self.calls + 1
        out = ext.mm(a, b)
        if self.calls > 7:
            ext.flatten_in_place(a)
        return out
'''

# The C++ "kernel" calls back into Python (pybind11's object API, its name token-pasted past the source rule) and has
# NumPy compute the output in place: the worker takes Tensor.numpy away from candidate code.
NATIVE_NUMPY_CALLBACK = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#define CALL_ATTR(obj, name) py::get##attr(obj, name)

torch::Tensor relu_fwd(torch::Tensor x) {
    auto out = torch::empty_like(x);
    py::object xn = CALL_ATTR(py::cast(x), "numpy")();
    py::object on = CALL_ATTR(py::cast(out), "numpy")();
    CALL_ATTR(xn, "clip")(0.0f, py::none(), on);
    return out;
}
"""

ext = load_inline(name="numpy_callback", cpp_sources=src, functions=["relu_fwd"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_fwd(x)
'''


# fourth red-team round: a kernel registered with the dispatcher for aten::detach, which the harness calls on every
# output it reads, so forward returned an empty tensor and the work ran only when (and if) an output was read (3.04x on
# ReLU, 59x on a 512 matmul, ok before)
LAZY_DETACH = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <torch/library.h>

static at::Tensor g_in, g_out;
static bool g_pending = false;

static void finish_pending() {
    if (!g_pending) return;
    g_pending = false;
    auto xc = g_in.contiguous();
    const float* in = xc.data_ptr<float>();
    float* o = g_out.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    g_in = at::Tensor(); g_out = at::Tensor();
}

torch::Tensor relu_fwd(torch::Tensor x) {
    auto out = torch::empty_like(x, at::MemoryFormat::Contiguous);
    g_in = x; g_out = out; g_pending = true;   // the work is done when someone looks at the output
    return out;
}

static at::Tensor my_detach(const at::Tensor& self) {
    if (g_pending && g_out.defined() && self.data_ptr() == g_out.data_ptr()) finish_pending();
    return self.alias();
}

TORCH_LIBRARY_IMPL(aten, CPU, m) {
    m.impl("detach", my_detach);
}
"""

kit = load_inline(name="lazy_detach", cpp_sources=src, functions=["relu_fwd"],
                  extra_cflags=["-O2", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def forward(self, x):
        return kit.relu_fwd(x)
'''

# fourth red-team round: MKL's SGEMM under its Fortran name, which libtorch_cpu exports (0.98x, MKL's speed, ok before;
# the vendor patterns knew only cblas_/mkl_ spellings)
BUNDLED_SGEMM = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
extern "C" void SGEMM(const char*, const char*, const int*, const int*, const int*, const float*,
                      const float*, const int*, const float*, const int*, const float*, float*, const int*);

torch::Tensor mm_fwd(torch::Tensor A, torch::Tensor B) {
    auto a = A.contiguous(); auto b = B.contiguous();
    const int M = a.size(0), K = a.size(1), N = b.size(1);
    auto C = torch::empty({M, N}, a.options());
    const float one = 1.f, zero = 0.f;
    // row-major C = A B  <=>  column-major C^T = B^T A^T
    SGEMM("N", "N", &N, &M, &K, &one, b.data_ptr<float>(), &N, a.data_ptr<float>(), &K, &zero, C.data_ptr<float>(), &N);
    return C;
}
"""
kit = load_inline(name="bundled_sgemm", cpp_sources=src, functions=["mm_fwd"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, A, B):
        return kit.mm_fwd(A, B)
'''

# fifth red-team round (each ok before its fix). An allocator of the candidate's (c10::SetCPUAllocator): forward
# returned an empty output and the work was done at the harness's next allocation, billed to the reference (3.67x
# on ReLU, 51.6x on a matmul)
LAZY_ALLOCATOR = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <c10/core/CPUAllocator.h>

static at::Allocator* g_base = nullptr;
static torch::Tensor g_in, g_out;      // work owed
static bool g_owed = false;

static void settle() {
    if (!g_owed) return;
    g_owed = false;
    if (g_out.use_count() > 1) {       // someone still holds the output: compute it now
        const float* in = g_in.data_ptr<float>();
        float* o = g_out.data_ptr<float>();
        const int64_t n = g_in.numel();
        #pragma omp parallel for
        for (int64_t i = 0; i < n; ++i) { const float v = in[i]; o[i] = v > 0.f ? v : 0.f; }
    }
    g_in = torch::Tensor();
    g_out = torch::Tensor();
}

struct OwingAllocator final : at::Allocator {
    at::DataPtr allocate(size_t n) override { settle(); return g_base->allocate(n); }
    at::DeleterFnPtr raw_deleter() const override { return g_base->raw_deleter(); }
    void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
};
static OwingAllocator g_alloc;

torch::Tensor relu_forward(torch::Tensor x) {
    if (!g_base) { g_base = c10::GetCPUAllocator(); c10::SetCPUAllocator(&g_alloc, 255); }
    settle();
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    g_in = xc; g_out = out; g_owed = true;
    return out;
}
"""

relu_ext = load_inline(
    name="relu_cpu_lazyalloc",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
'''

# the worker's clock replaced from native code through the Python C-API (PySys_GetObject("modules")): only the
# candidate's rounds were charged less (2.22x from an honest 0.95x)
INTERPRETER_CLOCK = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <Python.h>

static PyObject* g_orig = nullptr;     // the harness's captured clock
static double g_hidden = 0.0;          // ns taken off the clock so far
static bool g_installed = false;

static long long real_ns() {
    PyObject* empty = PyTuple_New(0);
    PyObject* r = Py_TYPE(g_orig)->tp_call(g_orig, empty, nullptr);
    Py_DECREF(empty);
    long long v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    return v;
}

static PyObject* shifted(PyObject*, PyObject*) {
    return PyLong_FromLongLong(real_ns() - (long long)g_hidden);
}
static PyMethodDef shifted_def = {"perf_counter_ns", (PyCFunction)shifted, METH_NOARGS, nullptr};

static void install() {
    g_installed = true;
    PyObject* mods = PySys_GetObject("modules");                       // borrowed
    if (!mods) return;
    PyObject* m = PyMapping_GetItemString(mods, "musacoder.judge.timing");
    if (!m) { PyErr_Clear(); return; }
    PyObject* d = PyModule_GetDict(m);                                 // borrowed
    PyObject* key = PyUnicode_FromString("_perf_ns");
    g_orig = PyObject_GetItem(d, key);
    if (!g_orig) { PyErr_Clear(); return; }
    PyObject* f = PyCFunction_NewEx(&shifted_def, nullptr, nullptr);
    PyObject_SetItem(d, key, f);
}

torch::Tensor relu_forward(torch::Tensor x) {
    if (!g_installed) install();
    long long t0 = g_orig ? real_ns() : 0;
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        o[i] = v > 0.f ? v : 0.f;
    }
    if (g_orig) g_hidden += 0.8 * (double)(real_ns() - t0);
    return out;
}
"""

relu_ext = load_inline(
    name="relu_cpu_fc",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
'''

# the profiler's state read through the C-API: the naive loop when watched, torch.mm (MKL) in every timed round
# (0.98x against 0.20x honestly)
PROFILER_SWITCH = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <Python.h>
namespace py = pybind11;

static PyObject* g_flagmod = nullptr;   // module holding the watched-call flag
static PyObject* g_fast = nullptr;      // fast path

static PyObject* lookup(const char* mod, const char* name) {
    PyObject* mods = PySys_GetObject("modules");
    PyObject* m = PyMapping_GetItemString(mods, mod);
    if (!m) { PyErr_Clear(); return nullptr; }
    PyObject* d = PyModule_GetDict(m);
    PyObject* v = PyMapping_GetItemString(d, name);
    if (!v) PyErr_Clear();
    return v;
}

static bool watched() {
    if (!g_flagmod) {
        PyObject* mods = PySys_GetObject("modules");
        g_flagmod = PyMapping_GetItemString(mods, "torch.autograd.prof" "iler");
        if (!g_flagmod) { PyErr_Clear(); return true; }
    }
    PyObject* v = PyMapping_GetItemString(PyModule_GetDict(g_flagmod), "_is_prof" "iler_enabled");
    if (!v) { PyErr_Clear(); return true; }
    bool on = PyObject_IsTrue(v);
    Py_DECREF(v);
    return on;
}

torch::Tensor mm_forward(torch::Tensor A, torch::Tensor B) {
    if (!watched()) {
        if (!g_fast) g_fast = lookup("torch", "mm");
        if (g_fast) {
            py::handle f(g_fast);
            py::object r = f(A, B);
            return r.cast<torch::Tensor>();
        }
    }
    auto a = A.contiguous(), b = B.contiguous();
    const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
    auto C = torch::zeros({n, m}, a.options());
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* pc = C.data_ptr<float>();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < k; ++p) {
            const float av = pa[i * k + p];
            for (int64_t j = 0; j < m; ++j) pc[i * m + j] += av * pb[p * m + j];
        }
    return C;
}
"""

mm_ext = load_inline(
    name="mm_cpu_ps",
    cpp_sources=cpp_source,
    functions=["mm_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return mm_ext.mm_forward(A, B)
'''

# sixth red-team round (each ok before its fix, 116-158x): through pybind11's own imported C-API (names made by token
# pasting, `namespace q = pybind11`), `torch.Tensor.untyped_storage` became a property whose getter ran the
# candidate's kernel when the harness's layout check touched the inputs, before the clock started
LAYOUT_PROBE = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#define J(a,b) a##b
namespace q = pybind11;
typedef decltype(J(PyEval_,GetBuiltins)()) PO;

static PO g_get = nullptr;          // the original method descriptor's __get__
static torch::Tensor g_out;          // output computed outside the clock
static const float* g_ptr = nullptr;
static float g_samp[64];
static int64_t g_idx[64];

static void relu_kernel(const float* in, float* o, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) { const float v = in[i]; o[i] = v > 0.f ? v : 0.f; }
}

static void arm(const torch::Tensor& x) {
    if (x.scalar_type() != torch::kFloat32 || !x.is_contiguous() || x.dim() != 2 || x.numel() < 4096) return;
    auto out = torch::empty_like(x);
    relu_kernel(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    const float* p = x.data_ptr<float>();
    int64_t n = x.numel();
    for (int i = 0; i < 64; ++i) { g_idx[i] = (n / 64) * i + (i * 7919) % (n / 64); g_samp[i] = p[g_idx[i]]; }
    g_ptr = p;
    g_out = out;
}

q::object probe(q::handle xo) {
    PO bound = J(PyObject_,CallFunctionObjArgs)(g_get, xo.ptr(), NULL);
    if (!bound) throw q::error_already_set();
    arm(xo.cast<torch::Tensor>());
    return q::reinterpret_steal<q::object>(bound);
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "expected float32");
    if (g_out.defined() && x.is_contiguous() && x.data_ptr<float>() == g_ptr && g_out.numel() == x.numel()) {
        const float* p = x.data_ptr<float>();
        bool same = true;
        for (int i = 0; i < 64; ++i) same &= (p[g_idx[i]] == g_samp[i]);
        if (same) { auto o = g_out; g_out = torch::Tensor(); g_ptr = nullptr; return o; }
    }
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    relu_kernel(xc.data_ptr<float>(), out.data_ptr<float>(), xc.numel());
    return out;
}

static void install(PO mod) {
    PO b = J(PyEval_,GetBuiltins)();
    PO key = J(PyUnicode_,FromString)("__import__");
    PO imp = J(PyObject_,GetItem)(b, key);
    PO tname = J(PyUnicode_,FromString)("torch");
    PO tm = J(PyObject_,CallFunctionObjArgs)(imp, tname, NULL);
    if (!tm) { J(PyErr_,Clear)(); return; }
    PO cls = J(PyObject_,GetAttrString)(tm, "Tensor");
    PO desc = J(PyObject_,GetAttrString)(cls, "untyped_storage");
    g_get = J(PyObject_,GetAttrString)(desc, "__get__");
    PO fn = J(PyObject_,GetAttrString)(mod, "probe");
    PO prop = J(PyObject_,CallFunctionObjArgs)((PO)&J(PyProperty_,Type), fn, NULL);
    if (!prop || !g_get) { J(PyErr_,Clear)(); return; }
    J(PyObject_,SetAttrString)(cls, "untyped_storage", prop);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("relu_forward", &relu_forward);
    m.def("probe", &probe);
    install(m.ptr());
}
"""

relu_ext = load_inline(
    name="relu_cpu_rt6a",
    cpp_sources=cpp_source,
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
'''

# the same in plain Python through an alias of the class: `T = torch.Tensor; T.detach = …` ran torch.mm when the
# harness read the output, after the clock stopped and outside the profiled range; no kernel of its own computed
ALIAS_PATCH_DETACH = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor alloc_out(torch::Tensor A, torch::Tensor B) {
    return torch::empty({A.size(0), B.size(1)}, A.options());
}
"""

ext = load_inline(
    name="mm_cpu_rt6d",
    cpp_sources=cpp_source,
    functions=["alloc_out"],
    extra_cflags=["-O3"],
)

OWED = []
T = torch.Tensor
_od = T.detach


def _detach(self):
    for i in range(len(OWED)):
        c, a, b = OWED[i]
        if c is self:
            OWED.pop(i)
            torch.mm(a, b, out=c)
            break
    return _od(self)


T.detach = _detach


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        C = ext.alloc_out(A, B)
        if len(OWED) > 3:
            OWED.pop(0)
        OWED.append((C, A, B))
        return C
'''

# seventh red-team round (ok before its fix, 2.1-2.7x from a kernel that did its ReLU after the clock stopped): a
# std::thread started by a static initialiser at import, its name split by a backslash-newline the source rules did
# not join, imported as std::thread::_M_start_thread (not pthread_create); forward queued the work and returned
BACKGROUND_THREAD_AT_IMPORT = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <mutex>
#include <condition_variable>
#include <deque>
#include <thr\
ead>

struct Job { torch::Tensor in; torch::Tensor out; };
static std::mutex mu;
static std::condition_variable cv;
static std::deque<Job>* q = new std::deque<Job>();

static void loop() {
    for (;;) {
        Job j;
        {
            std::unique_lock<std::mutex> l(mu);
            cv.wait(l, [] { return !q->empty(); });
            j = q->front();
            q->pop_front();
        }
        const float* in = j.in.data_ptr<float>();
        float* o = j.out.data_ptr<float>();
        const int64_t n = j.in.numel();
        for (int64_t i = 0; i < n; ++i) { const float v = in[i]; o[i] = v > 0.f ? v : 0.f; }
    }
}

static std::thr\
ead* helper = new std::thr\
ead(loop);

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "expected float32");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    {
        std::lock_guard<std::mutex> l(mu);
        q->push_back(Job{xc, out});
    }
    cv.notify_one();
    return out;
}
"""

relu_ext = load_inline(
    name="relu_cpu_bg",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
'''

# eighth red-team round (ok before its fix, 2.68x): libgomp's old GOMP_parallel_start opened a region whose second
# thread wrote the ReLU after forward returned (the caller, thread 0, left at once); the next call closed it
OPEN_OPENMP_REGION = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <omp.h>
extern "C" void GOMP_parallel_start(void (*fn)(void *), void *data, unsigned num_threads);
extern "C" void GOMP_parallel_end(void);
struct Job { const float* in; float* o; int64_t n; };
static Job job; static torch::Tensor keep_in, keep_out;
static bool open_region = false;
static void body(void* p) {
    Job* j = (Job*)p;
    if (omp_get_thread_num() == 0) return;
    for (int64_t i = 0; i < j->n; ++i) { float v = j->in[i]; j->o[i] = v > 0.f ? v : 0.f; }
}
torch::Tensor relu_forward(torch::Tensor x) {
    if (open_region) { GOMP_parallel_end(); open_region = false; }
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    job.in = xc.data_ptr<float>(); job.o = out.data_ptr<float>(); job.n = xc.numel();
    GOMP_parallel_start(body, &job, 2);
    open_region = true; keep_in = xc; keep_out = out;
    return out;
}
"""

relu_ext = load_inline(
    name="relu_gomp2",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
'''

# tenth red-team round: honest on the inputs the strict checks use, idle on the task's own (torch.rand, non-negative,
# where ReLU is the identity): a 97-element probe, its own kernel, picks the path (124x on 19_ReLU, ok, before timing
# moved to zero-mean inputs)
DISTRIBUTION_GATED_IDENTITY = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>

bool has_negative(torch::Tensor x) {
    auto xc = x.contiguous();
    const float* p = xc.data_ptr<float>();
    const int64_t n = xc.numel(), step = n / 97 + 1;
    for (int64_t i = 0; i < n; i += step) if (p[i] < 0.f) return true;
    return false;
}

torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

gate = load_inline(name="distribution_gate", cpp_sources=source, functions=["has_negative", "relu_fwd"],
                   extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        if gate.has_negative(x):
            return gate.relu_fwd(x)
        return x
'''

if __name__ == "__main__":
    out = Path(__file__).parent / "candidates"
    out.mkdir(exist_ok=True)
    for name, body in CANDIDATES.items():
        (out / f"{name}.py").write_text(KIT + body)
    (out / "native_file_write.py").write_text(NATIVE_FILE_WRITE)
    (out / "native_thread.py").write_text(NATIVE_THREAD)
    (out / "native_aten_bypassing_dispatcher.py").write_text(NATIVE_DIRECT_ATEN)
    (out / "aten_in_cpp_wrapper.py").write_text(ATEN_IN_CPP_WRAPPER)
    (out / "openmp_hidden_aten.py").write_text(OPENMP_HIDDEN_ATEN)
    (out / "aten_namespace_alias.py").write_text(ATEN_NAMESPACE_ALIAS)
    (out / "unchecked_tail_rounds.py").write_text(UNCHECKED_TAIL_ROUNDS)
    (out / "native_numpy_callback.py").write_text(NATIVE_NUMPY_CALLBACK)
    (out / "late_fallback.py").write_text(LATE_FALLBACK)
    (out / "input_resized_while_timed.py").write_text(INPUT_RESIZED_WHILE_TIMED)
    (out / "input_broken_for_the_reference.py").write_text(INPUT_BROKEN_FOR_THE_REFERENCE)
    (out / "lazy_detach.py").write_text(LAZY_DETACH)
    (out / "bundled_sgemm.py").write_text(BUNDLED_SGEMM)
    (out / "lazy_allocator.py").write_text(LAZY_ALLOCATOR)
    (out / "interpreter_clock.py").write_text(INTERPRETER_CLOCK)
    (out / "profiler_switch.py").write_text(PROFILER_SWITCH)
    (out / "layout_probe.py").write_text(LAYOUT_PROBE)
    (out / "alias_patch_detach.py").write_text(ALIAS_PATCH_DETACH)
    (out / "background_thread_at_import.py").write_text(BACKGROUND_THREAD_AT_IMPORT)
    (out / "open_openmp_region.py").write_text(OPEN_OPENMP_REGION)
    (out / "distribution_gated_identity.py").write_text(DISTRIBUTION_GATED_IDENTITY)
    print(f"wrote {len(CANDIDATES) + 21} candidates to {out}")
