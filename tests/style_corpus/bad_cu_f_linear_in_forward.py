import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
__global__ void mul_leaky(float* y, float mult, float slope, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = y[i] * mult; y[i] = v > 0.f ? v : v * slope; }
}
torch::Tensor epilogue(torch::Tensor y, double mult, double slope) {
    int n = y.numel();
    mul_leaky<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), (float)mult, (float)slope, n);
    return y;
}
"""

ext = load_inline(name="epi_only", cpp_sources="torch::Tensor epilogue(torch::Tensor y, double mult, double slope);",
                  cuda_sources=src, functions=["epilogue"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.01)
        self.bias = nn.Parameter(torch.zeros(out_features))
        self.multiplier, self.negative_slope = multiplier, negative_slope

    def forward(self, x):
        y = F.linear(x, self.weight, self.bias)
        return ext.epilogue(y, self.multiplier, self.negative_slope)
