import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

leaky_src = """
#include <torch/extension.h>

__global__ void leaky_kernel(const float* x, float* y, float slope, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v >= 0.f ? v : v * slope;
    }
}

torch::Tensor leaky_relu_cuda(torch::Tensor x, double slope) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    leaky_kernel<<<(n + 1023) / 1024, 1024>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)slope, n);
    return y;
}
"""

leaky = load_inline(name="leaky_guard", cpp_sources="torch::Tensor leaky_relu_cuda(torch::Tensor x, double slope);",
                    cuda_sources=leaky_src, functions=["leaky_relu_cuda"])


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_cuda:
            # CPU path for debugging only; the kernel needs device memory
            return F.leaky_relu(x, negative_slope=self.negative_slope)
        return leaky.leaky_relu_cuda(x.contiguous(), self.negative_slope)
