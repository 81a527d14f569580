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
"""

ext = load_inline(name="input_grow", cpp_sources=src, functions=["relu_fwd", "grow"])


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
    (out / "lazy_detach.py").write_text(LAZY_DETACH)
    (out / "bundled_sgemm.py").write_text(BUNDLED_SGEMM)
    print(f"wrote {len(CANDIDATES) + 12} candidates to {out}")
