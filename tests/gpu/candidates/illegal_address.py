import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
__global__ void bad_kernel(float* out, long n) {
    float* p = (float*)0x10;
    out[0] = p[threadIdx.x];
}
torch::Tensor bad(torch::Tensor x) {
    auto out = torch::empty_like(x);
    bad_kernel<<<1, 32>>>(out.data_ptr<float>(), x.numel());
    cudaDeviceSynchronize();
    return out;
}
"""
ext = load_inline(name="gpu_bad", cpp_sources="torch::Tensor bad(torch::Tensor x);", cuda_sources=src, functions=["bad"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.bad(x)
