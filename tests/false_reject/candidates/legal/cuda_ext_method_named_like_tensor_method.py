import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu(torch::Tensor x) {
    auto out = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
cpp_src = "torch::Tensor relu(torch::Tensor x);"

ops = load_inline(name="ops", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["relu"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ops = ops

    def forward(self, x):
        # `.relu` is also a tensor method; here the receiver is the extension
        return self.ops.relu(x.contiguous())
