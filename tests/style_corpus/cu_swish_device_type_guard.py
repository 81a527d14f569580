import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

swish_cuda = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void swish_kernel(const float* __restrict__ x, float* __restrict__ out, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        out[i] = v / (1.0f + __expf(-v));
    }
}

torch::Tensor swish(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const long n = x.numel();
    const int block = 256;
    swish_kernel<<<(n + block - 1) / block, block>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline("swish_devtype", cpp_sources="torch::Tensor swish(torch::Tensor x);", cuda_sources=swish_cuda,
                  functions=["swish"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.device.type != "cuda":
            return x * torch.sigmoid(x)
        return ext.swish(x)
