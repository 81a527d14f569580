import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
__global__ void gk(const float* x, float* y, long n) { long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) y[i] = 0.5f * x[i] * (1.f + erff(x[i] * 0.70710678f)); }
torch::Tensor gelu(torch::Tensor x) { auto y = torch::empty_like(x); long n = x.numel(); gk<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); return y; }
"""

ext = load_inline(name="gelu_guard_or", cpp_sources="torch::Tensor gelu(torch::Tensor x);", cuda_sources=src, functions=["gelu"])


class ModelNew(nn.Module):
    def forward(self, x):
        if not x.is_cuda or x.numel() > (1 << 28):
            return F.gelu(x)
        return ext.gelu(x)
