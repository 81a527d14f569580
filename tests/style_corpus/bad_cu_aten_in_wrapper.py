import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
__global__ void leaky(float* y, float mult, float slope, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) { float v = y[i] * mult; y[i] = v > 0.f ? v : v * slope; }
}
torch::Tensor fused(torch::Tensor x, torch::Tensor w, torch::Tensor b, double mult, double slope) {
    auto y = torch::addmm(b, x, w.t());  // the GEMM is the library's
    long n = y.numel();
    leaky<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), (float)mult, (float)slope, n);
    return y;
}
"""

ext = load_inline(name="addmm_wrapper", cpp_sources="torch::Tensor fused(torch::Tensor x, torch::Tensor w, torch::Tensor b, double mult, double slope);",
                  cuda_sources=src, functions=["fused"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        lin = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(lin.weight.detach().clone())
        self.bias = nn.Parameter(lin.bias.detach().clone())
        self.multiplier, self.negative_slope = multiplier, negative_slope

    def forward(self, x):
        return ext.fused(x, self.weight, self.bias, self.multiplier, self.negative_slope)
