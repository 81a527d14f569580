import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ln_src = r"""
#include <torch/extension.h>

// one block per row of length D, Welford-free two-pass mean/var in double for the sum
__global__ void layernorm_rows(const float* __restrict__ x, const float* __restrict__ g, const float* __restrict__ b,
                               float* __restrict__ y, int64_t D, float eps) {
    __shared__ double s1[256];
    __shared__ double s2[256];
    const float* row = x + blockIdx.x * D;
    double a = 0.0, q = 0.0;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) { double v = row[i]; a += v; q += v * v; }
    s1[threadIdx.x] = a; s2[threadIdx.x] = q;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) { s1[threadIdx.x] += s1[threadIdx.x + s]; s2[threadIdx.x] += s2[threadIdx.x + s]; }
        __syncthreads();
    }
    double mean = s1[0] / D;
    double var = s2[0] / D - mean * mean;
    float rstd = (float)rsqrt(var + (double)eps);
    float* out = y + blockIdx.x * D;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
        out[i] = ((row[i] - (float)mean) * rstd) * g[i] + b[i];
}

torch::Tensor layernorm(torch::Tensor x, torch::Tensor g, torch::Tensor b, double eps) {
    auto xc = x.contiguous();
    int64_t D = g.numel();
    int64_t rows = xc.numel() / D;
    auto y = torch::empty_like(xc);
    layernorm_rows<<<rows, 256>>>(xc.data_ptr<float>(), g.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(),
                                  D, (float)eps);
    return y;
}
"""

ln_ext = load_inline(name="ln_rows", cpp_sources="torch::Tensor layernorm(torch::Tensor x, torch::Tensor g, torch::Tensor b, double eps);",
                     cuda_sources=ln_src, functions=["layernorm"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu":
            return self.ln(x)
        return ln_ext.layernorm(x, self.ln.weight.contiguous(), self.ln.bias.contiguous(), self.ln.eps)
