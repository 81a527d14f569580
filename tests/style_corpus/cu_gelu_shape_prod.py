import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
#include <math.h>

__global__ void gelu_kernel(const float* x, float* y, int64_t total) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < total) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

void gelu_launch(torch::Tensor x, torch::Tensor y, int64_t total) {
    gelu_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), total);
}
"""

gelu = load_inline(name="gelu_prod", cpp_sources="void gelu_launch(torch::Tensor x, torch::Tensor y, int64_t total);",
                   cuda_sources=source, functions=["gelu_launch"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        total = int(torch.prod(torch.tensor(x.shape)).item())
        assert total == math.prod(x.shape)
        y = torch.empty_like(x)
        gelu.gelu_launch(x, y, total)
        return y
