import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
#include <torch/extension.h>

torch::Tensor linear_fwd(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto out = torch::empty({x.size(0), w.size(0)}, x.options());
    auto X = x.accessor<float, 2>(); auto W = w.accessor<float, 2>(); auto B = b.accessor<float, 1>();
    auto O = out.accessor<float, 2>();
    for (int64_t i = 0; i < x.size(0); ++i)
        for (int64_t j = 0; j < w.size(0); ++j) {
            float acc = B[j];
            for (int64_t k = 0; k < x.size(1); ++k) acc += X[i][k] * W[j][k];
            O[i][j] = acc;
        }
    return out;
}
"""
linear_ext = load_inline(name="linear_ext", cpp_sources=cpp_src, functions=["linear_fwd"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int = 16, out_features: int = 8):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.linear_ext = linear_ext

    def forward(self, x):
        w = self.linear.weight.detach().contiguous()
        return self.linear_ext.linear_fwd(x.contiguous(), w, self.linear.bias.detach())
