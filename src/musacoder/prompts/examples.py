"""One worked example per backend for the optional few-shot prompt: a tiny elementwise reference and its ModelNew.

Written for this project; the reference is `a * b + 1`, small enough to show the format without suggesting tricks.
"""

EXAMPLE_REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * b + 1.0


n = 1 << 20


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []
'''

_CPU = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor mul_add_one(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "a and b must have the same shape");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32, "expected float32");
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(a_c);
    const float* pa = a_c.data_ptr<float>();
    const float* pb = b_c.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = a_c.numel();
    for (int64_t i = 0; i < n; ++i) {
        po[i] = pa[i] * pb[i] + 1.0f;
    }
    return out;
}
"""

mul_add_one_ext = load_inline(name="mul_add_one_ext", cpp_sources=cpp_source, functions=["mul_add_one"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return mul_add_one_ext.mul_add_one(a, b)
'''

_CUDA = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void mul_add_one_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] * b[i] + 1.0f;
    }
}

torch::Tensor mul_add_one(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "expected CUDA tensors");
    TORCH_CHECK(a.sizes() == b.sizes(), "a and b must have the same shape");
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(a_c);
    const int64_t n = a_c.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    mul_add_one_kernel<<<blocks, threads>>>(a_c.data_ptr<float>(), b_c.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

cpp_source = "torch::Tensor mul_add_one(torch::Tensor a, torch::Tensor b);"

mul_add_one_ext = load_inline(name="mul_add_one_ext", cpp_sources=cpp_source, cuda_sources=cuda_source,
                              functions=["mul_add_one"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return mul_add_one_ext.mul_add_one(a, b)
'''

_TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mul_add_one_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a * b + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        grid = (triton.cdiv(n, 1024),)
        mul_add_one_kernel[grid](a, b, out, n, BLOCK=1024)
        return out
'''

def _musa_example() -> str:
    """The CUDA example ported by the documented CUDA → MUSA table (musacoder.port), so the two stay in step."""
    from musacoder.port.python import translate_python

    return translate_python(_CUDA)[0].replace("expected CUDA tensors", "expected MUSA tensors") \
        .replace("cuda_source", "musa_source")


EXAMPLE_SOLUTIONS: dict[str, str] = {"cpu": _CPU, "cuda": _CUDA, "triton": _TRITON, "musa": _musa_example()}
