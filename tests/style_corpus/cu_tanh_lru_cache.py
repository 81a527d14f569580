import functools

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>

#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

__global__ void tanh_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        y[i] = make_float4(tanhf(v.x), tanhf(v.y), tanhf(v.z), tanhf(v.w));
    }
}

__global__ void tanh_tail(const float* x, float* y, int64_t start, int64_t n) {
    int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = tanhf(x[i]);
}

torch::Tensor tanh_fwd(torch::Tensor x) {
    CHECK_INPUT(x);
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    int64_t n4 = n / 4;
    if (n4 > 0) {
        tanh_kernel<<<(n4 + 255) / 256, 256>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()),
                                               reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    }
    int64_t rest = n - n4 * 4;
    if (rest > 0) {
        tanh_tail<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    }
    return y;
}
"""


@functools.lru_cache(maxsize=None)
def _ext():
    return load_inline(name="tanh_vec4", cpp_sources="torch::Tensor tanh_fwd(torch::Tensor x);",
                       cuda_sources=_src, functions=["tanh_fwd"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().tanh_fwd(x.contiguous())
