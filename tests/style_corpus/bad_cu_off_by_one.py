import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
__global__ void tanh_k(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n - 1) y[i] = tanhf(x[i]);
}
torch::Tensor tanh_fwd(torch::Tensor x) { auto y = torch::empty_like(x); long n = x.numel(); tanh_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); return y; }
"""

ext = load_inline(name="tanh_obo", cpp_sources="torch::Tensor tanh_fwd(torch::Tensor x);", cuda_sources=src,
                  functions=["tanh_fwd"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.tanh_fwd(x)
