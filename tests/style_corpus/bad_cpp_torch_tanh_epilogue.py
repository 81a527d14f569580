import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
torch::Tensor linear(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous(); auto wc = w.contiguous();
    const int64_t M = xc.size(0), K = xc.size(1), N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    const float* X = xc.data_ptr<float>(); const float* W = wc.data_ptr<float>(); const float* B = b.data_ptr<float>(); float* Y = y.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i) for (int64_t j = 0; j < N; ++j) {
        double acc = B[j]; for (int64_t k = 0; k < K; ++k) acc += (double)X[i * K + k] * W[j * K + k]; Y[i * N + j] = (float)acc;
    }
    return y;
}
"""

ext = load_inline(name="linear_only", cpp_sources=src, functions=["linear"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = ext.linear(x, self.linear.weight, self.linear.bias)
        return 0.5 * y * (1.0 + torch.tanh(0.7978845608028654 * (y + 0.044715 * y ** 3)))
