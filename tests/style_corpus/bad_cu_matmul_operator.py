import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
__global__ void bias_leaky(float* y, const float* b, float mult, float slope, int N, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) { float v = (y[i] + b[i % N]) * mult; y[i] = v > 0.f ? v : v * slope; }
}
torch::Tensor epi(torch::Tensor y, torch::Tensor b, double mult, double slope) {
    long n = y.numel(); bias_leaky<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), b.data_ptr<float>(), (float)mult, (float)slope, b.numel(), n);
    return y;
}
"""

ext = load_inline(name="epi_matmul_op", cpp_sources="torch::Tensor epi(torch::Tensor y, torch::Tensor b, double mult, double slope);",
                  cuda_sources=src, functions=["epi"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier, self.negative_slope = multiplier, negative_slope

    def forward(self, x):
        return ext.epi(x @ self.gemm.weight.t(), self.gemm.bias, self.multiplier, self.negative_slope)
