import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
__global__ void relu_inplace(float* x, long n) { long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) x[i] = fmaxf(x[i], 0.f); }
torch::Tensor relu_(torch::Tensor x) { long n = x.numel(); relu_inplace<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), n); return x; }
"""

ext = load_inline(name="relu_inplace_ext", cpp_sources="torch::Tensor relu_(torch::Tensor x);", cuda_sources=src,
                  functions=["relu_"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_(x)
