import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

// sum over the middle axis of a [outer, r, inner] view, one thread per (outer, inner) pair
__global__ void sum_mid(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t r, int64_t inner) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= outer * inner) return;
    int64_t o = idx / inner, i = idx % inner;
    const float* p = x + o * r * inner + i;
    float acc = 0.f;
    for (int64_t k = 0; k < r; ++k) acc += p[k * inner];
    y[idx] = acc;
}

torch::Tensor sum_dim(torch::Tensor x, int64_t outer, int64_t r, int64_t inner, std::vector<int64_t> out_shape) {
    auto y = torch::empty(out_shape, x.options());
    int64_t n = outer * inner;
    sum_mid<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), outer, r, inner);
    return y;
}
"""

ext = load_inline(name="sum_dim_ext",
                  cpp_sources="torch::Tensor sum_dim(torch::Tensor x, int64_t outer, int64_t r, int64_t inner, std::vector<int64_t> out_shape);",
                  cuda_sources=src, functions=["sum_dim"])


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()
        outer = 1
        for s in x.shape[:d]:
            outer *= s
        r = x.size(d)
        inner = x.numel() // (outer * r)
        out_shape = list(x.shape)
        out_shape[d] = 1
        return ext.sum_dim(x, outer, r, inner, out_shape)
