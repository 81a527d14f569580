import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <cmath>
torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto y = at::matmul(x, w.t()).contiguous();
    float* p = y.data_ptr<float>(); const float* bb = b.data_ptr<float>();
    const int64_t N = y.size(1);
    for (int64_t i = 0; i < y.numel(); ++i) {
        double v = p[i] + bb[i % N];
        p[i] = (float)(0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    }
    return y;
}
"""

ext = load_inline(name="lg_at_matmul", cpp_sources=src, functions=["linear_gelu"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_gelu(x, self.linear.weight, self.linear.bias)
